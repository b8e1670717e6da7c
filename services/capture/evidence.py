"""A ticket's evidence: its photos and signature image, checked, counted, stored and served.

Every image is decoded and re-encoded in the image pool (services/files/image_pool.py) within the
request's time budget, counted against the daily quotas and the disk reserve, and only then
stored; nothing is stored for a request with one bad image.
"""
from __future__ import annotations

import contextlib
import errno
import time
from types import SimpleNamespace
from typing import Any

from flask import current_app, g
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from models import StagedPhoto, TicketPhoto, db
from models import Ticket as TicketRecord
from models.schemas import PhotoIn, PhotosInput, SignatureIn, Ticket, TicketInput
from services.files import image_pool, quotas, storage
from services.files import photos as images
from services.platform.database import write_transaction
from services.platform.errors import Conflict, NotFound, ValidationFailed, field_problem
from services.platform.validation import validation_details
from services.platform.web import work_owner
from services.tickets import signatures
from services.tickets.ticket_records import check_unwritten, find_ticket, locked
from services.tickets.ticket_shapes import Wait, get_ticket
from services.webhooks import webhooks

MAX_PHOTOS = 12


def _process_images(function, raws: list[bytes]) -> list[images.ProcessedImage | images.ImageRejected]:
    """Run `function` over each image in the decoding pool, within the request's time budget."""
    config = current_app.config
    if not raws:
        return []
    if int(config["IMAGE_WORKERS"]) <= 0:  # decoding in this process: only for tests of the steps
        results: list[images.ProcessedImage | images.ImageRejected] = []
        for raw in raws:
            try:
                results.append(function(raw))
            except images.ImageRejected as error:
                results.append(error)
        return results
    now = time.monotonic()
    deadline = g.setdefault("image_deadline", now + float(config["IMAGE_REQUEST_BUDGET_S"]))
    settings = image_pool.PoolSettings(config["IMAGE_WORKERS"], config["IMAGE_CPU_SECONDS"],
                                       config["IMAGE_MEMORY_BYTES"])
    return image_pool.run_all([(function, (raw,), {}) for raw in raws], settings,
                              max(0.0, deadline - now), owner=work_owner(),
                              company_requests=int(config["IMAGE_COMPANY_REQUESTS"]))


def check_photos(items: list[PhotoIn], field: str, first_position: int
                  ) -> tuple[list[tuple[dict[str, Any], images.ProcessedImage]], list[dict[str, str]]]:
    """Decode, verify and re-encode photos in the decoding pool; collect a problem per bad photo."""
    max_bytes = current_app.config["MAX_PHOTO_BYTES"]
    checked, problems = [], []

    def refuse(i: int, item: PhotoIn, message: str) -> None:
        label = f" ({item.name})" if item.name else ""
        problems.append(field_problem(f"{field}[{i}]", f"photo {i + 1}{label}: {message}"))

    raws: list[tuple[int, PhotoIn, bytes]] = []
    for i, item in enumerate(items):
        if item.data_url is None:  # a refused body's photo without image data: its shape says so
            continue
        try:
            raws.append((i, item, images.decode_image_input(item.data_url, max_bytes=max_bytes)))
        except images.ImageRejected as error:
            refuse(i, item, error.message)
    results = _process_images(images.process_photo, [raw for _, _, raw in raws])
    for (i, item, _), processed in zip(raws, results, strict=True):
        if isinstance(processed, images.ImageRejected):
            refuse(i, item, processed.message)
            continue
        checked.append(({
            "position": first_position + i,
            "name": item.name or f"photo-{first_position + i + 1}.jpg",
            "taken_at": item.taken_at,
            "coords": item.coords.model_dump() if item.coords else None,
            "width": processed.width,
            "height": processed.height,
        }, processed))
    return checked, problems


def image_bytes(photos: list[tuple[dict[str, Any], images.ProcessedImage]],
                 signature: images.ProcessedImage | None) -> int:
    """How many bytes storing these images takes (thumbnails included)."""
    processed = [p for _, p in photos] + ([signature] if signature is not None else [])
    return sum(len(p.data) + len(p.thumb) for p in processed)


