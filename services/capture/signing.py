"""Signing links: requests made for a ticket, signing from one, and e-mail reminders.

A signing link's token is never stored: it is an HMAC of a random salt under the app's secret
key, found again by its SHA-256. So a database copy alone opens nothing, and a reminder can
carry the same link the first e-mail did.
"""
from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import secrets
import urllib.parse
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from flask import current_app
from flask_babel import force_locale, gettext
from sqlalchemy import func, select

from models import Company, db, short_reference, utcnow
from models import SignatureRequest as RequestRecord
from models import Ticket as TicketRecord
from models.schemas import (
    Shows,
    SignatureIn,
    SignatureRequest,
    SignatureRequestCreated,
    SignatureRequestInput,
    SignatureRequestList,
    SignatureRequestState,
    ticket_fields,
)
from services.capture import evidence
from services.capture.links import public_base_url
from services.platform import mail
from services.platform.database import write_transaction
from services.platform.errors import Conflict, NotFound, ServiceError
from services.platform.web import token_digest
from services.project_system import projects
from services.project_system.zones import on_clock
from services.tickets.signatures import (
    all_priced,
    amounts_shown,
    content_digest,
    open_conditions,
    priced,
    record,
    shown_content,
    shown_lines,
)
from services.tickets.ticket_records import find_ticket, locked
from services.webhooks import webhooks


class SigningLinkRefused(ServiceError):
    """A signing link that cannot be used: unknown, revoked, expired, signed (used), or its
    ticket signed another way (taken), written (closed) or rejected (sent_back)."""

    status = 410
    code = "signing_link_gone"

    def __init__(self, state: str, request: RequestRecord | None = None) -> None:
        super().__init__(f"this signing link is {state}",
                         status={"unknown": 404, "signed": 409, "taken": 409,
                                 "closed": 409, "sent_back": 409}.get(state, 410))
        self.state = state
        self.request = request


def _secret() -> bytes:
    """The key signing tokens are derived with."""
    return str(current_app.config["SECRET_KEY"]).encode("utf-8")


