"""Procore's direct-upload flow: create an upload, send the file to storage, then attach by uuid.

``POST /rest/v1.1/projects/{project_id}/uploads`` answers ``{uuid, url, fields}``; the file goes
to ``url`` as a multipart POST holding every field plus ``file``, without Procore's token
(procore/documentation tutorials/tutorial_uploads.md, "Non-Segmented Direct Uploads").
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlite_utils
from flask import Blueprint, Response, current_app, g, jsonify, request, url_for

from sandbox.auth import sandbox_now
from sandbox.common import ApiError, get_db, json_body
from sandbox.rest import company_project, guard
from sandbox.store import iso_now, next_id, write_transaction

bp = Blueprint("sandbox_uploads", __name__, url_prefix="/rest/v1.1")
bp.before_request(guard)
storage = Blueprint("sandbox_storage", __name__)

_ULID_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# The fields an upload's answer gives; storage wants each of them back, and nothing else, with
# the file last (as S3's POST policy does).
SIGNED_FIELDS = ("key", "Content-Type", "Content-Disposition", "policy", "x-amz-algorithm",
                 "x-amz-signature")
# How long the fields may be used (the policy's expiration).
UPLOAD_TTL_S = 3600
# How long a completed upload may still be attached to a record (Procore: a week).
UPLOAD_KEPT_S = 7 * 24 * 3600


def _created(upload: dict[str, Any]) -> float:
    """When an upload was made (unix seconds)."""
    return datetime.fromisoformat(upload["created_at"].replace("Z", "+00:00")).timestamp()


def stored_name(db: sqlite_utils.Database, filename: str, attachment_id: int) -> str:
    """The name a file is kept under: as sent, or, with the company's rename switch, made
    unique with the attachment's id ("photo.jpg" -> "photo_4321.jpg")."""
    if not (db.table("companies").get(g.company_id).get("rename_files") or 0):
        return filename
    stem, dot, extension = filename.rpartition(".")
    short = str(attachment_id)[-4:]
    return f"{stem}_{short}.{extension}" if dot and stem else f"{filename}_{short}"


def _upload_uuid() -> str:
    """A 26-character id shaped like Procore's upload uuids (01FZ8QATJYD0K7BZG2PP5GB4KN)."""
    return "01" + "".join(secrets.choice(_ULID_ALPHABET) for _ in range(24))


def _signature(key: str) -> str:
    """The storage policy signature of a key, checked when the file arrives."""
    secret = current_app.config["SECRET_KEY"] or current_app.config["SANDBOX_DB_PATH"]
    return hmac.new(str(secret).encode(), key.encode(), hashlib.sha256).hexdigest()


@bp.post("/projects/<int:project_id>/uploads")
def create_upload(project_id: int) -> tuple[Response, int]:
    """Create a non-segmented upload; the answer says where and how to send the file."""
    project = company_project(project_id)
    body = json_body()
    filename = body.get("response_filename")
    content_type = body.get("response_content_type") or "application/octet-stream"
    if not isinstance(filename, str) or not filename.strip() or not isinstance(content_type, str):
        raise ApiError(422, "Validation failed: response_filename can't be blank",
                       {"response_filename": ["can't be blank"]})
    uuid = _upload_uuid()
    key = f"companies/{g.company_id}/{uuid}"
    db = get_db()
    with write_transaction(db):
        db.table("uploads").insert({
            "uuid": uuid, "company_id": g.company_id, "project_id": project["id"],
            "filename": filename[:255], "content_type": content_type, "key": key,
            "signature": _signature(key), "status": "ready", "size": None, "sha256": None,
            "created_at": iso_now()})
    fields = dict(zip(SIGNED_FIELDS, (key, content_type, f'inline; filename="{filename}"',
                                      "sandbox", "AWS4-HMAC-SHA256", _signature(key)),
                      strict=True))
    return jsonify({"uuid": uuid, "url": url_for("sandbox_storage.receive", _external=True),
                    "fields": fields}), 201


