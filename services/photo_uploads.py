"""Photos sent in pieces: each piece says where it goes (`Content-Range`), and the photo is
checked and stored whole once its last piece came.

A sender on a weak signal sends a photo a piece at a time, from the byte the server holds on:
a drop costs only the piece on its way, never the photo. A piece that does not start where the
server's bytes end is refused with 409 `upload_offset_mismatch`, naming that offset (in the
body and in `Upload-Offset`), so a sender that lost track goes on from there. A body without
`Content-Range` is the whole photo, as before.

Pieces wait in the database, which every app server shares whatever holds the files (a
folder or a bucket); the photo, once whole, is checked and stored like any other
(services/evidence.py) and its pieces are dropped. Each piece counts against the daily
quotas as it comes, and the whole photo counts only what it takes beyond its pieces, so
nothing counts twice. Pieces of a photo left unfinished for STAGED_PHOTO_DAYS are dropped by
the photo sweep (services/photo_sweep.py).
"""
from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from flask import Response, current_app
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError

from models import PhotoPiece, db, utcnow
from models.schemas import UploadProgress
from services import quotas
from services.database import write_transaction
from services.errors import ServiceError, ValidationFailed, field_problem

RANGE = re.compile(r"bytes (\d{1,10})-(\d{1,10})/(\d{1,10})")
# The smallest piece but the last: a photo of 2 MiB comes in at most 128 pieces.
MIN_PIECE_BYTES = 16 * 1024
HEADER = "Content-Range"

T = TypeVar("T")


@dataclass(frozen=True)
class Piece:
    """Where one piece goes: its first and last byte in the photo, and the photo's size."""

    first: int
    last: int
    total: int


@dataclass(frozen=True)
class Progress:
    """How much of a photo the server holds after a piece that was not the last."""

    offset: int
    total: int


def progress_answer(progress: Progress) -> Response:
    """The 202 to a piece that was not a photo's last: how many bytes the server holds."""
    response = Response(UploadProgress(offset=progress.offset, total=progress.total)
                        .model_dump_json(), status=202, mimetype="application/json")
    response.headers["Upload-Offset"] = str(progress.offset)
    return response


@dataclass(frozen=True)
class Whole:
    """A photo's bytes, all there; `counted` of them already counted against the quotas."""

    data: bytes
    counted: int


class OffsetMismatch(ServiceError):
    """The piece does not start where the bytes the server holds end."""

    status = 409
    code = "upload_offset_mismatch"

    def __init__(self, held: int, total: int) -> None:
        super().__init__(f"the server holds the first {held} bytes of this photo; "
                         f"send it on from byte {held}",
                         details={"offset": held, "total": total},
                         headers={"Upload-Offset": str(held)})


def _refuse(message: str) -> ValidationFailed:
    """A 400 naming the Content-Range header."""
    return ValidationFailed(f"{HEADER}: {message}", details=[field_problem(HEADER, message)])


def parse(header: str, body_bytes: int, max_bytes: int) -> Piece:
    """The piece a Content-Range header names, checked against its body and the largest photo."""
    match = RANGE.fullmatch(header.strip())
    if match is None:
        raise _refuse("write it as 'bytes FIRST-LAST/TOTAL', such as 'bytes 0-65535/204800'")
    first, last, total = (int(part) for part in match.groups())
    if not first <= last < total:
        raise _refuse("FIRST must be at most LAST, and LAST less than TOTAL")
    if total > max_bytes:
        raise _refuse(f"a photo may have at most {max_bytes} bytes")
    if body_bytes != last - first + 1:
        raise _refuse(f"the body has {body_bytes} bytes, the range names {last - first + 1}")
    if last + 1 < total and body_bytes < MIN_PIECE_BYTES:
        raise _refuse(f"every piece but the last needs at least {MIN_PIECE_BYTES} bytes")
    return Piece(first, last, total)


def continues(header: str | None) -> bool:
    """Whether a Content-Range header names a later piece of a photo (not its first byte)."""
    match = RANGE.fullmatch((header or "").strip())
    return match is not None and int(match.group(1)) > 0


def held(upload: str) -> tuple[int, int | None]:
    """How many bytes of an upload the server holds from byte 0 without a gap, and its size."""
    offset, total = 0, None
    for start, length, size in db.session.execute(
            select(PhotoPiece.start, func.length(PhotoPiece.data), PhotoPiece.total)
            .where(PhotoPiece.upload == upload).order_by(PhotoPiece.start)):
        if start != offset or total not in (None, size):
            break
        offset, total = offset + int(length), size
    return offset, total


def drop(upload: str) -> None:
    """Forget every piece of an upload."""
    with write_transaction() as session:
        session.execute(delete(PhotoPiece).where(PhotoPiece.upload == upload))


def receive(company_id: int, link_token: str | None, upload: str, raw: bytes,
            header: str | None) -> Whole | Progress:
    """Keep one piece (or a whole body) of a photo: the whole photo once all of it came,
    else how far it has come. The piece is counted against the daily quotas first."""
    if header is None:
        return Whole(raw, 0)
    piece = parse(header, len(raw), int(current_app.config["MAX_PHOTO_BYTES"]))
    offset, total = held(upload)
    if total is not None and total != piece.total:  # another photo under the same key: anew
        drop(upload)
        offset = 0
    if piece.first != offset:
        raise OffsetMismatch(offset, piece.total)
    quotas.check_disk(len(raw))
    quotas.reserve(company_id, link_token, len(raw))
    try:
        with write_transaction() as session:
            session.add(PhotoPiece(company_id=company_id, upload=upload, total=piece.total,
                                   start=piece.first, data=raw))
    except IntegrityError:  # the same piece from another sender at the same moment
        raise OffsetMismatch(held(upload)[0], piece.total) from None
    if piece.last + 1 < piece.total:
        return Progress(piece.last + 1, piece.total)
    data = b"".join(db.session.scalars(select(PhotoPiece.data).where(
        PhotoPiece.upload == upload).order_by(PhotoPiece.start)))
    return Whole(data, piece.total)


def take(company_id: int, link_token: str | None, upload: str, raw: bytes, header: str | None,
         attach: Callable[[Whole], T]) -> T | Progress:
    """Receive a piece; once the photo is whole, `attach` it and drop its pieces (whether it
    was kept or refused: a sender that tries again starts the photo anew)."""
    got = receive(company_id, link_token, upload, raw, header)
    if isinstance(got, Progress):
        return got
    try:
        return attach(got)
    finally:
        if header is not None:
            drop(upload)


def drop_stale(remove: bool, now: dt.datetime | None = None) -> int:
    """Uploads with no new piece for STAGED_PHOTO_DAYS: how many, and their pieces deleted
    when `remove`."""
    cutoff = (now or utcnow()) - dt.timedelta(days=float(current_app.config["STAGED_PHOTO_DAYS"]))
    stale = select(PhotoPiece.upload).group_by(PhotoPiece.upload).having(
        func.max(PhotoPiece.created_at) < cutoff)
    uploads = list(db.session.scalars(stale))
    if remove and uploads:
        with write_transaction() as session:
            session.execute(delete(PhotoPiece).where(PhotoPiece.upload.in_(uploads)))
    return len(uploads)
