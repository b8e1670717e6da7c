"""Photos sent in pieces: each piece says where it goes (`Content-Range`), and the photo is
checked and stored whole once its last piece came.

A sender on a weak signal sends a photo a piece at a time, from the byte the server holds on:
a drop costs only the piece on its way, never the photo. A piece that does not start where the
server's bytes end is refused with 409 `upload_offset_mismatch`, naming that offset (in the
body and in `Upload-Offset`), so a sender that lost track goes on from there; but a piece of a
photo whose bytes the server holds whole (the request that made them whole is still making the
photo, or its answer was lost) is answered with the photo, as its last piece would be. A body
without `Content-Range` is the whole photo, as before.

Pieces wait as files of the store (services/files/storage.py: a folder or a bucket, which every
app server shares), never in the database, whose file would only grow; the photo, once whole,
is checked and stored like any other (services/capture/evidence.py) and its pieces are dropped. Each
piece counts against the daily quotas and the disk reserve as it comes, and the whole photo
counts only what it takes beyond its pieces, so nothing counts twice. A link (or, through the
API, a company) has at most PHOTO_UPLOADS_OPEN_PER_LINK photos begun and unfinished at once;
one with no new piece for PHOTO_PIECE_HOURS is dropped: by the next piece of the same sender,
by a sweep the running service makes every PHOTO_PIECE_SWEEP_S as pieces come, and by the
nightly photo sweep (services/files/photo_sweep.py).
"""
from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from flask import Response, current_app

from models.schemas import UploadProgress
from services.files import quotas, storage
from services.platform.errors import ServiceError, ValidationFailed, field_problem

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


def _digest(text: str) -> str:
    """A short digest naming an owner or an upload among the store's pieces."""
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:32]


def owner_of(company_id: int, link_token: str | None) -> str:
    """The folder a sender's uploads wait in: its link, else (the API) its company."""
    return _digest(f"l:{link_token}" if link_token else f"c:{company_id}")


def _folder(owner: str, upload: str) -> str:
    """Where an upload's pieces wait: '<owner>/<upload>/'."""
    return f"{owner}/{_digest(upload)}/"


@dataclass(frozen=True)
class Held:
    """One stored piece: its first byte, the photo's size, when it came (the name says, so the
    app's clock decides, whatever the store's), its length and its name in the store."""

    first: int
    total: int
    when: int
    size: int
    name: str


def _parse_name(entry: storage.Entry) -> Held:
    """A stored piece from its entry."""
    first, total, when = (int(part) for part in entry.name.rsplit("/", 1)[1].split("-"))
    return Held(first, total, when, entry.size, entry.name)


def _pieces(folder: str) -> list[Held]:
    """An upload's pieces by first byte (one per first byte: the earliest)."""
    found: dict[int, Held] = {}
    for piece in sorted((_parse_name(e) for e in storage.file_store().list_pieces(folder)),
                        key=lambda piece: (piece.first, piece.when)):
        found.setdefault(piece.first, piece)
    return list(found.values())


def _held(pieces: list[Held]) -> tuple[int, int | None]:
    """How many bytes the pieces hold from byte 0 on without a gap, and the photo's size."""
    offset, total = 0, None
    for piece in pieces:
        if piece.first != offset or total not in (None, piece.total):
            break
        offset, total = offset + piece.size, piece.total
    return offset, total


def held(owner: str, upload: str) -> tuple[int, int | None]:
    """How many bytes of an upload the server holds from byte 0 without a gap, and its size."""
    return _held(_pieces(_folder(owner, upload)))


def _drop_folder(folder: str) -> None:
    """Remove every piece under a folder."""
    store = storage.file_store()
    for entry in store.list_pieces(folder):
        store.remove_piece(entry.name)


def drop(owner: str, upload: str) -> None:
    """Forget every piece of an upload."""
    _drop_folder(_folder(owner, upload))


def _uploads(prefix: str) -> dict[str, float]:
    """Each upload folder under `prefix` ('' for all) and its newest piece's time."""
    newest: dict[str, float] = {}
    for entry in storage.file_store().list_pieces(prefix):
        folder = entry.name.rsplit("/", 1)[0] + "/"
        newest[folder] = max(newest.get(folder, 0.0), float(_parse_name(entry).when))
    return newest


def _expiry_s() -> float:
    """How long an upload may go without a new piece before it is dropped."""
    return float(current_app.config["PHOTO_PIECE_HOURS"]) * 3600