@storage.post("/_sandbox/storage")
def receive() -> tuple[str, int] | Response:
    """The storage service: the returned fields and a ``file`` part, and no Procore token."""
    if request.headers.get("Authorization"):
        return _storage_error(400, "InvalidArgument",
                              "Only one auth mechanism allowed; only the policy fields may be sent")
    names = _part_names()
    if "file" in names and names[-1] != "file":
        return _storage_error(400, "InvalidArgument", "The file must be the last field of the "
                                                      "form; fields after it are not read")
    key = request.form.get("key", "")
    upload = next(get_db().query("SELECT * FROM uploads WHERE key = ?", [key]), None)
    if upload is None or not hmac.compare_digest(request.form.get("x-amz-signature", ""),
                                                 upload["signature"]):
        return _storage_error(403, "AccessDenied", "Invalid according to Policy")
    missing = [name for name in SIGNED_FIELDS if name not in request.form]
    if missing:
        return _storage_error(403, "AccessDenied", "Invalid according to Policy: Policy "
                                                   f"Condition failed: {', '.join(missing)}")
    extra = [name for name in request.form if name not in SIGNED_FIELDS]
    if extra:
        return _storage_error(403, "AccessDenied", "Invalid according to Policy: Extra input "
                                                   f"fields: {', '.join(extra)}")
    if sandbox_now(get_db(), upload["company_id"]) > _created(upload) + UPLOAD_TTL_S:
        return _storage_error(403, "AccessDenied", "Invalid according to Policy: Policy expired.")
    file = request.files.get("file")
    if file is None:
        return _storage_error(400, "InvalidArgument", "POST requires exactly one file upload")
    data = file.read()
    folder = Path(current_app.config["SANDBOX_FILES_DIR"]) / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / upload["uuid"]).write_bytes(data)
    db = get_db()
    with write_transaction(db):
        db.table("uploads").update(upload["uuid"], {
            "status": "complete", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return "", 204


def _part_names() -> list[str]:
    """The multipart form's field names, in the order they were sent."""
    boundary = request.mimetype_params.get("boundary", "").encode()
    if not boundary:
        return []
    names = []
    for part in request.get_data(cache=True).split(b"--" + boundary)[1:]:
        found = re.search(rb'name="([^"]*)"', part.split(b"\r\n\r\n", 1)[0])
        if found:
            names.append(found.group(1).decode("utf-8", "replace"))
    return names


def _storage_error(status: int, code: str, message: str) -> Response:
    """An S3-style XML error."""
    return Response(f"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>"
                    f"<Message>{message}</Message></Error>", status=status,
                    mimetype="application/xml")


def completed_uploads(db: sqlite_utils.Database, refs: Any,
                      errors: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The completed uploads named by ``[{upload_uuid}]``; field errors for the others."""
    if refs is None:
        return []
    if not isinstance(refs, list):
        errors["attachments_by_uuid"] = ["must be an array"]
        return []
    found = []
    for index, ref in enumerate(refs):
        uuid = ref.get("upload_uuid") if isinstance(ref, dict) else None
        upload = None if not isinstance(uuid, str) else next(db.query(
            "SELECT * FROM uploads WHERE uuid = ? AND company_id = ?", [uuid, g.company_id]), None)
        if upload is None:
            errors.setdefault(f"attachments_by_uuid[{index}]", []).append(
                f"upload {uuid!r} does not exist")
        elif upload["status"] != "complete":
            errors.setdefault(f"attachments_by_uuid[{index}]", []).append(
                f"upload {uuid!r} has no file yet")
        elif _created(upload) + UPLOAD_KEPT_S < sandbox_now(db, g.company_id):
            errors.setdefault(f"attachments_by_uuid[{index}]", []).append(
                f"upload {uuid!r} has expired")
        else:
            found.append(upload)
    return found


def store_uploads(db: sqlite_utils.Database, kind: str, owner_id: int,
                  uploads: list[dict[str, Any]]) -> None:
    """Turn completed uploads into attachments of a record (call in a write transaction)."""
    folder = Path(current_app.config["SANDBOX_FILES_DIR"])
    for upload in uploads:
        data = (folder / "uploads" / upload["uuid"]).read_bytes()
        attachment_id = next_id(db)
        (folder / str(attachment_id)).write_bytes(data)
        db.table("attachments").insert({
            "id": attachment_id, "company_id": g.company_id, "owner_kind": kind,
            "owner_id": owner_id,
            "filename": stored_name(db, upload["filename"], attachment_id),
            "content_type": upload["content_type"], "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "created_at": iso_now()})