def make_room(company_id: int, link_token: str | None, incoming: int, *, tickets: int = 0) -> None:
    """Check the disk reserve and count the bytes against the daily quotas, before storing any."""
    if incoming:
        quotas.check_disk(incoming)
    quotas.reserve(company_id, link_token, incoming, tickets=tickets)


@contextlib.contextmanager
def _disk_full_is_507():
    """A write that meets a full disk is refused as storage_full, not an internal error."""
    try:
        yield
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise quotas.StorageFull(quotas.FULL_MESSAGE) from None
        raise


def store_images(checked: list[tuple[dict[str, Any], images.ProcessedImage]],
                 signature: images.ProcessedImage | None
                 ) -> tuple[list[dict[str, Any]], tuple[str, str] | None]:
    """Write a request's checked photos and signature image (with thumbnails) to the store, all
    or none; the photo rows and the signature's keys. Only called once every image passed."""
    files = [file for _, processed in checked
             for file in ((processed.data, processed.extension), (processed.thumb, "jpg"))]
    if signature is not None:
        files += [(signature.data, signature.extension), (signature.thumb, signature.extension)]
    if not files:
        return [], None
    with _disk_full_is_507():
        keys = storage.file_store().put_all(files)
    rows = [dict(row, image_key=keys[2 * i], thumb_key=keys[2 * i + 1])
            for i, (row, _) in enumerate(checked)]
    return rows, (keys[-2], keys[-1]) if signature is not None else None


def store_photos(checked: list[tuple[dict[str, Any], images.ProcessedImage]]) -> list[dict[str, Any]]:
    """Write checked photos to the store, all or none."""
    return store_images(checked, None)[0]


def check_signature(data: TicketInput, warnings: list[str]
                     ) -> tuple[images.ProcessedImage | None, list[dict[str, str]]]:
    """Verify the signature image; without an image the signature does not count."""
    signature = data.signature
    if signature is None:
        return None, []
    if not signature.image:
        warnings.append("the signature has no image, so it was not kept")
        return None, []
    return _check_signature_image(signature.image)


def _check_signature_image(image: str) -> tuple[images.ProcessedImage | None, list[dict[str, str]]]:
    """Decode and verify a signature image; a problem naming `signature.image` if it is bad."""
    try:
        raw = images.decode_image_input(image, max_bytes=current_app.config["MAX_PHOTO_BYTES"])
        processed = _process_images(images.process_signature, [raw])[0]
        if isinstance(processed, images.ImageRejected):
            raise processed
        return processed, []
    except images.ImageRejected as error:
        return None, [field_problem("signature.image", f"signature: {error.message}")]


def _raw_photo_items(payload: Any) -> list[PhotoIn]:
    """The photos of a refused body as far as they can be read, so their images are checked
    too: item i is the body's photos[i], without data when it carries no image text."""
    photos = payload.get("photos") if isinstance(payload, dict) else None
    if not isinstance(photos, list):
        return []
    items = []
    for item in photos[:MAX_PHOTOS]:
        item = item if isinstance(item, dict) else {}
        data_url, name = item.get("data_url"), item.get("name")
        items.append(PhotoIn.model_construct(
            data_url=data_url if isinstance(data_url, str) and data_url.strip() else None,
            name=name.strip()[:200] if isinstance(name, str) else None))
    return items


def _image_problems(payload: Any) -> list[dict[str, str]]:
    """Every bad photo and a bad signature image of a body whose shape was refused."""
    problems = check_photos(_raw_photo_items(payload), "photos", 0)[1]
    signature = payload.get("signature") if isinstance(payload, dict) else None
    image = signature.get("image") if isinstance(signature, dict) else None
    if isinstance(image, str) and image.strip():
        problems += _check_signature_image(image.strip())[1]
    return problems


