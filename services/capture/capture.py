"""Tickets submitted through a capture link, from the phone page or its plain-form fallback."""
from __future__ import annotations

import base64
import functools
import re
from decimal import Decimal
from typing import Any

from babel.numbers import format_decimal
from flask_babel import get_locale, gettext, lazy_gettext
from werkzeug.datastructures import FileStorage, MultiDict

from models import Company, db, short_reference, utcnow
from models.schemas import (
    CaptureSettings,
    DocumentSchema,
    PhotoIn,
    Shows,
    SignatureIn,
    SignatureRequestCreated,
    SignatureRequestInput,
    Ticket,
    TicketField,
    TicketInput,
    ticket_fields,
)
from services.capture import evidence, links, signing, tickets
from services.files import photo_uploads
from services.platform import i18n
from services.platform.database import write_transaction
from services.platform.errors import NotFound, ValidationFailed, field_problem
from services.platform.validation import validate
from services.platform.web import token_digest
from services.pricing import rates
from services.project_system import projects
from services.tickets import signatures, ticket_records
from services.tickets.ticket_shapes import Wait, get_ticket

CAPTURE_VIAS = ("link", "qr", "sms")
# Row fields picked from a list, which always carry a value: alone they do not make a line.
PICKED = {"hour_type"}
_PATH_PART = re.compile(r"([A-Za-z_]+)(?:\[(\d{1,3})\])?")
ROW_KINDS = {"labor": ("trade", "classification", "hour_type", "hours", "workers", "rate",
                       "costCode"),
             "equipment": ("description", "hours", "rate", "costCode"),
             "materials": ("description", "quantity", "unitCost", "costCode")}


@functools.lru_cache(maxsize=1)
def ticket_schema() -> dict[str, Any]:
    """The JSON Schema of a new ticket: the very rules the server checks, for the phone to check first."""
    return TicketInput.model_json_schema(mode="validation", schema_generator=DocumentSchema)


def asked_fields() -> list[TicketField]:
    """The optional text fields the capture form asks, in their order."""
    return ticket_fields(Shows.CAPTURE)


_PLAIN = (
    (re.compile(r"at least 1 character|Field required|more than whitespace", re.I),
     lambda m: gettext("Please fill this in.")),
    (re.compile(r"less than or equal to ([\d.]+)", re.I),
     lambda m: gettext("Must be {number} or less.").replace("{number}", _number(m.group(1)))),
    (re.compile(r"greater than or equal to ([\d.]+)", re.I),
     lambda m: gettext("Must be {number} or more.").replace("{number}", _number(m.group(1)))),
    (re.compile(r"at most (\d+) characters", re.I),
     lambda m: gettext("Too long: at most {count} letters.").replace("{count}", _number(m.group(1)))),
    (re.compile(r"valid number|must be a number|finite number", re.I),
     lambda m: gettext("Write a number, like 2 or 1.5.")),
)


def _number(text: str) -> str:
    """A number from a message, written the crew's way (1.000 in Spanish, 1,000 in English)."""
    return format_decimal(Decimal(text).normalize(), locale=get_locale() or "en")


def plain_message(message: str) -> str:
    """A validation message in a crew's words (the page's script does the same for its own checks)."""
    for pattern, words in _PLAIN:
        match = pattern.search(message)
        if match:
            return words(match)
    return message


def submit(token: str, payload: dict[str, Any], via: str) -> tuple[Ticket, bool]:
    """Store a ticket from a capture link; a resend with the same client reference returns the first.

    Returns the ticket and whether it was created by this call.
    """
    link = links.resolve_token(token)
    payload["project_id"] = link.project_id
    revises = payload.pop("revises", None)
    keys = payload.pop("photo_keys", None)
    # The page's language, which the page sends (a queued ticket goes with no cookie).
    language = payload.pop("language", None)
    language = language if language in i18n.LANGUAGES else i18n.current_language()
    data = tickets.validate_ticket(payload)
    captured_via = via if via in CAPTURE_VIAS else "link"
    if isinstance(revises, str) and revises:
        ticket, created = tickets.revise_ticket(
            link.company_id, link.token, revises[:64], data, captured_via=captured_via,
            language=language,
            keep_keys=[str(key) for key in keys[:12]] if isinstance(keys, list) else None)
    else:
        ticket, created = tickets.create_ticket(link.company_id, data, captured_via=captured_via,
                                                link_token=link.token, project_checked=True,
                                                language=language)
    if data.client_ref and isinstance(keys, list):
        # Photos uploaded while the ticket (or its correction) was being written, those the
        # phone still lists.
        evidence.attach_staged(link.company_id, ticket.id, link.token, data.client_ref,
                               [str(key) for key in keys[:12]])
        ticket = get_ticket(link.company_id, ticket.id, Wait.NO)
    return ticket, created


