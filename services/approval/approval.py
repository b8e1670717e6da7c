"""Approve, reject and restore tickets; approval writes a ticket into the project system once.

Approval runs in four steps, so that no database lock is held while the project system is
called and so that a retry, a crash or a concurrent caller never writes a second record:

1. read and check everything (status, routes, lines, destination) without writing;
2. claim the ticket in a short write transaction; another unexpired claim answers 409
   ``approval_in_progress``;
3. outside any transaction, find the record an earlier attempt left (by the origin id
   derived from the ticket id) or create it, then attach the files it still lacks;
4. in a second short write transaction, mark the ticket written and release the claim.

A failed write releases the claim and answers 502; the ticket stays approvable. The claim of
a process that crashed expires after APPROVAL_CLAIM_TTL_S, and the next approval then finds
the record by its origin id.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import time
import uuid
from zoneinfo import ZoneInfo

from flask import current_app

from models import Ticket as TicketRecord
from models import db, utcnow
from models.schemas import LINE_INDEX, ApprovalResult, ApproveInput, Ticket, TicketCommitment
from services.approval import approval_claims
from services.approval.approval_records import (
    CHANGE_EVENT,
    DAILY_LOG,
    DAILY_LOG_NOTE,
    change_event_draft,
    content_type,
    log_date,
    manpower_draft,
    origin_id,
    photo_filename,
)
from services.files import storage
from services.platform.database import write_transaction
from services.platform.errors import (
    Conflict,
    ProjectSystemRefused,
    ValidationFailed,
    field_problem,
)
from services.pricing import authorizations
from services.project_system import (
    Attachment,
    BudgetCode,
    ChangeEventDraft,
    ManpowerDraft,
    ProjectSystem,
    ProjectSystemError,
    ProjectSystemRateLimited,
    ProjectSystemUnavailable,
    RemoteRecord,
    ToolDisabled,
    WriteUnconfirmed,
    commitments,
    hurried,
    patient,
    project_settings,
    projects,
)
from services.project_system.connections import (
    Turn,
    client_for,
    project_system_errors,
    rate_limit_wait,
)
from services.project_system.projects import Catalog
from services.routing import learning
from services.routing.routing import Route, article, router_for
from services.tickets import documents
from services.tickets.ticket_records import append_decision, find_ticket, locked
from services.tickets.ticket_shapes import get_ticket, routing_lines
from services.webhooks import webhooks

# Records are looked up from a little before the ticket was captured: no attempt is older.
LOOKUP_MARGIN = dt.timedelta(minutes=1)


class Document:
    """The signed ticket document of an approval: its HTML, made into a PDF once, when needed."""

    def __init__(self, filename: str, html: str) -> None:
        """Keep the file name and the HTML; nothing is rendered yet."""
        self.filename = filename
        self.html = html
        self._pdf: bytes | None = None

    def pdf(self) -> bytes:
        """The PDF, rendered on the first call (an approval waits up to the whole budget)."""
        if self._pdf is None:
            self._pdf = documents.render_pdf(
                self.html, wait_s=float(current_app.config["DOCUMENT_BUDGET_S"]))
        return self._pdf


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything the write step needs, prepared so that it reads nothing from the database."""

    project_id: int
    origin_id: str
    created_after: dt.datetime
    log_date: dt.date
    change_event: ChangeEventDraft
    commitment: TicketCommitment | None
    manpower: ManpowerDraft
    files: tuple[tuple[str, str, str], ...]
    document: Document


# ----------------------------------------------------------------- approve

def _first_read_wait(company_id: int) -> float:
    """How long an approval waits for what it reads when nothing is known: as for a write, after
    the rate limit's pause (up to the approval's budget wait)."""
    config = current_app.config
    return float(config["PROJECT_SYSTEM_APPROVAL_WRITE_WAIT_S"]) + min(
        rate_limit_wait(company_id), float(config["PROJECT_SYSTEM_APPROVAL_BUDGET_WAIT_S"]))