def validate_photos(payload: Any) -> PhotosInput:
    """The one validator of photos to attach: shape problems and bad images, all at once."""
    try:
        return PhotosInput.model_validate(payload)
    except ValidationError as error:
        problems = validation_details(error)
    photos_only = {"photos": payload.get("photos")} if isinstance(payload, dict) else None
    raise ValidationFailed("the photos have problems; see details",
                           details=with_image_problems(problems, photos_only))


def with_image_problems(problems: list[dict[str, str]], payload: Any) -> list[dict[str, str]]:
    """Shape problems followed by the image problems they do not already name."""
    named = {problem["field"] for problem in problems}
    return problems + [problem for problem in _image_problems(payload)
                       if problem["field"] not in named and f"{problem['field']}.data_url" not in named]


def store_signature(data: TicketInput, processed: images.ProcessedImage | None,
                     signed_via: str = "crew_phone") -> dict[str, Any] | None:
    """Write the checked signature image and describe it for the ticket."""
    if processed is None or data.signature is None:
        return None
    return signature_record(data, store_images([], processed)[1], signed_via)


def signature_record(data: TicketInput, keys: tuple[str, str] | None,
                     signed_via: str = "crew_phone") -> dict[str, Any] | None:
    """A stored signature image described for the ticket (its content digest is added once the
    ticket's content is set: signatures.seal)."""
    if keys is None or data.signature is None:
        return None
    return signatures.record(data.signature, *keys, signed_via=signed_via)


def stored_signature_image(company_id: int, signature: SignatureIn) -> dict[str, str]:
    """Check a signature's image, count it against the company's storage and store it; its keys.

    A bad or missing image is a 400 naming `signature.image`, and nothing is stored.
    """
    if not signature.image:
        raise ValidationFailed("the signature has no drawing", details=[
            field_problem("signature.image", "signature: draw the signature")])
    processed, problems = _check_signature_image(signature.image)
    if problems:
        raise ValidationFailed("the signature could not be used; see details", details=problems)
    make_room(company_id, None, image_bytes([], processed))
    image_key, thumb_key = store_images([], processed)[1]
    return {"image_key": image_key, "thumb_key": thumb_key}


# ------------------------------------------------------------------ attaching


def add_photos(company_id: int, ticket_id: str, items: list[PhotoIn]) -> Ticket:
    """Attach photos to a ticket not yet written, keeping at most 12 in all."""
    ticket = find_ticket(company_id, ticket_id)
    _check_photo_room(ticket, len(items))
    checked, problems = check_photos(items, "photos", ticket.photo_count)
    if problems:
        raise ValidationFailed("some photos could not be used; see details", details=problems)
    make_room(company_id, None, image_bytes(checked, None))
    rows = store_photos(checked)
    with write_transaction() as session:
        current = locked(session, ticket.id)
        _check_photo_room(current, len(rows))
        for offset, row in enumerate(rows):
            row["position"] = current.photo_count + offset
            current.photos.append(TicketPhoto(**row))
        current.photo_count += len(rows)
    db.session.expire_all()
    return get_ticket(company_id, ticket_id)


def _check_photo_room(ticket: TicketRecord, adding: int) -> None:
    """Refuse photos on a written ticket, or beyond 12 in all: the ticket's state, 409."""
    check_unwritten(ticket)
    if ticket.photo_count + adding > MAX_PHOTOS:
        room = MAX_PHOTOS - ticket.photo_count
        raise Conflict(
            f"a ticket holds at most {MAX_PHOTOS} photos; this one has {ticket.photo_count}",
            code="photos_full",
            details=[field_problem("photos", f"at most {room} more photo(s) fit on this ticket")])


def photo_keys(ticket_id: str) -> list[str]:
    """The senders' keys of the photos a ticket holds, in its order."""
    return [key for key in db.session.scalars(
        select(TicketPhoto.client_key).where(TicketPhoto.ticket_id == ticket_id)
        .order_by(TicketPhoto.position)) if key]


