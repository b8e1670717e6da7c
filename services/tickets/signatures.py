"""Signatures on tickets: what a signer is shown and its digest, the stored signature, voiding
it when the ticket's content changes, and which tickets await one from an open signing link."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select

from models import Company, db, utcnow
from models import SignatureRequest as RequestRecord
from models import Ticket as TicketRecord
from models.schemas import QUALIFIER_CODES, Shows, SignatureIn, ticket_fields

# The version of what a signer is shown: 2 added the optional text fields declared to show on
# the signing page (`texts`); a signature given on version 1 is still checked against it.
CONTENT_VERSION = 2


VOID_REASON = "the lines or quantities changed after it was signed"


# ------------------------------------------------------------ what the signer is shown


def amounts_shown(company_id: int) -> bool:
    """Whether signers see amounts: when the company's crews enter prices, the prices are part
    of the crew's claim; when the office prices, the signer verifies time and materials only."""
    shown = db.session.scalar(select(Company.crew_enters_prices).where(Company.id == company_id))
    return bool(shown) if shown is not None else True


def _number(value: Any) -> str | None:
    """A stored decimal in one canonical text (2.50 and 2.5 read alike)."""
    if value is None or value == "":
        return None
    number = Decimal(str(value)).normalize()
    return format(number, "f")


def shown_lines(lines: list[dict[str, Any]], amounts: bool) -> list[dict[str, Any]]:
    """A ticket's lines as the signer sees them: kind, what, quantities, hours and units, and
    each amount when amounts are shown (markups only then, as they are money alone)."""
    shown = []
    for line in lines:
        kind = line.get("kind")
        if kind == "markup" and not amounts:
            continue
        item: dict[str, Any] = {"kind": kind,
                                "description": line.get("trade") or line.get("description")
                                or line.get("name") or ""}
        if kind == "labor":
            item.update(workers=_number(line.get("workers")) or "1", hours=_number(line.get("hours")),
                        unit="worker-hours", hour_type=line.get("hour_type") or "st",
                        classification=line.get("classification"))
        elif kind == "equipment":
            item.update(hours=_number(line.get("hours")), unit="hours")
        elif kind == "materials":
            item.update(quantity=_number(line.get("quantity")), unit="each")
        if amounts:
            item["amount"] = _number(line.get("amount"))
        shown.append(item)
    return shown


def priced(line: dict[str, Any]) -> bool:
    """Whether a shown line carries a price (no amount, or zero, means the office prices it)."""
    amount = line.get("amount")
    return amount is not None and Decimal(str(amount)) != 0


def all_priced(lines: list[dict[str, Any]]) -> bool:
    """Whether every shown line carries a price, so a total means what it says."""
    return all(priced(line) for line in lines)


def shown_texts(ticket: TicketRecord) -> dict[str, str]:
    """The optional text fields declared to show on the signing page that the ticket gives."""
    return {field.name: field.value(ticket) for field in ticket_fields(Shows.SIGNING)
            if field.value(ticket)}


def shown_content(ticket: TicketRecord, amounts: bool | None = None,
                  version: int = CONTENT_VERSION) -> dict[str, Any]:
    """What a signer is shown of a ticket, as plain data in `version` (the digest is of this)."""
    amounts = amounts_shown(ticket.company_id) if amounts is None else amounts
    content = {"v": version, "ticket": ticket.id, "description": ticket.description,
               "reason": ticket.reason, "directed_by": ticket.directed_by,
               "worked_on": ticket.worked_on.isoformat() if ticket.worked_on else None,
               "amounts_shown": amounts, "lines": shown_lines(ticket.lines or [], amounts)}
    if version >= 2:
        content["texts"] = shown_texts(ticket)
    if amounts:
        content["total"] = _number(ticket.total)
    return content