def approve(company_id: int, ticket_id: str, options: ApproveInput, actor: str) -> ApprovalResult:
    """Write a ticket into the project system exactly once; a written one comes back as is."""
    ticket = find_ticket(company_id, ticket_id)
    if ticket.status == "written":
        return _written_result(company_id, ticket.id, already=True)
    _refuse_rejected(ticket, options.allow_rejected)
    # What the approval reads is what the service keeps (the last known while the project
    # system is slow), so only the write itself waits on it, and then not for long; with
    # nothing known yet, it waits as long as for a write, and for the rate limit's pause first.
    with projects.waiting_up_to(_first_read_wait(company_id)):
        codes = projects.catalog(company_id, ticket.project_id, briefly=True)
        routes = _routes(ticket, codes, options.routes, actor)
        destination = _destination(company_id, ticket, options.destination)
        if destination == CHANGE_EVENT:  # a daily log entry carries no budget code nor reason
            _check_lines(routes, options)
            project_settings.check_change_reason(company_id, ticket.project_id)
        authorizations.check_approval(ticket, options.confirm_over_nte)
        # A daily log entry bills nothing, so it is on no commitment.
        commitment = commitments.for_approval(
            company_id, ticket.project_id, ticket.sub, options.contract_id, actor) \
            if destination == CHANGE_EVENT else None
        zone = projects.time_zone(company_id, ticket.project_id, briefly=True)
    client = client_for(company_id)
    claim = _claim(ticket.id, options.allow_rejected, destination)
    if claim is None:
        return _written_result(company_id, ticket.id, already=True)
    try:
        plan = _plan(ticket, routes, zone, actor, destination, commitment)
        if destination == CHANGE_EVENT:  # made before the company's write slot is taken
            plan.document.pdf()
        # One write at a time per company (a slow project system holds one thread, not all),
        # and the claim renewed while the write lasts, so it is never joined by a second one.
        # It waits its turn at the company's write slot while the approvals ahead move on or
        # wait for Procore's rate limit, and each of its calls waits for the rate limit up to
        # PROJECT_SYSTEM_APPROVAL_BUDGET_WAIT_S (a whole 60 s window), else 503 Retry-After.
        turn = Turn(getattr(client, "clock", time.time),
                    lambda: float(getattr(client, "paced_until", 0.0)))
        with project_system_errors(company_id, "write", turn), \
                approval_claims.keeping_claim(ticket.id, claim.id), hurried(*_patience()), \
                patient(float(current_app.config["PROJECT_SYSTEM_APPROVAL_BUDGET_WAIT_S"])):
            destination, record = _write(client, plan, destination, claim.earlier)
    except Exception as error:
        approval_claims.release(ticket.id, claim.id)
        if isinstance(error, ProjectSystemRefused) and error.code == "project_system_error" \
                and commitment is not None:
            # Refused: its commitment may have been voided since it was read; the retry reads
            # it again (not when Procore is away, so what is known stays for the pages).
            commitments.forget_directory(company_id, ticket.project_id)
        raise
    return _finish(company_id, ticket.id, destination, record, routes, actor, codes,
                   plan.commitment if destination == CHANGE_EVENT else None)


def _patience() -> tuple[float, float, float]:
    """How long an approval's calls wait to connect, and for each part of a read's or a
    write's answer, before the project system counts as hung."""
    config = current_app.config
    read = float(config["PROJECT_SYSTEM_APPROVAL_WAIT_S"])
    return (min(float(config["PROJECT_SYSTEM_CONNECT_TIMEOUT_S"]), read), read,
            float(config["PROJECT_SYSTEM_APPROVAL_WRITE_WAIT_S"]))


def _refuse_rejected(ticket: TicketRecord, allow_rejected: bool) -> None:
    """409 ticket_rejected for a rejected ticket unless the caller allows it."""
    if ticket.status == "rejected" and not allow_rejected:
        raise Conflict("the ticket is rejected; restore it, or approve with allow_rejected: true",
                       code="ticket_rejected")