def put_photo(company_id: int, ticket_id: str, key: str, photo: PhotoIn,
              wait: Wait = Wait.YES, *, counted: int = 0) -> tuple[Ticket, bool]:
    """Attach one photo under the sender's own key; the same key again changes nothing.

    Returns the ticket (routed as `wait` allows) and whether this call added the photo.
    Photos arrive one by one from a phone on a weak signal, so each is checked and stored on
    its own; `counted` bytes of it were counted against the quotas already (its pieces).
    """
    ticket = find_ticket(company_id, ticket_id)
    if any(p.client_key == key for p in ticket.photos):
        return get_ticket(company_id, ticket.id, wait), False
    _check_photo_room(ticket, 1)
    checked, problems = check_photos([photo], "photo", ticket.photo_count)
    if problems:
        raise ValidationFailed("the photo could not be used; see details", details=problems)
    make_room(company_id, ticket.link_token, max(0, image_bytes(checked, None) - counted))
    (row,) = store_photos(checked)
    try:
        with write_transaction() as session:
            current = locked(session, ticket.id)
            if any(p.client_key == key for p in current.photos):
                return get_ticket(company_id, ticket.id, wait), False
            _check_photo_room(current, 1)
            row.update(position=current.photo_count, client_key=key)
            current.photos.append(TicketPhoto(**row))
            current.photo_count += 1
    except IntegrityError:  # the same key arrived twice at once: the first one counts
        pass
    db.session.expire_all()
    return get_ticket(company_id, ticket.id, wait), True


def holds_now(ticket_id: str, key: str) -> bool:
    """Whether a ticket holds a photo under this key, read anew past the request's snapshot."""
    db.session.commit()  # ends the request's read transaction: another request's photo shows
    return key in photo_keys(ticket_id)


def put_signature(company_id: int, ticket_id: str, signature: SignatureIn,
                  wait: Wait = Wait.YES) -> tuple[Ticket, bool]:
    """Attach the signature sent after its ticket; a ticket that has one keeps it, and a
    written one takes none. Returns the ticket (routed as `wait` allows) and whether this
    call added the signature."""
    ticket = find_ticket(company_id, ticket_id)
    if ticket.signature:
        return get_ticket(company_id, ticket.id, wait), False
    check_unwritten(ticket)
    holder = SimpleNamespace(signature=signature)
    processed, problems = check_signature(holder, [])
    if problems:
        raise ValidationFailed("the signature could not be used; see details", details=problems)
    make_room(company_id, ticket.link_token, image_bytes([], processed))
    stored = store_signature(holder, processed)
    with write_transaction() as session:
        current = locked(session, ticket.id)
        if current.signature:
            return get_ticket(company_id, ticket.id, wait), False
        check_unwritten(current)
        current.signature = stored
        signatures.seal(current)
        webhooks.emit(session, current, webhooks.WebhookEventType.SIGNED)
    db.session.expire_all()
    return get_ticket(company_id, ticket.id, wait), True


def is_staged(link_token: str, client_ref: str, key: str) -> bool:
    """Whether a photo is kept under this key for a ticket still being written."""
    return db.session.scalar(select(StagedPhoto.id).where(
        StagedPhoto.link_token == link_token, StagedPhoto.client_ref == client_ref,
        StagedPhoto.client_key == key)) is not None


def stage_photo(company_id: int, link_token: str, client_ref: str, key: str,
                photo: PhotoIn, *, counted: int = 0) -> bool:
    """Keep a photo taken for a ticket still being written; the same key again changes nothing.

    Returns whether this call kept it; `counted` bytes of it were counted against the quotas
    already (its pieces).
    """
    where = (StagedPhoto.link_token == link_token, StagedPhoto.client_ref == client_ref)
    if is_staged(link_token, client_ref, key):
        return False
    held = db.session.scalar(select(func.count()).select_from(StagedPhoto).where(*where))
    if held >= MAX_PHOTOS:
        raise ValidationFailed(f"a ticket holds at most {MAX_PHOTOS} photos",
                               details=[field_problem("photos", "no more photos fit on this ticket")])
    checked, problems = check_photos([photo], "photo", 0)
    if problems:
        raise ValidationFailed("the photo could not be used; see details", details=problems)
    make_room(company_id, link_token, max(0, image_bytes(checked, None) - counted))
    (row,) = store_photos(checked)
    row.pop("position", None)
    try:
        with write_transaction() as session:
            session.add(StagedPhoto(company_id=company_id, link_token=link_token,
                                    client_ref=client_ref, client_key=key, **row))
    except IntegrityError:  # the same photo twice at once: the first one counts
        return False
    return True