def token_for(salt: str) -> str:
    """The signing token of a request's salt: 256 bits, URL-safe (43 characters)."""
    mac = hmac.new(_secret(), b"signing-link:" + salt.encode("ascii"), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")


def stored_digest(token: str) -> str:
    """The SHA-256 of a token, which is all the database holds to find it."""
    return token_digest(token, 64)


def signing_url(request: RequestRecord) -> str:
    """The signing link of a request (opening in Spanish when the request asked for it)."""
    language = "?lang=es" if request.language == "es" else ""
    return f"{request.base_url}/s/{token_for(request.token_salt)}{language}"


def sms_href(request: RequestRecord, url: str, reference: str) -> str:
    """An sms: link to the signer's phone whose text carries the signing link."""
    with force_locale(request.language):
        body = gettext("Please sign extra-work ticket %(reference)s: %(url)s",
                       reference=reference, url=url)
    number = "".join(ch for ch in (request.phone or "") if ch.isdigit() or ch == "+")
    return f"sms:{number}?&body=" + urllib.parse.quote(body)


def state_of(request: RequestRecord, now: dt.datetime | None = None) -> SignatureRequestState:
    """Open, signed, revoked or expired."""
    now = now or utcnow()
    if request.signed_at is not None:
        return SignatureRequestState.signed
    if request.revoked_at is not None:
        return SignatureRequestState.revoked
    if request.expires_at <= now:
        return SignatureRequestState.expired
    return SignatureRequestState.open


def _shape(request: RequestRecord) -> SignatureRequest:
    """A request as the API shows it (never its link)."""
    return SignatureRequest(
        id=request.id, ticket_id=request.ticket_id, name=request.signer_name,
        role=request.signer_role, email=request.email, phone=request.phone,
        state=state_of(request), created_at=request.created_at, created_by=request.created_by,
        expires_at=request.expires_at, revoked_at=request.revoked_at, signed_at=request.signed_at,
        emailed_at=request.emailed_at, reminders_sent=request.reminders_sent,
        next_reminder_at=request.next_reminder_at, language=request.language or "en")


def _zone(name: str | None) -> ZoneInfo:
    """A stored IANA zone, UTC when unusable."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def on_jobsite_clock(request: RequestRecord, moment: dt.datetime | str | None) -> str:
    """A time as the signer reads it, on the jobsite's clock: '2026-07-01 08:00 PDT'."""
    return on_clock(moment, _zone(request.time_zone))


def _morning_after(moment: dt.datetime, zone: ZoneInfo, days: int = 1) -> dt.datetime:
    """The reminder hour on the jobsite clock, `days` days after the local date of `moment`."""
    hour = int(current_app.config["SIGNATURE_REMINDER_HOUR"])
    day = moment.astimezone(zone).date() + dt.timedelta(days=days)
    return dt.datetime.combine(day, dt.time(hour=hour), tzinfo=zone).astimezone(dt.timezone.utc)


def first_reminder(created: dt.datetime, zone: ZoneInfo) -> dt.datetime:
    """When the first reminder is due: after SIGNATURE_REMINDER_AFTER_H hours when set, else
    the first reminder hour (7:00) on the jobsite clock at least 4 hours after the request."""
    after = current_app.config.get("SIGNATURE_REMINDER_AFTER_H")
    if after is not None:
        return created + dt.timedelta(hours=float(after))
    earliest = created + dt.timedelta(hours=4)
    same_day = _morning_after(earliest, zone, days=0)
    return same_day if same_day >= earliest else _morning_after(earliest, zone)


def _next_reminder(request: RequestRecord, sent_at: dt.datetime) -> dt.datetime | None:
    """The reminder after one sent at `sent_at`: the next morning, unless the last or past expiry."""
    if request.reminders_sent >= int(current_app.config["SIGNATURE_REMINDERS_MAX"]):
        return None
    due = _morning_after(sent_at, _zone(request.time_zone))
    return due if due < request.expires_at else None


def _ticket_zone(company_id: int, project_id: str) -> ZoneInfo:
    """The jobsite's zone as last read, UTC when not known."""
    return projects.cached_time_zone(company_id, project_id) or ZoneInfo("UTC")


def create_request(company_id: int, ticket_id: str, data: SignatureRequestInput, *,
                   actor: str | None, link_token: str | None = None) -> SignatureRequestCreated:
    """Make a signing link for a ticket of this company and e-mail it when an address and mail
    settings are there; the answer is the only place the link is shown."""
    ticket = find_ticket(company_id, ticket_id)
    _check_signable(ticket)
    now = utcnow()
    zone = _ticket_zone(company_id, ticket.project_id)
    expires = now + dt.timedelta(days=float(current_app.config["SIGNATURE_LINK_DAYS"]))
    reminder = first_reminder(now, zone) if data.email else None
    request = RequestRecord(
        company_id=company_id, ticket_id=ticket.id, token_salt=secrets.token_hex(24),
        signer_name=data.name, signer_role=data.role or None, email=data.email,
        phone=data.phone, created_by=(actor or "")[:300] or None, link_token=link_token,
        base_url=public_base_url(), time_zone=getattr(zone, "key", "UTC"),
        language=signing_language(ticket, data.language), created_at=now, expires_at=expires,
        next_reminder_at=reminder if reminder is not None and reminder < expires else None)
    request.token_digest = stored_digest(token_for(request.token_salt))
    with write_transaction() as session:
        if link_token is not None:
            _check_open_from_link(session, company_id, ticket.id, link_token, now)
        session.add(request)
    url = signing_url(request)
    if data.email and _send_link(request, ticket, url, reminder=False):
        with write_transaction() as session:
            current = session.get(RequestRecord, request.id)
            current.emailed_at = utcnow()
            request = current
    return SignatureRequestCreated(**_shape(request).model_dump(), url=url,
                                   sms_href=sms_href(request, url, short_reference(ticket.id)))


def _check_open_from_link(session, company_id: int, ticket_id: str, link_token: str,
                          now: dt.datetime) -> None:
    """Refuse a capture link's request once its ticket has the most open ones from that link."""
    most = int(current_app.config["CAPTURE_OPEN_SIGNATURE_REQUESTS"])
    count = session.scalar(select(func.count()).select_from(RequestRecord).where(
        *open_conditions(company_id, now), RequestRecord.ticket_id == ticket_id,
        RequestRecord.link_token == link_token))
    if count >= most:
        raise Conflict(f"this ticket already has {most} open signing links from this capture "
                       "link; use one of them, or ask the project manager",
                       code="too_many_signature_requests")


def signing_language(ticket: TicketRecord, asked: str | None = None) -> str:
    """The language a signing link, its text and its e-mails are in: the one asked for, else
    the one the crew wrote the ticket in on its capture page, else English."""
    return str(asked or ticket.language or "en")


def signable(ticket: Any) -> bool:
    """Whether a ticket (record or shape) can be sent to be signed now: the rule
    `_check_signable` enforces, for pages to offer only what works."""
    return ticket.status not in ("written", "rejected") and not ticket.signature


def _check_signable(ticket: TicketRecord) -> None:
    """A ticket can be signed while it is neither written nor rejected and has no signature
    that counts."""
    if ticket.status == "written":
        raise Conflict("the ticket is already written to the project system",
                       code="ticket_written")
    if ticket.status == "rejected":
        raise Conflict("the ticket is rejected; restore it before it is signed",
                       code="ticket_rejected")
    if ticket.signature:
        raise Conflict("the ticket is already signed", code="ticket_already_signed")


def list_requests(company_id: int, ticket_id: str) -> SignatureRequestList:
    """A ticket's signature requests, newest first."""
    return SignatureRequestList(data=[_shape(r) for r in requests_of(company_id, ticket_id)])


def requests_of(company_id: int, ticket_id: str) -> list[RequestRecord]:
    """The request records of a ticket of this company, newest first (404 for another's)."""
    ticket = find_ticket(company_id, ticket_id)
    return list(db.session.scalars(select(RequestRecord).where(
        RequestRecord.company_id == company_id, RequestRecord.ticket_id == ticket.id)
        .order_by(RequestRecord.created_at.desc(), RequestRecord.id.desc())))


def _request_of(company_id: int, ticket_id: str, request_id: Any) -> RequestRecord:
    """One request of a ticket of this company, or 404 as for a missing one."""
    ticket = find_ticket(company_id, ticket_id)
    found = None
    if str(request_id).isdecimal() and int(request_id) < 2**63:
        found = db.session.scalar(select(RequestRecord).where(
            RequestRecord.id == int(request_id), RequestRecord.company_id == company_id,
            RequestRecord.ticket_id == ticket.id))
    if found is None:
        raise NotFound("no such signature request on this ticket",
                       code="signature_request_not_found")
    return found


def revoke_request(company_id: int, ticket_id: str, request_id: Any) -> SignatureRequest:
    """Stop a signing link from working; revoking again (or a used link) changes nothing."""
    request = _request_of(company_id, ticket_id, request_id)
    if request.revoked_at is None and request.signed_at is None:
        with write_transaction() as session:
            current = session.get(RequestRecord, request.id)
            if current.revoked_at is None and current.signed_at is None:
                current.revoked_at = utcnow()
                current.next_reminder_at = None
            request = current
    return _shape(request)


# ------------------------------------------------------------ the signer's side


def resolve(token: str) -> RequestRecord:
    """The request behind a signing token, or SigningLinkRefused saying why it cannot be used."""
    request = db.session.scalar(select(RequestRecord).where(
        RequestRecord.token_digest == stored_digest(token)))
    if request is None:
        raise SigningLinkRefused("unknown")
    state = state_of(request)
    if state is SignatureRequestState.signed:
        raise SigningLinkRefused("signed", request)
    if state is not SignatureRequestState.open:
        raise SigningLinkRefused(state.value, request)
    return request


def limit_key(token: str) -> str:
    """The rate-limit bucket of a signing token: a digest, never the token."""
    return "sign:" + token_digest(token)


@dataclass(frozen=True)
class SigningView:
    """What the signing page shows: the request, its ticket and the content digest shown."""

    request: RequestRecord
    ticket: TicketRecord
    amounts: bool
    content: dict[str, Any]
    digest: str
    company_name: str
    project_name: str | None = None

    @property
    def texts(self) -> list[tuple[str, str]]:
        """The optional texts the signer is shown (the digest covers them), with their labels."""
        shown = self.content.get("texts") or {}
        return [(gettext(field.label), shown[field.name])
                for field in ticket_fields(Shows.SIGNING) if field.name in shown]


def view(request: RequestRecord) -> SigningView:
    """The ticket of a request as its signer sees it."""
    ticket = find_ticket(request.company_id, request.ticket_id)
    amounts = amounts_shown(request.company_id)
    company = db.session.get(Company, request.company_id)
    return SigningView(request=request, ticket=ticket, amounts=amounts,
                       content=shown_content(ticket, amounts), digest=content_digest(ticket),
                       company_name=company.name if company else "",
                       project_name=projects.known_project_name(ticket.company_id,
                                                                ticket.project_id))


class TicketChanged(Conflict):
    """The ticket changed while the signer was reading it: they must see it again."""

    code = "ticket_changed"


def sign(token: str, data: SignatureIn, shown_digest: str, *, ip_address: str | None,
         user_agent: str | None) -> TicketRecord:
    """Sign a ticket from its link, once: the drawing, typed name and role, the qualifier, the
    signer's address and browser, the time, and the digest of the content they were shown.

    Nothing is stored unless every check passes: the link is open, the ticket is neither
    written nor signed, and its content is still what the page showed.
    """
    request = resolve(token)
    ticket = find_ticket(request.company_id, request.ticket_id)
    _check_signable(ticket)
    if shown_digest != content_digest(ticket):
        raise TicketChanged("the ticket changed while it was open; read it again before signing")
    signature = evidence.stored_signature_image(request.company_id, data)
    now = utcnow()
    with write_transaction() as session:
        current = session.scalar(select(RequestRecord).where(RequestRecord.id == request.id)
                                 .with_for_update().execution_options(populate_existing=True))
        if state_of(current, now) is not SignatureRequestState.open:
            raise SigningLinkRefused(state_of(current, now).value, current)
        ticket = locked(session, ticket.id)
        _check_signable(ticket)
        if content_digest(ticket) != shown_digest:
            raise TicketChanged("the ticket changed while it was open; read it again before signing")
        ticket.signature = record(data, signature["image_key"], signature["thumb_key"],
                                  signed_via="signing_link", content_sha256=shown_digest,
                                  signed_at=now, ip_address=ip_address, user_agent=user_agent,
                                  request_id=current.id)
        current.signed_at = now
        current.next_reminder_at = None
        webhooks.emit(session, ticket, webhooks.WebhookEventType.SIGNED)
    db.session.expire_all()
    return find_ticket(request.company_id, request.ticket_id)


def signed_through(request: RequestRecord, ticket: TicketRecord) -> tuple[dict | None, dict | None]:
    """The signature given through this request: (current, None) while it counts, (None, voided)
    once the ticket changed after it, (None, None) when there is none."""
    def made_here(signature: dict[str, Any]) -> bool:
        return signature.get("request_id") == request.id
    if ticket.signature and made_here(ticket.signature):
        return ticket.signature, None
    voided = next((s for s in reversed(ticket.voided_signatures or []) if made_here(s)), None)
    return None, voided


# ------------------------------------------------------------ e-mail and reminders


def _mail_text(request: RequestRecord, ticket: TicketRecord, url: str, *, reminder: bool) -> tuple[str, str]:
    """Subject and plain-text body of a signing e-mail, in the request's language."""
    amounts = amounts_shown(ticket.company_id)
    company = db.session.get(Company, ticket.company_id)
    project = projects.known_project_name(ticket.company_id, ticket.project_id)
    reference = short_reference(ticket.id)
    with force_locale(request.language):
        subject = (gettext("Reminder: please sign extra-work ticket %(reference)s", reference=reference)
                   if reminder else
                   gettext("Please sign extra-work ticket %(reference)s", reference=reference))
        lines = [gettext("%(company)s asks you to sign extra-work ticket %(reference)s.",
                         company=company.name if company else "", reference=reference), ""]
        if project:
            lines.append(gettext("Jobsite: %(name)s", name=project))
        lines += [gettext("Work: %(text)s", text=ticket.description),
                  gettext("Why it is extra: %(text)s", text=ticket.reason),
                  gettext("Directed by: %(text)s", text=ticket.directed_by)]
        lines += [gettext("%(label)s: %(text)s", label=gettext(field.label),
                          text=field.value(ticket))
                  for field in ticket_fields(Shows.EMAIL) if field.value(ticket)]
        lines.append("")
        shown = shown_lines(ticket.lines or [], amounts)
        for line in shown:
            lines.append("- " + line_text(line, amounts))
        if amounts:
            lines.append(gettext("Total: $%(amount)s", amount=_money(ticket.total))
                         if all_priced(shown)
                         else gettext("Total") + ": " + gettext("Priced by the office"))
        lines += ["", gettext("See the photos and sign here (no account needed; the link works "
                              "until %(date)s):",
                              date=on_jobsite_clock(request, request.expires_at)), url, "",
                  gettext("You can sign as verified, verified with the scope disputed, or not "
                          "verified with a reason.")]
    return subject, "\n".join(lines) + "\n"


def _money(value: Any) -> str:
    """An amount as dollars and cents with thousands separators."""
    return f"{Decimal(str(value or 0)):,.2f}"


def line_text(line: dict[str, Any], amounts: bool) -> str:
    """One shown line in words: 'Labor: Concrete finisher, 2 workers x 3 h' (and its amount)."""
    kind = line["kind"]
    if kind == "labor":
        text = gettext("Labor: %(what)s, %(workers)s workers x %(hours)s h",
                       what=line["description"], workers=line["workers"], hours=line["hours"])
    elif kind == "equipment":
        text = gettext("Equipment: %(what)s, %(hours)s h", what=line["description"],
                       hours=line["hours"])
    elif kind == "materials":
        text = gettext("Materials: %(what)s, %(quantity)s", what=line["description"],
                       quantity=line["quantity"])
    else:
        text = gettext("Markup: %(what)s", what=line["description"])
    if amounts:
        text += f" (${_money(line['amount'])})" if priced(line) \
            else f" ({gettext('Priced by the office')})"
    return text


def _send_link(request: RequestRecord, ticket: TicketRecord, url: str, *, reminder: bool) -> bool:
    """E-mail the signing link (first time or reminder); False when no mail went."""
    if not request.email or not mail.configured():
        return False
    subject, body = _mail_text(request, ticket, url, reminder=reminder)
    return mail.send(request.email, subject, body)


def send_due_reminders(now: dt.datetime | None = None) -> list[int]:
    """E-mail a reminder for each open request whose reminder is due; returns their ids.

    Each is claimed in the database (count raised, next time moved on) before its e-mail goes,
    so two runs at once, or one after the other, never send the same reminder twice; a mail
    that fails gives its claim back for the next run.
    """
    if not mail.configured():
        return []
    now = now or utcnow()
    sent: list[int] = []
    failed: set[int] = set()
    while True:
        with write_transaction() as session:
            query = select(RequestRecord).where(
                RequestRecord.next_reminder_at <= now, RequestRecord.signed_at.is_(None),
                RequestRecord.revoked_at.is_(None), RequestRecord.expires_at > now,
                RequestRecord.email.is_not(None))
            if failed:
                query = query.where(RequestRecord.id.not_in(failed))
            request = session.scalar(query.order_by(RequestRecord.next_reminder_at,
                                                    RequestRecord.id)
                                     .limit(1).with_for_update(skip_locked=True))
            if request is None:
                break
            ticket = session.get(TicketRecord, request.ticket_id)
            if ticket is None or ticket.signature or ticket.status in ("written", "rejected"):
                request.next_reminder_at = None  # nothing left to sign
                continue
            claimed = (request.reminders_sent, request.next_reminder_at)
            request.reminders_sent += 1
            request.next_reminder_at = _next_reminder(request, now)
        ticket = find_ticket(request.company_id, request.ticket_id)
        if _send_link(request, ticket, signing_url(request), reminder=True):
            sent.append(request.id)
            continue
        failed.add(request.id)
        with write_transaction() as session:  # give the claim back for the next run
            current = session.get(RequestRecord, request.id)
            current.reminders_sent, current.next_reminder_at = claimed
    return sent