def _routes(ticket: TicketRecord, codes: Catalog, overrides: dict[str, int],
            actor: str) -> list[Route]:
    """Route the ticket's lines and apply the caller's overrides: 400 for a key that is no line
    index, 409 for a line the ticket lacks (`line_not_found`) or a budget code its project lacks
    (`budget_code_not_found`, when any is), each named in `details`."""
    routes = router_for(codes).route_all(ticket.lines, learning.suggester(ticket))
    lines = f"its lines are 0 to {len(routes) - 1}" if routes else "it has no lines"
    malformed = [field_problem(f"routes.{key}", f"{key[:20]!r} is not a line index; {lines}")
                 for key in overrides if not LINE_INDEX.fullmatch(key)]
    if malformed:
        raise ValidationFailed("some routes cannot be used; see details", details=malformed)
    chosen: dict[int, BudgetCode] = {}
    missing: dict[str, list[dict[str, str]]] = {"line_not_found": [], "budget_code_not_found": []}
    for key, code_id in overrides.items():
        field = f"routes.{key}"
        if int(key) >= len(routes):
            missing["line_not_found"].append(field_problem(field, f"no line {key} on this ticket; {lines}"))
        elif (code := codes.budget_code_by_id(code_id)) is None:
            missing["budget_code_not_found"].append(field_problem(
                field, f"budget code {code_id} is not on project {ticket.project_id}"))
        else:
            chosen[int(key)] = code
    if any(missing.values()):
        raise Conflict("some routes name what this ticket or its project does not have; see details",
                       code="budget_code_not_found" if missing["budget_code_not_found"] else "line_not_found",
                       details=missing["line_not_found"] + missing["budget_code_not_found"])
    return [_routed_by_person(route, chosen[route.line], actor) if route.line in chosen else route
            for route in routes]


def _routed_by_person(route: Route, code: BudgetCode, actor: str) -> Route:
    """A line a caller pointed at a budget code: exact only when the code is of the line's type.

    A labor line on a materials code would bill labor as materials, so it is taken as asked
    but stays a fallback (`require_exact` refuses it) and says why.
    """
    if code.cost_type == route.cost_type:
        return dataclasses.replace(route, budget_code=code, exact=True, needs_review=False,
                                   reason=f"routed by {actor}", learned=False, picked=True,
                                   learned_from_sub=None)
    kind = code.cost_type or "unknown"
    return dataclasses.replace(
        route, budget_code=code, exact=False, needs_review=True, learned=False, picked=True,
        learned_from_sub=None,
        reason=f"routed by {actor} to {code.flat_code}, {article(kind)} {kind} budget code, but "
               f"the line is {route.cost_type}")


def _destination(company_id: int, ticket: TicketRecord, requested: str | None) -> str:
    """Where to write: a daily log only when named, else a change event if the project has them."""
    if requested == DAILY_LOG:
        return DAILY_LOG
    if projects.change_events_enabled(company_id, ticket.project_id, briefly=True):
        return CHANGE_EVENT
    raise Conflict(f"project {ticket.project_id} has no change-event tool; approve with "
                   "destination 'daily_log' to file a dated daily log entry, which bills nothing",
                   code="no_change_events")


# A code suggested from another sub's habit is never written unseen: the caller names it in
# `routes` (the review pages do, once the PM confirmed it on the ticket).
LEARNED_FROM_ANOTHER_SUB = "suggested from another sub's decisions: confirm it with `routes`"


def _check_lines(routes: list[Route], options: ApproveInput) -> None:
    """409 lines_need_review listing every line the options do not let through."""
    refused = []
    for route in routes:
        if route.budget_code is None and not options.allow_unrouted:
            reason = "no budget code"
        elif options.require_exact and not route.exact:
            reason = "not on a confirmed budget code (exact: false)"
        elif route.learned_from_sub:
            reason = LEARNED_FROM_ANOTHER_SUB
        else:
            continue
        refused.append({"line": route.line, "reason": reason, "description": route.description})
    if refused:
        raise Conflict(f"{len(refused)} line(s) need review before this approval: give them a "
                       "budget code with `routes` (see details); nothing was written",
                       code="lines_need_review", details=refused)


def _claim(ticket_id: str, allow_rejected: bool, destination: str) -> approval_claims.Claim | None:
    """Take the ticket for this approval; None when it turned out to be written already."""
    now = utcnow()
    with write_transaction() as session:
        ticket = locked(session, ticket_id)
        if ticket.status == "written":
            return None
        _refuse_rejected(ticket, allow_rejected)
        approval_claims.refuse_claimed(ticket, now)
        earlier = tuple(kind for kind in ticket.approval_destinations or () if kind != destination)
        claim = approval_claims.Claim(id=str(uuid.uuid4()), earlier=earlier)
        ticket.approval_claim_id = claim.id
        ticket.approval_claimed_at = now
        ticket.approval_destinations = [*earlier, destination]
    return claim