def attach_staged(company_id: int, ticket_id: str, link_token: str, client_ref: str,
                  keys: list[str] | None) -> None:
    """Move the photos staged for a ticket onto it, those the phone still lists, in its order
    (`keys` None: every one, in the order kept; a photo kept after its ticket was written)."""
    where = (StagedPhoto.company_id == company_id, StagedPhoto.link_token == link_token,
             StagedPhoto.client_ref == client_ref)
    if not db.session.scalar(select(StagedPhoto.id).where(*where).limit(1)):
        return
    with write_transaction() as session:
        current = locked(session, ticket_id)
        held = {p.client_key for p in current.photos}
        rows = list(session.scalars(select(StagedPhoto).where(*where).order_by(StagedPhoto.id)))
        order = {key: index for index, key in enumerate(
            keys if keys is not None else [row.client_key for row in rows])}
        staged = sorted(rows, key=lambda s: order.get(s.client_key, len(order)))
        for row in staged:
            if row.client_key in order and row.client_key not in held \
                    and current.photo_count < MAX_PHOTOS:
                current.photos.append(TicketPhoto(
                    position=current.photo_count, client_key=row.client_key, name=row.name,
                    taken_at=row.taken_at, coords=row.coords, image_key=row.image_key,
                    thumb_key=row.thumb_key, width=row.width, height=row.height))
                current.photo_count += 1
            session.delete(row)
    db.session.expire_all()


# ------------------------------------------------------------------ serving


def photo_file(company_id: int, ticket_id: str, position: int, *,
               thumbnail: bool = False) -> storage.Stream:
    """The stored JPEG of one of a ticket's photos (or its thumbnail), opened for sending."""
    ticket = find_ticket(company_id, ticket_id)
    photo = next((p for p in ticket.photos if p.position == position), None)
    if photo is None:
        raise NotFound("no such photo on this ticket", code="photo_not_found")
    return _opened(photo.thumb_key if thumbnail else photo.image_key, "photo_not_found")


def photo_image(company_id: int, ticket_id: str, photo_id: int, *,
                thumbnail: bool = False) -> storage.Stream:
    """The stored JPEG of a ticket's photo by its id (or its thumbnail), opened for sending;
    another company's ticket or another ticket's photo is not found."""
    ticket = find_ticket(company_id, ticket_id)
    photo = next((p for p in ticket.photos if p.id == photo_id), None)
    if photo is None:
        raise NotFound("no such photo on this ticket", code="photo_not_found")
    return _opened(photo.thumb_key if thumbnail else photo.image_key, "photo_not_found")


def signature_file(company_id: int, ticket_id: str, *, thumbnail: bool = False) -> storage.Stream:
    """The stored PNG of a ticket's signature, or its thumbnail (a signature stored before
    thumbnails were kept answers its full image), opened for sending."""
    ticket = find_ticket(company_id, ticket_id)
    if not ticket.signature:
        raise NotFound("this ticket has no signature", code="signature_not_found")
    key = ticket.signature.get("thumb_key") if thumbnail else None
    return _opened(key or ticket.signature["image_key"], "signature_not_found")


def _opened(key: str, code: str) -> storage.Stream:
    """A stored file opened for sending; one the store lost is not found, not a 500."""
    try:
        return storage.file_store().stream(key)
    except KeyError:
        raise NotFound("this file is missing from the store", code=code) from None
