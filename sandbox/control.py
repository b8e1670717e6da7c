"""The /_sandbox control endpoints (faults, token revocation, hourly and 10-second limits, the
company's clock, tool switches, how attachments are added, added latency, the error shape,
a change event's lines put on change orders) and fault use.

Fault state lives in the database, so every thread and process serving the file agrees on
how many faults are left.
"""
from __future__ import annotations

import contextlib
import socket
import time
from typing import Any

from flask import Blueprint, Response, g, jsonify, request

from sandbox.auth import bearer_company, revoke_tokens
from sandbox.change_orders import KINDS, STATUSES, put_on_change_orders
from sandbox.common import ApiError, get_db, json_body, v2_error
from sandbox.store import iso_now, next_id, write_transaction

bp = Blueprint("sandbox_control", __name__, url_prefix="/_sandbox")

WRITE_METHODS = ("POST", "PATCH")
DROP_CONNECTION = 0
MAX_DELAY_S = 120.0


def _fault_json(row: dict[str, Any]) -> dict[str, Any]:
    """A stored fault as the control API shows it."""
    return {"id": row["id"], "count": row["remaining"], "status": row["status"],
            "message": row["message"], "delay_s": row["delay_s"],
            "after_commit": bool(row["after_commit"]), "match": row["match"],
            "methods": row["methods"].split(","), "retry_after": row["retry_after"]}


def _number_problems(count: Any, status: Any, delay_s: Any) -> dict[str, list[str]]:
    """What is wrong with a fault's count, status and delay, by field."""
    errors: dict[str, list[str]] = {}
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        errors["count"] = ["must be a positive integer"]
    if not isinstance(status, int) or isinstance(status, bool) or not (
            status == DROP_CONNECTION or 400 <= status <= 599):
        errors["status"] = ["must be 0 (drop the connection) or an HTTP error status"]
    if not isinstance(delay_s, int | float) or isinstance(delay_s, bool) or not (
            0 <= delay_s <= MAX_DELAY_S):
        errors["delay_s"] = [f"must be a number of seconds between 0 and {MAX_DELAY_S:g}"]
    return errors


def _other_problems(body: dict[str, Any], methods: Any, retry_after: Any) -> dict[str, list[str]]:
    """What is wrong with a fault's methods, Retry-After, message and match, by field."""
    errors: dict[str, list[str]] = {}
    if not isinstance(methods, list) or not methods or not all(
            isinstance(method, str) and method.isalpha() for method in methods):
        errors["methods"] = ["must be a list of HTTP methods"]
    if retry_after is not None and (not isinstance(retry_after, int) or retry_after < 0):
        errors["retry_after"] = ["must be a non-negative integer"]
    for key in ("message", "match"):
        if body.get(key) is not None and not isinstance(body[key], str):
            errors[key] = ["must be a string"]
    return errors


@bp.post("/faults")
def add_fault() -> tuple[Response, int]:
    """Make the company's next ``count`` matching calls fail (by default its writes)."""
    company_id = bearer_company()
    body = json_body()
    count, status = body.get("count"), body.get("status")
    delay_s = body.get("delay_s", 0)
    methods = body.get("methods", list(WRITE_METHODS))
    retry_after = body.get("retry_after")
    errors = {**_number_problems(count, status, delay_s),
              **_other_problems(body, methods, retry_after)}
    if errors:
        raise ApiError(422, "Invalid fault", errors)
    db = get_db()
    row = {"company_id": company_id, "remaining": count, "status": status,
           "message": body.get("message") or "Injected sandbox fault",
           "delay_s": float(delay_s), "after_commit": int(bool(body.get("after_commit"))),
           "match": body.get("match"), "methods": ",".join(m.upper() for m in methods),
           "retry_after": retry_after, "created_at": iso_now()}
    with write_transaction(db):
        row["id"] = next_id(db)
        db.table("faults").insert(row)
    return jsonify(_fault_json(row)), 201


@bp.get("/faults")
def list_faults() -> Response:
    """The company's faults that still have uses left, oldest first."""
    company_id = bearer_company()
    rows = get_db().query("SELECT * FROM faults WHERE company_id = ? AND remaining > 0 "
                          "ORDER BY id", [company_id])
    return jsonify([_fault_json(row) for row in rows])


@bp.delete("/faults")
def clear_faults() -> tuple[str, int]:
    """Forget all of the company's faults."""
    company_id = bearer_company()
    db = get_db()
    with write_transaction(db):
        db.execute("DELETE FROM faults WHERE company_id = ?", [company_id])
    return "", 204


@bp.post("/tokens/revoke")
def revoke() -> Response:
    """Invalidate every current access token of the company."""
    return jsonify({"revoked": revoke_tokens(bearer_company())})