def _plan(ticket: TicketRecord, routes: list[Route], zone: ZoneInfo, actor: str,
          destination: str, commitment: TicketCommitment | None) -> Plan:
    """Both drafts, the attachment list and the document of a ticket as approved."""
    # From its loaded state; dates in `zone`; the change event's lines on `commitment`.
    files = [(photo_filename(photo.position, photo.name, photo.image_key), photo.image_key,
              content_type(photo.image_key)) for photo in ticket.photos]
    if ticket.signature:
        key = ticket.signature["image_key"]
        files.append((f"signature.{key.rsplit('.', 1)[1]}", key, content_type(key)))
    return Plan(project_id=int(ticket.project_id), origin_id=origin_id(ticket.id),
                created_after=ticket.captured_at - LOOKUP_MARGIN, log_date=log_date(ticket, zone),
                change_event=change_event_draft(
                    ticket, routes, zone, commitment,
                    project_settings.stored(ticket.company_id, ticket.project_id)),
                commitment=commitment,
                manpower=manpower_draft(ticket, zone),
                files=tuple(files),
                document=Document(documents.document_filename(ticket.id), documents.approval_html(
                    ticket, routing_lines(routes), actor, destination)))


def _write(client: ProjectSystem, plan: Plan, destination: str,
           earlier: tuple[str, ...]) -> tuple[str, RemoteRecord]:
    """Find the record an earlier attempt left, or create it; then attach what it lacks."""
    found = _find_earlier(client, plan, earlier)
    if found is not None:
        destination, record = found
    else:
        record = _find(client, plan, destination)
        if record is None:
            try:
                record = _create(client, plan, destination)
            except ProjectSystemRateLimited:
                raise  # refused before anything was done
            except ProjectSystemUnavailable as error:  # sent, and no answer that settles it
                raise WriteUnconfirmed(error.message, status=error.status,
                                       request_id=error.request_id) from error
    if destination == CHANGE_EVENT:
        try:
            _attach_missing(client, plan, record)
        except ProjectSystemError as error:  # the record is there, without all it should carry
            raise WriteUnconfirmed(error.message, status=error.status,
                                   request_id=error.request_id) from error
    return destination, record


def _find_earlier(client: ProjectSystem, plan: Plan,
                  earlier: tuple[str, ...]) -> tuple[str, RemoteRecord] | None:
    """A record left at a destination an earlier attempt tried, so a retry never adds another."""
    for destination in earlier:
        try:
            record = _find(client, plan, destination)
        except ToolDisabled:
            continue  # the tool was switched off since: nothing there can be seen or reused
        if record is not None:
            return destination, record
    return None


def _find(client: ProjectSystem, plan: Plan, destination: str) -> RemoteRecord | None:
    """The ticket's record at a destination, found by origin id."""
    if destination == CHANGE_EVENT:
        return client.find_change_event(plan.project_id, plan.origin_id,
                                        created_after=plan.created_after)
    return client.find_manpower_log(plan.project_id, plan.origin_id, plan.log_date)


def _create(client: ProjectSystem, plan: Plan, destination: str) -> RemoteRecord:
    """Create the ticket's record at a destination."""
    if destination == CHANGE_EVENT:
        return client.create_change_event(plan.project_id, plan.change_event)
    return client.create_manpower_log(plan.project_id, plan.manpower)


def _attach_missing(client: ProjectSystem, plan: Plan, record: RemoteRecord) -> None:
    """Put on the change event, in one request, the photos, signature and signed document it
    does not list yet (each under a name that is the same on every attempt); read it back,
    and if an earlier file went missing (the project system replaced rather than added), send
    the whole set once more. Done only when every file is there."""
    wanted = [filename for filename, _key, _type in plan.files] + [plan.document.filename]
    missing = [name for name in wanted if name not in record.attachment_filenames]
    if not missing:
        return
    kept = client.attach_files(plan.project_id, record.id, _attachments(plan, missing),
                               known_ids=record.attachment_ids)
    if all(name in kept.attachment_filenames for name in wanted):
        return
    kept = client.attach_files(plan.project_id, record.id, _attachments(plan, wanted),
                               known_ids=kept.attachment_ids)
    lost = [name for name in wanted if name not in kept.attachment_filenames]
    if lost:
        raise ProjectSystemError(f"the change event does not keep its files ({', '.join(lost)} "
                                 "missing after they were attached)")


