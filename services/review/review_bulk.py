"""Bulk approval from the queue: what it would write (each suggested code it confirms, and the
tickets it leaves for their own page, with why), then each ticket written once."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from decimal import Decimal

from models.schemas import ApproveInput
from services.approval import approval
from services.platform.errors import ServiceError
from services.platform.validation import form_number
from services.project_system import commitments, projects
from services.routing.learning import possessive
from services.tickets.plain_words import commitment_sentence, plain_error
from services.tickets.ticket_records import find_ticket
from services.tickets.ticket_shapes import Wait, routing_of

MAX_BULK = 100


def bulk_confirmable(line) -> bool:
    """Whether bulk approval may confirm a routing line's budget code: a suggestion from past
    decisions on this ticket's sub's (or unattributed) tickets; another sub's habit, a guess from
    a cost code's name and a line without a code are confirmed on the ticket's own page."""
    return bool(line.learned and line.needs_review and line.budget_code_id is not None
                and not line.learned_from_sub)


@dataclass(frozen=True)
class Suggested:
    """One suggested budget code of a bulk approval, to confirm."""

    line: int
    description: str
    budget_code: str
    budget_code_id: int
    reason: str


@dataclass(frozen=True)
class BulkItem:
    """One ticket of a bulk approval: before (to confirm) or after (with its outcome)."""

    id: str
    reference: str
    description: str
    total: Decimal
    outcome: str | None = None  # written, already, refused
    message: str | None = None
    # Where it goes: "change_event", or "daily_log" on a project without change events.
    destination: str = "change_event"
    # Lines whose budget code is a suggestion the approval confirms and writes, each listed.
    suggestions: tuple[Suggested, ...] = ()
    # Why the PM must open the ticket before it is written (a line bulk approval cannot
    # confirm), each in plain words; such a ticket is left out of the approval.
    held: tuple[str, ...] = ()
    # The sub's commitment its lines go on, in plain words; and the suggested commitment the
    # approval confirms for the sub and project (its id), when it is only a suggestion.
    commitment: str | None = None
    confirms_commitment: int | None = None


def _selected(company_id: int, ids: list[str]) -> list:
    """The company's tickets among the ids, each once, in the order given (at most 100)."""
    wanted = list(dict.fromkeys(i for i in ids if i))[:MAX_BULK]
    found = []
    for ticket_id in wanted:
        try:
            found.append(find_ticket(company_id, ticket_id))
        except ServiceError:
            continue  # another company's or a missing ticket: not offered, not written
    return found


def _destination(company_id: int, project_id: str) -> str:
    """Where a bulk approval writes a ticket of a project: a daily log entry only where the
    project is known to have no change events (unknown: a change event, refused if not)."""
    return "daily_log" if projects.page_change_events(company_id, project_id) is False \
        else "change_event"


def _held(routing, destination: str) -> tuple[str, ...]:
    """The lines of a ticket that keep it out of a bulk approval, each in plain words: those to
    check whose code bulk approval may not confirm (a daily log entry carries no codes)."""
    if destination == "daily_log" or routing.pending:
        return ()
    held = []
    for line in routing.lines:
        if not line.needs_review or bulk_confirmable(line):
            continue
        name = f"Line {line.line + 1} ({line.description[:50]})"
        if line.learned_from_sub:
            held.append(f"{name}: {line.budget_code} is {possessive(line.learned_from_sub)} "
                        f"habit, not this sub's ({line.reason}); open the ticket to confirm it.")
        elif line.budget_code_id is not None:
            held.append(f"{name}: {line.budget_code} is a guess ({line.reason}); open the ticket "
                        "to confirm it.")
        else:
            held.append(f"{name} has no budget code; open the ticket to pick one.")
    return tuple(held)


def _commitment_held(found) -> tuple[str, ...]:
    """Why bulk approval leaves a ticket out for its sub's commitment: none to list and confirm
    while the one confirmed for the sub is no longer open in Procore."""
    if found is None or found.contract_id is not None or not commitments.needs_confirmation(found):
        return ()
    return ("Its sub's confirmed commitment is no longer open in Procore; open the ticket to "
            "confirm another, or none.",)


def bulk_selection(company_id: int, ids: list[str]) -> list[BulkItem]:
    """The tickets a bulk approval would write, to confirm their count and total, each with
    where it goes and every suggested budget code the approval would confirm; a ticket with a
    line it cannot confirm is listed as held, with why."""
    items = []
    for ticket in _selected(company_id, ids):
        routing = routing_of(ticket, Wait.BRIEFLY)
        destination = _destination(company_id, ticket.project_id)
        found = commitments.shown(company_id, ticket.project_id, ticket.sub, briefly=True) \
            if destination == "change_event" else None
        items.append(BulkItem(
            commitment=commitment_sentence(found) if found else None,
            confirms_commitment=found.contract_id if found and not found.exact else None,
            id=ticket.id, reference=ticket.reference, description=ticket.description,
            total=ticket.total, destination=destination,
            held=_held(routing, destination) + _commitment_held(found),
            suggestions=() if destination == "daily_log" else tuple(
                Suggested(line=r.line, description=r.description, budget_code=r.budget_code,
                          budget_code_id=r.budget_code_id, reason=r.reason)
                for r in routing.lines if bulk_confirmable(r))))
    return items