@bp.post("/rate_limit")
def set_rate_limit() -> Response:
    """Set (or with null, reset to the configured default) the company's hourly call limit."""
    company_id = bearer_company()
    per_hour = json_body().get("per_hour")
    if per_hour is not None and (not isinstance(per_hour, int) or per_hour < 0):
        raise ApiError(422, "Invalid rate limit", {"per_hour": ["must be a non-negative integer"]})
    db = get_db()
    with write_transaction(db):
        db.execute("UPDATE companies SET rate_limit_per_hour = ? WHERE id = ?",
                   [per_hour, company_id])
    return jsonify({"per_hour": per_hour})


SPIKE_WINDOWS_S = (10, 60)


@bp.post("/spike_limit")
def set_spike_limit() -> Response:
    """Set the company's limit of calls per window: {"per_10s": n} (null switches it off,
    "default" goes back to the sandbox's SANDBOX_SPIKE_LIMIT), and optionally "window_s": 60
    for the 60-second window some integrators have seen instead of 10, and "rolling": true for
    a window that rolls (each call counts for window_s seconds after it was made)."""
    company_id = bearer_company()
    body = json_body()
    per_window = body.get("per_10s")
    window_s = body.get("window_s", 10)
    rolling = body.get("rolling", False)
    if not isinstance(rolling, bool):
        raise ApiError(422, "Invalid spike window", {"rolling": ["must be true or false"]})
    if per_window is not None and per_window != "default" and (
            not isinstance(per_window, int) or isinstance(per_window, bool) or per_window < 0):
        raise ApiError(422, "Invalid spike limit", {"per_10s": ["must be a non-negative integer"]})
    if window_s not in SPIKE_WINDOWS_S:
        raise ApiError(422, "Invalid spike window", {"window_s": ["must be 10 or 60"]})
    stored = {None: 0, "default": None}.get(per_window, per_window)  # 0 stored means off
    db = get_db()
    with write_transaction(db):
        db.execute("UPDATE companies SET spike_limit = ?, spike_window_s = ?, spike_rolling = ? "
                   "WHERE id = ?", [stored, window_s, int(rolling), company_id])
        db.execute("DELETE FROM spike_calls WHERE company_id = ?", [company_id])
    return jsonify({"per_10s": per_window, "window_s": window_s, "rolling": rolling})


ERROR_SHAPES = ("v1", "v2")


@bp.post("/error_shape")
def set_error_shape() -> Response:
    """Answer the company's errors as v1 endpoints do ({"message", "errors"}) or as v2.0 ones
    do ({"error": {"code", "message", "details"}}); both appear in Procore's documents."""
    company_id = bearer_company()
    shape = json_body().get("shape")
    if shape not in ERROR_SHAPES:
        raise ApiError(422, "Invalid error shape", {"shape": ["must be v1 or v2"]})
    db = get_db()
    with write_transaction(db):
        db.execute("UPDATE companies SET error_shape = ? WHERE id = ?", [shape, company_id])
    return jsonify({"shape": shape})


MAX_LATENCY_MS = 5000
ATTACHMENT_MODES = ("add", "replace")


@bp.post("/latency")
def set_latency() -> Response:
    """Make every REST call of the company take `ms` longer (null or 0: no added latency)."""
    company_id = bearer_company()
    ms = json_body().get("ms")
    if ms is not None and (not isinstance(ms, int | float) or isinstance(ms, bool)
                           or not 0 <= ms <= MAX_LATENCY_MS):
        raise ApiError(422, "Invalid latency", {"ms": [f"must be 0 to {MAX_LATENCY_MS}"]})
    db = get_db()
    with write_transaction(db):
        db.execute("UPDATE companies SET latency_ms = ? WHERE id = ?", [ms, company_id])
    return jsonify({"ms": ms})


@bp.post("/attachments")
def set_attachments_mode() -> Response:
    """Whether a change event's `attachments_by_uuid` adds to its files ("add", the default) or
    replaces them ("replace"): Procore's documents do not say which it does; and with
    "rename": true, files are stored under another name than sent (as a store that makes
    names unique or safe would)."""
    company_id = bearer_company()
    body = json_body()
    mode, rename = body.get("mode"), body.get("rename")
    if mode is not None and mode not in ATTACHMENT_MODES:
        raise ApiError(422, "Invalid attachments mode", {"mode": ["must be add or replace"]})
    if rename is not None and not isinstance(rename, bool):
        raise ApiError(422, "Invalid attachments mode", {"rename": ["must be true or false"]})
    db = get_db()
    with write_transaction(db):
        if mode is not None:
            db.execute("UPDATE companies SET attachments_mode = ? WHERE id = ?",
                       [mode, company_id])
        if rename is not None:
            db.execute("UPDATE companies SET rename_files = ? WHERE id = ?",
                       [int(rename), company_id])
    return jsonify({"mode": mode, "rename": rename})