def _attachments(plan: Plan, names: list[str]) -> list[Attachment]:
    """The named files of a plan, read from storage (the document rendered)."""
    store = storage.file_store()
    files = [Attachment(filename=filename, content_type=media_type, data=store.open(key))
             for filename, key, media_type in plan.files if filename in names]
    if plan.document.filename in names:
        files.append(Attachment(filename=plan.document.filename,
                                content_type=documents.MEDIA_TYPE, data=plan.document.pdf()))
    return files


def _finish(company_id: int, ticket_id: str, destination: str, record: RemoteRecord,
            routes: list[Route], actor: str, codes: Catalog,
            commitment: TicketCommitment | None) -> ApprovalResult:
    """Mark the ticket written with its record, unless someone else already did, and keep
    where its lines went as evidence for the next ones (services/routing/learning.py)."""
    now = utcnow()
    with write_transaction() as session:
        ticket = locked(session, ticket_id)
        # The record exists whoever holds the claim now, so the ticket must say so.
        already = ticket.status == "written"
        if not already:
            ticket.status = "written"
            ticket.external = {
                "destination": destination,
                "change_event_id": record.id if destination == CHANGE_EVENT else None,
                "manpower_log_id": record.id if destination == DAILY_LOG else None,
                "number": record.number, "written_at": now.isoformat(), "url": record.url,
                "note": DAILY_LOG_NOTE if destination == DAILY_LOG else None,
                "commitment": commitment.model_dump(mode="json") if commitment else None,
            }
            # Not on a change order until a read of the record says otherwise.
            ticket.on_change_order = False if destination == CHANGE_EVENT else None
            ticket.written_routing = [line.model_dump(mode="json")
                                      for line in routing_lines(routes)]
            ticket.approved_by = actor
            ticket.approved_at = now
            ticket.approval_claim_id = None
            ticket.approval_claimed_at = None
            append_decision(ticket, "approved", actor)
            learning.record(session, ticket, routes, lambda code: _cost_code_text(codes, code),
                            lambda route: route.picked)
            webhooks.emit(session, ticket, webhooks.WebhookEventType.WRITTEN)
    return _written_result(company_id, ticket_id, already=already)


def _cost_code_text(codes: Catalog, code: BudgetCode) -> str | None:
    """The cost code a budget code is of, as the project names it."""
    found = codes.cost_code_by_id(code.cost_code_id) if code.cost_code_id is not None else None
    return found.shown if found is not None else None


def _written_result(company_id: int, ticket_id: str, *, already: bool) -> ApprovalResult:
    """A written ticket with the routing it was written with, read without the project system."""
    db.session.expire_all()
    return ApprovalResult(**get_ticket(company_id, ticket_id).model_dump(), already=already)


# ----------------------------------------------------------------- reject and restore

def reject(company_id: int, ticket_id: str, actor: str, reason: str | None = None) -> Ticket:
    """Close a submitted ticket without writing anything to the project system, with a reason."""
    ticket = find_ticket(company_id, ticket_id)
    with write_transaction() as session:
        current = locked(session, ticket.id)
        _refuse_written(current)
        if current.status == "rejected":
            raise Conflict("the ticket is already rejected", code="ticket_rejected")
        approval_claims.refuse_claimed(current, utcnow())
        current.status = "rejected"
        append_decision(current, "rejected", actor, (reason or "").strip()[:500] or None)
        webhooks.emit(session, current, webhooks.rejection_event(current))
    db.session.expire_all()
    return get_ticket(company_id, ticket.id)


def restore(company_id: int, ticket_id: str, actor: str) -> Ticket:
    """Put a rejected ticket back to submitted; a submitted one is returned as is."""
    ticket = find_ticket(company_id, ticket_id)
    with write_transaction() as session:
        current = locked(session, ticket.id)
        _refuse_written(current)
        if current.status == "rejected":
            approval_claims.refuse_claimed(current, utcnow())
            current.status = "submitted"
            append_decision(current, "restored", actor)
            webhooks.emit(session, current, webhooks.WebhookEventType.RESTORED)
    db.session.expire_all()
    return get_ticket(company_id, ticket.id)


def _refuse_written(ticket: TicketRecord) -> None:
    """409 ticket_written: a ticket in the project system can no longer change state."""
    if ticket.status == "written":
        gone = f" (its record is {ticket.record_gone} there)" if ticket.record_gone else ""
        raise Conflict(f"the ticket is already written to the project system{gone}; a written "
                       "ticket is never restored nor written again", code="ticket_written")