STATE_WORDS = {"submitted": lazy_gettext("with the project manager"),
               "written": lazy_gettext("accepted"), "rejected": lazy_gettext("sent back")}


def phone_tickets(token: str, client_refs: list[str]) -> list[dict[str, Any]]:
    """The state of a phone's own tickets on a link, known by the client references it holds.

    Only the phone knows those references, so nobody else with the link sees the list.
    """
    link = links.resolve_token(token)
    found = []
    records = ticket_records.phone_tickets(link.company_id, link.token, client_refs)
    awaiting = signatures.awaiting_since(link.company_id, [t.id for t in records if not t.signature])
    for ticket in records:
        rejected = [d for d in ticket.decisions if d.action == "rejected"]
        reason = rejected[-1].reason if ticket.status == "rejected" and rejected else None
        state = str(STATE_WORDS.get(ticket.status, ticket.status))
        if ticket.status == "rejected" and reason:
            state = gettext("sent back: %(reason)s", reason=reason)
        found.append({"client_ref": ticket.client_ref, "reference": short_reference(ticket.id),
                      "status": ticket.status, "state": state, "reason": reason,
                      "description": ticket.description,
                      "version": 1 + sum(1 for d in ticket.decisions if d.action == "resubmitted"),
                      "signed": bool(ticket.signature),
                      # the photos it holds, by the phone's keys (digests of their bytes): a
                      # correction sends only the others
                      "photo_keys": [p.client_key for p in ticket.photos if p.client_key],
                      "awaiting_signature": ticket.id in awaiting,
                      "can_request_signature": signing.signable(ticket)})
    return found


def request_signature(token: str, payload: dict[str, Any]) -> SignatureRequestCreated:
    """A signing link for a ticket this phone sent through the link ("the super isn't here: send
    it to him"); only tickets of this link, known by the phone's own reference."""
    link = links.resolve_token(token)
    client_ref = payload.get("client_ref")
    found = ticket_records.phone_tickets(link.company_id, link.token,
                                  [client_ref] if isinstance(client_ref, str) else [])
    if not found:
        raise NotFound("no ticket sent from this link under that reference",
                       code="ticket_not_found")
    data = validate(SignatureRequestInput, {key: payload.get(key) for key in
                                            ("name", "role", "email", "phone", "language")
                                            if payload.get(key) is not None})
    return signing.create_request(link.company_id, found[0].id, data,
                                     actor=f"crew ({link.label})" if link.label else "crew",
                                     link_token=link.token)


_PART_KEY = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _ticket_for_ref(token: str, client_ref: str) -> tuple[Any, str]:
    """The link and the id of the ticket the phone sent under client_ref through it."""
    link = links.resolve_token(token)
    ticket_id = ticket_records.link_ticket_id(link.company_id, link.token, client_ref) \
        if _PART_KEY.fullmatch(client_ref) else None
    if ticket_id is None:
        raise NotFound("no ticket with this reference yet; send its text first",
                       code="ticket_not_found")
    return link, ticket_id


def part_key(key: str) -> str:
    """A photo's own key as the phone gives it, checked."""
    if not _PART_KEY.fullmatch(key):
        raise NotFound("no such photo key", code="not_found")
    return key


def photo_from_upload(raw: bytes, args: Any) -> PhotoIn:
    """One uploaded image with what the phone says about it (name, taken_at, lat, lng)."""
    if not raw:
        raise ValidationFailed("send the image itself as the body",
                               details=[field_problem("body", "empty: the body must be the image")])
    payload: dict[str, Any] = {"data_url": base64.b64encode(raw).decode("ascii")}
    for name in ("name", "taken_at"):
        if args.get(name):
            payload[name] = args.get(name)
    if args.get("lat") and args.get("lng"):
        payload["coords"] = {"lat": args.get("lat"), "lng": args.get("lng")}
    return validate(PhotoIn, payload)