def _unlisted(ticket, confirmed: dict[str, int]) -> bool:
    """Whether a bulk approval's confirmations for a ticket differ from the suggestions it can
    confirm now (a suggestion changed since the list was drawn, or one bulk may not confirm)."""
    if not confirmed:
        return False
    allowed = {str(line.line): line.budget_code_id
               for line in routing_of(ticket, Wait.BRIEFLY).lines if bulk_confirmable(line)}
    return any(allowed.get(line) != code for line, code in confirmed.items())


def bulk_approve(company_id: int, ids: list[str], actor: str,
                 confirmed: dict[str, dict[str, int]] | None = None) -> list[BulkItem]:
    """Approve each ticket once through the one approval service, each with its own outcome.

    Only lines on a confirmed budget code go through (as `require_exact`): the suggested codes
    the confirmation listed (`confirmed`: ticket id -> line -> budget code id) are sent as the
    ticket's `routes`, and only while they are still the suggestions bulk approval may confirm
    (never another sub's habit); a ticket with another line to check is refused with the reason
    and the others are still written. A ticket of a project without change events is written as
    a daily log entry, as its own page would.
    """
    confirmed = confirmed or {}
    results = []
    away = None
    for ticket in _selected(company_id, ids):
        item = BulkItem(id=ticket.id, reference=ticket.reference,
                        description=ticket.description, total=ticket.total,
                        destination=_destination(company_id, ticket.project_id))
        if away is not None:  # Procore was just found away: do not wait on it again per ticket
            results.append(dataclasses.replace(item, outcome="refused", message=away))
            continue
        routes = dict(confirmed.get(ticket.id, {})) if item.destination == "change_event" else {}
        contract_id = routes.pop(COMMITMENT, None)
        if contract_id is not None and not _confirm_commitment(company_id, ticket, contract_id,
                                                               actor):
            results.append(dataclasses.replace(item, outcome="refused", message=(
                "Its sub's suggested commitment is not the one listed when you confirmed; open "
                "the ticket to check it. Nothing was written.")))
            continue
        if _unlisted(ticket, routes):
            results.append(dataclasses.replace(item, outcome="refused", message=(
                "Its suggested budget codes are not the ones listed when you confirmed; open "
                "the ticket to check them. Nothing was written.")))
            continue
        try:
            result = approval.approve(company_id, ticket.id, ApproveInput(
                require_exact=True, routes=routes,
                destination=item.destination if item.destination == "daily_log" else None),
                actor=actor)
        except ServiceError as error:
            plain = plain_error(error)
            results.append(dataclasses.replace(
                item, outcome="refused", message=" ".join([plain.message, *plain.points])))
            if error.code in ("project_system_unavailable", "project_system_write_unconfirmed",
                              "project_system_auth_failed"):
                away = plain.message
                projects.noticed_away(company_id)
            continue
        as_log = " as a daily log entry" if item.destination == "daily_log" else ""
        results.append(dataclasses.replace(
            item, outcome="already" if result.already else "written",
            message=f"It was already in Procore{as_log}." if result.already else
            f"Written to Procore{as_log}."))
    return results


# The key of a confirmation's form that names the sub's suggested commitment, beside its lines.
COMMITMENT = "commitment"


def _confirm_commitment(company_id: int, ticket, contract_id: int, actor: str) -> bool:
    """Confirm the listed commitment for the ticket's sub if it is still the one shown; whether so."""
    try:
        found = commitments.for_sub(company_id, ticket.project_id, ticket.sub, briefly=True)
    except ServiceError:
        return False
    if found is None or found.exact or found.contract_id != contract_id:
        return found is not None and found.exact and found.contract_id == contract_id
    commitments.confirm(company_id, ticket.project_id, ticket.sub, contract_id, actor)
    return True


def bulk_total(items: list[BulkItem]) -> Decimal:
    """The dollar total of some tickets."""
    return sum((item.total for item in items), Decimal("0.00"))


def confirmed_suggestions(form) -> dict[str, dict[str, int]]:
    """The suggested codes and commitments a bulk approval's form confirms, by ticket."""
    # suggest[<ticket>][<line>] and suggest[<ticket>][commitment]: the ones its confirmation
    # listed, which its button says it confirms.
    found: dict[str, dict[str, int]] = {}
    for key in form:
        parts = key[len("suggest["):-1].split("][") if key.startswith("suggest[") \
            and key.endswith("]") else []
        value = form.get(key) or ""
        if len(parts) == 2 and (form_number(parts[1]) or parts[1] == COMMITMENT) \
                and form_number(value):
            found.setdefault(parts[0][:40], {})[parts[1]] = int(value)
    return found