def _make_room(owner: str, folder: str, sender: str) -> None:
    """Before a new upload of `owner`: drop its expired ones; refuse past its open-upload cap."""
    cutoff = time.time() - _expiry_s()
    open_now = 0
    for other, newest in _uploads(owner + "/").items():
        if newest < cutoff:
            _drop_folder(other)
        elif other != folder:
            open_now += 1
    most = int(current_app.config["PHOTO_UPLOADS_OPEN_PER_LINK"])
    if open_now >= most:
        raise ServiceError(f"{sender} has {most} photos begun and not finished; finish those, "
                           "or send this one again later", status=429, code="too_many_uploads",
                           headers={"Retry-After": "60"})


_sweep_lock = threading.Lock()
_last_sweep = [0.0]


def sweep_if_due() -> None:
    """While the service runs: drop expired uploads at most once every PHOTO_PIECE_SWEEP_S."""
    now = time.time()
    if 0 <= now - _last_sweep[0] < float(current_app.config["PHOTO_PIECE_SWEEP_S"]):
        return  # swept lately (a clock set back counts as due)
    if not _sweep_lock.acquire(blocking=False):
        return  # another request is sweeping
    try:
        _last_sweep[0] = now
        drop_stale(remove=True)
    finally:
        _sweep_lock.release()


def receive(company_id: int, link_token: str | None, upload: str, raw: bytes,
            header: str | None) -> Whole | Progress:
    """Keep one piece (or a whole body) of a photo: the whole photo once all of it came,
    else how far it has come. The piece is counted against the daily quotas first."""
    if header is None:
        return Whole(raw, 0)
    piece = parse(header, len(raw), int(current_app.config["MAX_PHOTO_BYTES"]))
    sweep_if_due()
    owner = owner_of(company_id, link_token)
    folder = _folder(owner, upload)
    pieces = _pieces(folder)
    offset, total = _held(pieces)
    if pieces and time.time() - max(p.when for p in pieces) > _expiry_s():
        _drop_folder(folder)  # expired: it starts anew
        pieces, offset, total = [], 0, None
    if total is not None and total != piece.total:  # another photo under the same key: anew
        _drop_folder(folder)
        pieces, offset = [], 0
    if piece.first != offset:
        if offset == total:  # every byte is here: another request is making the photo of them
            return _taken_over(storage.file_store(), owner, upload, folder, piece, raw)
        raise OffsetMismatch(offset, piece.total)
    if not pieces:
        _make_room(owner, folder, "this link" if link_token else "the company")
    quotas.check_disk(len(raw))
    quotas.reserve(company_id, link_token, len(raw))
    store = storage.file_store()
    if not store.put_piece(f"{folder}{piece.first:010d}-{piece.total}-{int(time.time())}", raw):
        # the same piece from another sender at the same moment
        raise OffsetMismatch(held(owner, upload)[0], piece.total)
    if piece.last + 1 < piece.total:
        return Progress(piece.last + 1, piece.total)
    return _joined(store, owner, upload, folder, piece.total)


def _joined(store: storage.FileStore, owner: str, upload: str, folder: str, total: int) -> Whole:
    """The whole photo from its held pieces, from byte 0 on without a gap; an offset mismatch
    when they no longer make it whole."""
    run, end = [], 0  # the pieces from byte 0 on without a gap
    for held_piece in _pieces(folder):
        if held_piece.first != end or held_piece.total != total:
            break
        run.append(held_piece)
        end += held_piece.size
    try:  # another request may have joined (and dropped) these pieces a moment ago
        if end != total:
            raise KeyError(folder)
        data = b"".join(store.read_piece(held_piece.name) for held_piece in run)
    except KeyError:
        raise OffsetMismatch(held(owner, upload)[0], total) from None
    if len(data) != total:
        raise OffsetMismatch(held(owner, upload)[0], total)
    return Whole(data, total)


def _taken_over(store: storage.FileStore, owner: str, upload: str, folder: str, piece: Piece,
                raw: bytes) -> Whole:
    """A piece of a photo whose bytes are all held already (the request joining them is still at
    work, or its answer was lost): this request makes the photo of them too, so its sender is
    answered with the photo rather than sent round; bytes that differ from those held are an
    offset mismatch, as before."""
    whole = _joined(store, owner, upload, folder, piece.total)
    if whole.data[piece.first:piece.last + 1] != raw:
        raise OffsetMismatch(piece.total, piece.total)
    return whole


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
            drop(owner_of(company_id, link_token), upload)


def drop_stale(remove: bool) -> int:
    """Uploads with no new piece for PHOTO_PIECE_HOURS: how many, and their pieces removed
    when `remove`."""
    cutoff = time.time() - _expiry_s()
    stale = [folder for folder, newest in _uploads("").items() if newest < cutoff]
    if remove:
        for folder in stale:
            _drop_folder(folder)
    return len(stale)