def _upload_name(link: Any, client_ref: str, key: str) -> str:
    """The name a photo's pieces wait under: the link, the phone's reference and the key, so
    pieces sent ahead of the ticket's text and after it are the same upload."""
    return f"l:{token_digest(link.token)}:{client_ref}:{key}"


def put_photo(token: str, client_ref: str, key: str, raw: bytes, args: Any,
              content_range: str | None = None) -> tuple[Ticket, bool] | photo_uploads.Progress:
    """One photo (or one piece of it) of a ticket sent through a capture link, idempotent by
    the photo's key: a photo the ticket holds is answered at once, whatever the piece."""
    link, ticket_id = _ticket_for_ref(token, client_ref)
    key = part_key(key)
    if key in evidence.photo_keys(ticket_id):
        return get_ticket(link.company_id, ticket_id, Wait.NO), False
    try:
        return photo_uploads.take(
            link.company_id, link.token, _upload_name(link, client_ref, key), raw, content_range,
            lambda whole: evidence.put_photo(link.company_id, ticket_id, key,
                                             photo_from_upload(whole.data, args), Wait.NO,
                                             counted=whole.counted))
    except photo_uploads.OffsetMismatch:
        if not _held_now(link, client_ref, key):
            raise
        return get_ticket(link.company_id, ticket_id, Wait.NO), False


def _held_now(link: Any, client_ref: str, key: str) -> bool:
    """Whether the ticket of client_ref (or, before its text came, its staged photos) holds
    the photo now: another request made it of the same pieces and dropped them meanwhile."""
    db.session.commit()  # read anew, past this request's earlier snapshot
    ticket_id = ticket_records.link_ticket_id(link.company_id, link.token, client_ref)
    if ticket_id is not None:
        return evidence.holds_now(ticket_id, key)
    return evidence.is_staged(link.token, client_ref, key)


def stage_photo(token: str, client_ref: str, key: str, raw: bytes, args: Any,
                content_range: str | None = None) -> dict[str, Any] | photo_uploads.Progress:
    """A photo (or one piece of it) taken while its ticket is still being written, kept until
    the ticket's text comes; if the text overtook it, it goes straight onto the ticket."""
    link = links.resolve_token(token)
    if not _PART_KEY.fullmatch(client_ref):
        raise NotFound("no such ticket reference", code="not_found")
    key = part_key(key)
    ticket_id = ticket_records.link_ticket_id(link.company_id, link.token, client_ref)
    if (key in evidence.photo_keys(ticket_id) if ticket_id is not None
            else evidence.is_staged(link.token, client_ref, key)):
        return {"kept": True, "created": False}

    def attach(whole: photo_uploads.Whole) -> dict[str, Any]:
        photo = photo_from_upload(whole.data, args)
        written = ticket_id or ticket_records.link_ticket_id(link.company_id, link.token,
                                                              client_ref)
        if written is not None:
            created = evidence.put_photo(link.company_id, written, key, photo, Wait.NO,
                                         counted=whole.counted)[1]
        else:
            created = evidence.stage_photo(link.company_id, link.token, client_ref, key, photo,
                                           counted=whole.counted)
            _attach_if_written(link, client_ref)
        return {"kept": True, "created": created}

    try:
        return photo_uploads.take(link.company_id, link.token,
                                  _upload_name(link, client_ref, key), raw, content_range, attach)
    except photo_uploads.OffsetMismatch:
        if not _held_now(link, client_ref, key):
            raise
        return {"kept": True, "created": False}


def _attach_if_written(link: Any, client_ref: str) -> None:
    """A photo kept while its ticket was being written goes onto the ticket if that was written
    meanwhile (its own attach ran before this photo was kept, so it did not see it)."""
    ticket_id = ticket_records.link_ticket_id(link.company_id, link.token, client_ref)
    if ticket_id is not None:
        evidence.attach_staged(link.company_id, ticket_id, link.token, client_ref, None)