def _digest(content: dict[str, Any]) -> str:
    """SHA-256 (hex) of a content's canonical JSON."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def content_digest(ticket: TicketRecord, signed: str | None = None) -> str:
    """SHA-256 (hex) of what the signer is shown now, in the version the signature whose
    digest is `signed` was given on (so an older one still matches an unchanged ticket)."""
    current = _digest(shown_content(ticket))
    if signed and signed != current:
        amounts = amounts_shown(ticket.company_id)
        for version in range(1, CONTENT_VERSION):
            older = _digest(shown_content(ticket, amounts, version))
            if older == signed:
                return older
    return current


# ------------------------------------------------------------ the stored signature


def record(signature: SignatureIn, image_key: str, thumb_key: str, *, signed_via: str,
           content_sha256: str | None = None, signed_at: dt.datetime | str | None = None,
           ip_address: str | None = None, user_agent: str | None = None,
           request_id: int | None = None) -> dict[str, Any]:
    """A signature as a ticket keeps it (the `signature` of the ticket's API shape)."""
    when = signed_at if signed_at is not None else signature.signed_at
    if isinstance(when, dt.datetime):
        when = when.isoformat()
    return {"name": signature.name or None, "role": signature.role or None, "signed_at": when,
            "qualifier": signature.qualifier.value if signature.qualifier else None,
            "qualifier_reason": signature.qualifier_reason or None,
            "image_key": image_key, "thumb_key": thumb_key, "content_sha256": content_sha256,
            "signed_via": signed_via, "ip_address": ip_address,
            "user_agent": (user_agent or None) and user_agent[:300], "request_id": request_id}


def qualifier(signature: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """A stored signature's qualifier code and reason; older free text is the reason, no code."""
    if not signature:
        return None, None
    code = signature.get("qualifier")
    if code and code not in QUALIFIER_CODES:
        return None, signature.get("qualifier_reason") or code
    return code or None, signature.get("qualifier_reason") or None


def readable(signature: dict[str, Any], ticket: TicketRecord) -> dict[str, Any]:
    """A stored signature with the fields older ones lack: a free-text qualifier becomes the
    reason (with no choice), and where it was signed follows from how the ticket came in."""
    qualifier = signature.get("qualifier")
    fields = dict(signature)
    if qualifier and qualifier not in QUALIFIER_CODES:
        fields["qualifier"] = None
        fields["qualifier_reason"] = signature.get("qualifier_reason") or qualifier
    if not fields.get("signed_via"):
        fields["signed_via"] = "api" if ticket.captured_via == "api" else "crew_phone"
    fields["id"] = signature["image_key"].split(".", 1)[0]
    return fields


def seal(ticket: TicketRecord) -> None:
    """Record on a ticket's new signature the digest of the content it was given on."""
    if ticket.signature and not ticket.signature.get("content_sha256"):
        ticket.signature = {**ticket.signature, "content_sha256": content_digest(ticket)}


def void_if_changed(ticket: TicketRecord, before: str, earlier: dict[str, Any] | None) -> bool:
    """After a change to a ticket's content: when what the signer was shown changed, the earlier
    signature no longer counts and joins the voided ones; else it stays (unless replaced).

    `before` is the content digest before the change, `earlier` the signature then.
    Returns whether a signature was voided.
    """
    if not earlier:
        return False
    if content_digest(ticket) == before:
        if not ticket.signature:
            ticket.signature = earlier
        return False
    voided = {**earlier, "voided_at": utcnow().isoformat(), "void_reason": VOID_REASON}
    ticket.voided_signatures = [*(ticket.voided_signatures or []), voided]
    if ticket.signature == earlier:
        ticket.signature = None
    return True


# ------------------------------------------------------------ tickets awaiting a signature


def awaiting_since(company_id: int, ticket_ids: list[str], now: dt.datetime | None = None
                   ) -> dict[str, dt.datetime]:
    """For each of these unsigned tickets with an open request: when its oldest open one was made."""
    if not ticket_ids:
        return {}
    rows = db.session.execute(
        select(RequestRecord.ticket_id, func.min(RequestRecord.created_at))
        .where(*open_conditions(company_id, now), RequestRecord.ticket_id.in_(ticket_ids))
        .group_by(RequestRecord.ticket_id))
    return dict(rows.all())


def open_conditions(company_id: int, now: dt.datetime | None = None) -> list:
    """WHERE conditions of a company's open requests: not signed, revoked or expired."""
    return [RequestRecord.company_id == company_id, RequestRecord.signed_at.is_(None),
            RequestRecord.revoked_at.is_(None), RequestRecord.expires_at > (now or utcnow())]


def open_request_tickets(company_id: int):
    """A subquery of the ids of a company's tickets with an open request (the queue's filter)."""
    return select(RequestRecord.ticket_id).where(*open_conditions(company_id))