@bp.post("/clock")
def advance_clock() -> Response:
    """Move the company's sandbox clock forward, or with {"freeze": true} stop it where it is,
    or with {"skew_s": n} set it n seconds apart from real time (Procore's clock is not ours:
    X-Rate-Limit-Reset and Date then both read n seconds ahead, or behind when negative)."""
    company_id = bearer_company()
    body = json_body()
    if "skew_s" in body:
        skew = body["skew_s"]
        if not isinstance(skew, int | float) or isinstance(skew, bool) or abs(skew) > 86400:
            raise ApiError(422, "Invalid clock skew", {"skew_s": ["must be a number of seconds "
                                                                  "within a day"]})
        db = get_db()
        with write_transaction(db):
            db.execute("UPDATE companies SET clock_offset_s = ? WHERE id = ?",
                       [float(skew), company_id])
        return jsonify({"skew_s": skew})
    if body.get("freeze") is True:
        db = get_db()
        with write_transaction(db):
            db.execute("UPDATE companies SET clock_frozen_at = ?, clock_offset_s = 0 "
                       "WHERE id = ?", [time.time(), company_id])
        return jsonify({"frozen": True})
    seconds = body.get("advance_s")
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
        raise ApiError(422, "Invalid clock step", {"advance_s": ["must be 0 or more seconds"]})
    db = get_db()
    with write_transaction(db):
        db.execute("UPDATE companies SET clock_offset_s = coalesce(clock_offset_s, 0) + ? "
                   "WHERE id = ?", [float(seconds), company_id])
    return jsonify({"advanced_s": seconds})


@bp.post("/projects/<int:project_id>/tools")
def set_tool(project_id: int) -> Response:
    """Switch one of the project's tools on or off, e.g. {"engine_name": "change_events"}."""
    company_id = bearer_company()
    body = json_body()
    if not isinstance(body.get("is_active"), bool):
        raise ApiError(422, "Invalid tool switch", {"is_active": ["must be true or false"]})
    db = get_db()
    with write_transaction(db):
        cursor = db.execute(
            "UPDATE project_tools SET is_active = ? WHERE engine_name = ? AND project_id IN "
            "(SELECT id FROM projects WHERE id = ? AND company_id = ?)",
            [int(body["is_active"]), body.get("engine_name"), project_id, company_id])
    if cursor.rowcount == 0:
        raise ApiError(404, "No such tool on this project")
    return jsonify({"engine_name": body["engine_name"], "is_active": body["is_active"]})


@bp.post("/change_events/<int:event_id>/change_orders")
def change_orders(event_id: int) -> tuple[Response, int]:
    """Put a change event's lines on change orders as a PM does in Procore: {"kind":
    "commitment"} one per commitment its lines are proposed on, {"kind": "prime"} one of the
    prime contract for all its lines; "status" (draft, pending, approved, rejected, void) and
    an optional "title". Asked again, the same change orders take the new status."""
    company_id = bearer_company()
    body = json_body()
    kind, status, title = body.get("kind"), body.get("status", "draft"), body.get("title")
    errors: dict[str, list[str]] = {}
    if kind not in KINDS:
        errors["kind"] = ["must be commitment or prime"]
    if status not in STATUSES:
        errors["status"] = [f"must be one of {', '.join(STATUSES)}"]
    if title is not None and (not isinstance(title, str) or not title.strip()):
        errors["title"] = ["must be a non-empty string"]
    if errors:
        raise ApiError(422, "Invalid change order switch", errors)
    db = get_db()
    event = next(db.query("SELECT * FROM change_events WHERE id = ? AND company_id = ? AND "
                          "deleted_at IS NULL", [event_id, company_id]), None)
    if event is None:
        raise ApiError(404, "Change event not found")
    return jsonify(put_on_change_orders(db, event, kind, status, title)), 201


def take_fault(company_id: int) -> dict[str, Any] | None:
    """Use up one matching fault for this API call, if the company has one."""
    db = get_db()
    candidates = list(db.query("SELECT * FROM faults WHERE company_id = ? AND remaining > 0 "
                               "ORDER BY id", [company_id]))
    for row in candidates:
        if request.method not in row["methods"].split(","):
            continue
        if row["match"] and row["match"] not in request.full_path:
            continue
        with write_transaction(db):
            # Another thread may have used the last one since the read above.
            used = db.execute("UPDATE faults SET remaining = remaining - 1 "
                              "WHERE id = ? AND remaining > 0", [row["id"]]).rowcount
        if used:
            return row
    return None


def fault_response(fault: dict[str, Any]) -> Response:
    """Wait out the fault's delay, then answer its error or drop the connection."""
    if fault["delay_s"]:
        time.sleep(fault["delay_s"])
    if fault["status"] == DROP_CONNECTION:
        _drop_connection()
    response = jsonify(v2_error(fault["status"], fault["message"])
                       if g.get("error_shape") == "v2" else {"message": fault["message"]})
    # Status 0 lands here only when the server gave no socket to drop.
    response.status_code = fault["status"] or 502
    if fault["retry_after"] is not None:
        response.headers["Retry-After"] = str(fault["retry_after"])
    return response


def _drop_connection() -> None:
    """Shut the client socket so the caller sees the connection drop without an answer."""
    sock = request.environ.get("werkzeug.socket") or request.environ.get("gunicorn.socket")
    if sock is not None:
        with contextlib.suppress(OSError):  # the client may have gone away already
            sock.shutdown(socket.SHUT_RDWR)