def put_signature(token: str, client_ref: str, raw: bytes, args: Any) -> tuple[Ticket, bool]:
    """The signature of a ticket sent through a capture link, once."""
    link, ticket_id = _ticket_for_ref(token, client_ref)
    signature = validate(SignatureIn, {
        "name": args.get("name") or None, "role": args.get("role") or None,
        "signed_at": args.get("signed_at") or None, "qualifier": args.get("qualifier") or None,
        "qualifier_reason": args.get("qualifier_reason") or None,
        "image": "data:image/png;base64," + base64.b64encode(raw).decode("ascii")})
    return evidence.put_signature(link.company_id, ticket_id, signature, Wait.NO)


class _Rows(dict):
    """A form list's rows by index, until they become a list."""


def _set_path(target: dict[str, Any], path: str, value: Any) -> None:
    """Place a form value at a path such as 'labor[2].hours' in a nested dict; a path that
    clashes with one placed before it (a name used both as text and as a group) is dropped."""
    node: Any = target
    parts = path.split(".")
    for depth, part in enumerate(parts):
        match = _PATH_PART.fullmatch(part)
        if match is None:
            return
        name, index = match.group(1), match.group(2)
        last = depth == len(parts) - 1
        if index is None:
            if last:
                node.setdefault(name, value)
                return
            node = node.setdefault(name, {})
            if type(node) is not dict:
                return
            continue
        rows = node.setdefault(name, _Rows())
        if not isinstance(rows, _Rows):
            return
        if last:
            rows.setdefault(int(index), value)
            return
        node = rows.setdefault(int(index), {})
        if type(node) is not dict:
            return


def _rows_to_lists(data: dict[str, Any]) -> dict[str, Any]:
    """Turn index-keyed rows into lists, dropping rows the crew left entirely blank."""
    for kind in ROW_KINDS:
        rows = data.get(kind)
        if isinstance(rows, _Rows):
            data[kind] = [row for _, row in sorted(rows.items())
                          if isinstance(row, dict) and any(str(v).strip() for name, v in row.items()
                                                           if name not in PICKED)]
    return data


def form_to_payload(form: MultiDict, files: MultiDict) -> dict[str, Any]:
    """Read the plain HTML form (no JavaScript) into the same shape as the JSON body."""
    payload: dict[str, Any] = {}
    for key, value in form.items():
        if key in ("via", "csrf_token"):
            continue
        if value.strip() == "" and key not in ("description", "reason", "directed_by"):
            continue
        _set_path(payload, key, value)
    payload = _rows_to_lists(payload)
    photos = []
    for upload in files.getlist("photo_files"):
        if isinstance(upload, FileStorage) and upload.filename:
            photos.append({"name": upload.filename[-200:],
                           "data_url": base64.b64encode(upload.read()).decode("ascii")})
    if photos:
        payload["photos"] = photos
    return payload


# Fields a crew leaves to the office when the company says so.
PRICE_FIELDS = ("rate", "unitCost", "costCode")


def capture_settings(company_id: int) -> CaptureSettings:
    """The company's capture form settings."""
    company = db.session.get(Company, company_id)
    if company is None:
        raise NotFound("company not found")
    return CaptureSettings(crew_enters_prices=bool(company.crew_enters_prices))


def set_capture_settings(company_id: int, crew_enters_prices: bool) -> CaptureSettings:
    """Change the company's capture form settings."""
    with write_transaction() as session:
        company = session.get(Company, company_id)
        if company is None:
            raise NotFound("company not found")
        company.crew_enters_prices = crew_enters_prices
    return capture_settings(company_id)


def cost_code_choices(company_id: int, project_id: str) -> list[tuple[str, str]]:
    """The project's cost codes for the pick list, from what was read before: the form never
    waits on the project system (with nothing read yet, the list is empty this time)."""
    codes = projects.cached_catalog(company_id, project_id)
    if codes is None:
        return []
    return [(c.shown, c.name) for c in codes.cost_codes]


def classification_choices(company_id: int, project_id: str) -> list[str]:
    """The labor classifications of the rate sheet in force today on the jobsite, for the pick list."""
    sheet = rates.sheet_in_force(company_id, project_id,
                                 projects.jobsite_date(company_id, project_id, utcnow()))
    return [item["classification"] for item in sheet.labor] if sheet is not None else []
