"""The review page of one ticket: the choices a reviewer has for each line, what the approve
form chose, and approving, rejecting and sending for signature from the page."""
from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

from flask import current_app

from models import db, short_reference
from models.schemas import ApproveInput, NteStatus, RoutingLine, SubCommitmentInput, Ticket
from services.approval import approval, approval_claims, record_status
from services.capture import signing
from services.platform import mail
from services.platform.errors import Conflict, ServiceError, ValidationFailed
from services.platform.validation import form_number, validate
from services.pricing import authorizations
from services.project_system import BudgetCode, commitments, projects
from services.project_system.projects import Catalog
from services.review.review_queue import QueueView
from services.routing import learning
from services.routing.learned_words import fold, searchable
from services.routing.routing import router_for
from services.tickets.plain_words import (
    QUALIFIER_LABELS,
    PlainError,
    age_text,
    change_order_words,
    commitment_sentence,
    plain_error,
    signing_refusal,
)
from services.tickets.ticket_records import find_ticket, ticket_key
from services.tickets.ticket_shapes import Wait, routing_of, shape_ticket
from services.tickets.ticket_view import TicketView


@dataclass(frozen=True)
class LineChoice:
    """The review controls of one routing line: its budget-code picker in three groups.

    `own` is the line's own cost code with its cost type (the exact choice), `same_type`
    the other codes of the line's cost type, `other_types` every other code: choosing one
    of those is warned about and never counts as exact.
    """

    line: int
    cost_type: str | None
    own: list[BudgetCode]
    same_type: list[BudgetCode]
    other_types: list[BudgetCode]
    create_cost_code_id: int | None = None
    create_cost_type: str | None = None

    @property
    def budget_codes(self) -> list[BudgetCode]:
        """Every code the picker offers, in its order."""
        return [*self.own, *self.same_type, *self.other_types]


@dataclass(frozen=True)
class FormChoices:
    """What the PM chose on a ticket's approve form: the page shows it again after any action."""

    routes: dict[int, int] = field(default_factory=dict)
    confirmed: dict[int, int] = field(default_factory=dict)
    destination: str | None = None
    allow_unrouted: bool = False
    came_from: QueueView = field(default_factory=QueueView)

    @classmethod
    def from_form(cls, form) -> FormChoices:
        """The approve-form choices a request carries (none on a freshly opened page)."""
        fields = {key: form.get(key) for key in form}
        destination = form.get("destination")
        return cls(routes=selected_routes_from_form(fields),
                   confirmed=selected_routes_from_form(fields, "confirm"),
                   destination=destination if destination in ("change_event", "daily_log") else None,
                   allow_unrouted=form.get("allow_unrouted") == "on",
                   came_from=QueueView.from_query_string(form.get("from")))

    def picking(self, line: int, code_id: int) -> FormChoices:
        """These choices with one more line given a budget code."""
        return dataclasses.replace(self, routes={**self.routes, line: code_id})


@dataclass
class TicketPage(TicketView):
    """Everything the ticket page shows: the ticket as people read it, and the review controls."""

    change_events: bool | None = None
    choices: dict[int, LineChoice] = field(default_factory=dict)
    error: ServiceError | None = None
    message: str | None = None
    chosen: FormChoices = field(default_factory=FormChoices)
    authorizations: list[NteStatus] = field(default_factory=list)
    reject_open: bool = False
    procore_down_since: dt.datetime | None = None
    being_written: bool = False
    # What the picker searches for each budget code id: its code and name, the company's own
    # words for it (the lines routed there) and their Spanish and short forms.
    search: dict[int, str] = field(default_factory=dict)
    # The project's open commitments to choose from for the sub: (id, how a PM reads it).
    commitments: list[tuple[int, str]] = field(default_factory=list)

    @property
    def commitment_text(self) -> str:
        """Which commitment the ticket's lines go on, and why, in plain words ('' for none)."""
        found = self.ticket.commitment
        return commitment_sentence(found, written=self.ticket.status == "written") if found else ""

    @property
    def to_confirm(self) -> list:
        """The lines to check whose budget code is a suggestion or a guess, not yet confirmed or
        picked on the form: what 'Confirm all' lists and confirms."""
        return [r for r in self.ticket.routing if r.needs_review and r.budget_code_id is not None
                and r.line not in self.chosen.confirmed and r.line not in self.chosen.routes]

    @property
    def to_pick(self) -> list:
        """The lines to check without any budget code, not yet picked: 'Confirm all' names them."""
        return [r for r in self.ticket.routing if r.needs_review and r.budget_code_id is None
                and r.line not in self.chosen.routes]

    @property
    def lines_open(self) -> int:
        """Lines to check that the form neither confirms nor gives a code: Approve waits for them."""
        if self.ticket.status == "written" or self.writes_as("daily_log"):
            return 0
        return sum(1 for r in self.ticket.routing
                   if r.needs_review and r.line in self.choices
                   and r.line not in self.chosen.routes
                   and not (r.budget_code_id is not None
                            and self.chosen.confirmed.get(r.line) == r.budget_code_id)
                   and not (r.budget_code_id is None and self.chosen.allow_unrouted))

    @property
    def down_for(self) -> str:
        """How long Procore has been away."""
        return age_text(self.procore_down_since) if self.procore_down_since else ""

    def other_type_chosen(self, line: int) -> bool:
        """Whether the code picked for a line is of another cost type than the line's."""
        choice = self.choices.get(line)
        chosen = self.chosen.routes.get(line)
        return bool(choice and chosen and any(b.id == chosen for b in choice.other_types))

    @property
    def in_procore(self) -> str | None:
        """Where the written record stands in Procore as last read, in a PM's words."""
        external = self.ticket.external
        if external is None or external.status_read_at is None:
            return None
        orders = [change_order_words(order.model_dump()) for order in external.change_orders]
        if orders:
            where = "On " + ", ".join(orders) + "."
        elif external.destination == "change_event":
            where = "Not on a change order yet."
        else:
            where = ""
        status = f"Status in Procore: {external.status}." if external.status else ""
        read = f"Read {age_text(external.status_read_at)} ago."
        return " ".join(part for part in (status, where, read) if part)

    def writes_as(self, destination: str) -> bool:
        """Whether a destination is ticked: the PM's pick, else change event if the project has them."""
        if destination == "daily_log":
            return self.change_events is False or self.chosen.destination == "daily_log"
        return bool(self.change_events) and self.chosen.destination != "daily_log"

    @property
    def refused_lines(self) -> dict[int, str]:
        """Lines an approval refused, with the reason in plain words, for highlighting."""
        return {} if self.error is None else plain_error(self.error).lines

    @property
    def plain_error(self) -> PlainError | None:
        """The refusal shown on the page, in plain words."""
        return None if self.error is None else plain_error(self.error)


def ticket_page(company_id: int, ticket_id: str, *, error: ServiceError | None = None,
                message: str | None = None, chosen: FormChoices | None = None,
                opened: bool = False) -> TicketPage:
    """A ticket with the choices a reviewer has for each of its lines.

    Everything read from Procore comes from what was last known when it does not answer
    in time, so the page still opens, with a banner saying since when Procore is away. A
    page `opened` (not answering an action) reads a stale written record again first.
    """
    record = find_ticket(company_id, ticket_id)
    if opened and record_status.refresh_if_stale(company_id, record, projects.PAGE_WAIT_S):
        db.session.expire_all()
        record = find_ticket(company_id, ticket_id)
    ticket = shape_ticket(record, Wait.BRIEFLY)
    page = TicketPage(
        ticket=ticket,
        project_name=projects.project_names(company_id).get(ticket.project_id, ticket.project_id),
        zone=projects.page_time_zone(company_id, ticket.project_id),
        change_events=projects.page_change_events(company_id, ticket.project_id),
        error=error, message=message, chosen=chosen or FormChoices(),
        being_written=ticket.status != "written" and approval_claims.being_written(record))
    try:
        codes = projects.catalog(company_id, ticket.project_id, briefly=True)
    except ServiceError:
        codes = None
    page.procore_down_since = projects.away_since(company_id)
    if ticket.sub and ticket.status != "written":
        page.commitments = commitments.choices(company_id, ticket.project_id)
    if codes is None:
        return page
    try:
        page.authorizations = authorizations.list_for_project(company_id, ticket.project_id)
    except ServiceError:  # Procore away: the authorizations are shown again once it answers
        page.authorizations = []
    ordered = sorted(codes.budget_codes, key=lambda b: b.flat_code)
    page.search = _search_words(company_id, codes)
    for route in ticket.routing:
        page.choices[route.line] = _line_choice(route, record.lines[route.line], codes, ordered)
    return page


def confirm_commitment_from_form(company_id: int, ticket_id: str, form: dict[str, str],
                                 actor: str) -> str:
    """Keep the commitment the PM chose for the ticket's sub; what the page says after."""
    # Through the API's validator and service.
    ticket = find_ticket(company_id, ticket_id)
    if not ticket.sub:
        raise Conflict("the ticket names no sub", code="no_sub")
    chosen = (form.get("contract_id") or "").strip()
    body = validate(SubCommitmentInput, {
        "sub": ticket.sub,
        "contract_id": int(chosen) if chosen.isdecimal() and len(chosen) < 18 else chosen or None})
    kept = commitments.confirm(company_id, ticket.project_id, body.sub, body.contract_id, actor)
    if kept.commitment.contract_id is None:
        return f"Confirmed: {ticket.sub}'s lines carry no commitment on this project."
    name = commitments.commitment_name(kept.commitment.contract_number, kept.commitment.contract_title,
                           kept.commitment.contract_id)
    return f"Confirmed: {ticket.sub}'s lines go on {name} on this project, for its next tickets too."


def _line_choice(route: RoutingLine, line: dict, codes: Catalog,
                 ordered: list[BudgetCode]) -> LineChoice:
    """A line's budget codes to pick from: its own cost code's first, then its cost type's, then
    the rest; and the budget code to create when its cost code has none of that type."""
    cost_code = router_for(codes).cost_code((line.get("costCode") or "").strip(), route.cost_type)
    missing = (cost_code is not None and route.cost_type is not None
               and codes.budget_code(cost_code.id, route.cost_type) is None)
    own = [b for b in ordered if cost_code is not None and b.cost_code_id == cost_code.id
           and b.cost_type == route.cost_type]
    return LineChoice(
        line=route.line, cost_type=route.cost_type, own=own,
        same_type=[b for b in ordered if b.cost_type == route.cost_type and b not in own],
        other_types=[b for b in ordered if b.cost_type != route.cost_type],
        create_cost_code_id=cost_code.id if missing else None,
        create_cost_type=route.cost_type if missing else None)


def _search_words(company_id: int, codes: Catalog) -> dict[int, str]:
    """What the picker searches for each of a project's budget codes."""
    learned = learning.words_by_code(company_id)
    names = {c.id: c for c in codes.cost_codes}
    found = {}
    for code in codes.budget_codes:
        cost_code = names.get(code.cost_code_id)
        found[code.id] = searchable(" ".join([
            code.flat_code, code.description or "", cost_code.name if cost_code else "",
            learned.get(fold(cost_code.shown), "") if cost_code else ""]))
    return found


def confirm_listed(company_id: int, ticket_id: str, chosen: FormChoices,
                   listed: dict[int, int]) -> tuple[FormChoices, list[int]]:
    """The form's choices with the budget codes 'Confirm all' listed (`listed`: line -> code id)
    confirmed, each only while it is still that line's code to check; and the listed lines that
    changed since, left unconfirmed."""
    routing = routing_of(find_ticket(company_id, ticket_id), Wait.BRIEFLY)
    current = {line.line: line.budget_code_id for line in routing.lines
               if line.needs_review and line.budget_code_id is not None}
    confirmed = dict(chosen.confirmed)
    changed = []
    for line, code_id in sorted(listed.items()):
        if line in chosen.routes:
            continue  # a code picked on the form stays picked
        if current.get(line) == code_id:
            confirmed[line] = code_id
        else:
            changed.append(line)
    return dataclasses.replace(chosen, confirmed=confirmed), changed


def _indexed(form: dict[str, str], name: str) -> dict[str, int | str]:
    """The `name[i]` fields of a form that have a value, by their index text."""
    found = {}
    for key, value in form.items():
        if key.startswith(f"{name}[") and key.endswith("]") and value:
            found[key[len(name) + 1:-1]] = int(value) if value.isdigit() else value
    return found


def _refuse_unchecked(company_id: int, ticket_id: str, routes: dict, allow_unrouted: bool) -> None:
    """Lines marked 'check' are decided one by one on the page: confirmed, or given a code.

    Without the project's codes (Procore away) nothing is refused here; the approval says why.
    """
    record = find_ticket(company_id, ticket_id)
    if record.status == "written":
        return
    routing = routing_of(record, Wait.BRIEFLY)
    if routing.pending:
        return
    undecided = [{"line": r.line, "description": r.description,
                  "reason": "not confirmed" if r.budget_code else "no budget code"}
                 for r in routing.lines if r.needs_review and str(r.line) not in routes
                 and not (r.budget_code is None and allow_unrouted)]
    if undecided:
        raise Conflict(f"{len(undecided)} line(s) to check are not confirmed",
                       code="lines_need_review", details=undecided)


def approve_from_form(company_id: int, ticket_id: str, form: dict[str, str], actor: str):
    """Approve with the page's choices, sent as `routes` exactly as an API caller sends them.

    A confirmed guess (`confirm[i]`, the line's automatic code) is sent as that line's route
    unless a code was picked for it; every line to check must be one or the other.
    """
    routes = _indexed(form, "routes")
    for line, code_id in _indexed(form, "confirm").items():
        routes.setdefault(line, code_id)
    if form.get("destination") != "daily_log":  # a daily log entry carries no budget code
        _refuse_unchecked(company_id, ticket_id, routes, form.get("allow_unrouted") == "on")
    options = validate(ApproveInput, {
        "destination": form.get("destination") or None,
        "allow_unrouted": form.get("allow_unrouted") == "on",
        "allow_rejected": form.get("allow_rejected") == "on",
        "require_exact": form.get("require_exact") == "on",
        "confirm_over_nte": form.get("confirm_over_nte") == "on",
        "routes": routes,
    })
    return approval.approve(company_id, ticket_id, options, actor=actor)


def selected_routes_from_form(form: dict[str, str], name: str = "routes") -> dict[int, int]:
    """The per-line choices of a submitted form, to show them again after a refusal."""
    chosen = {}
    for key, value in form.items():
        if key.startswith(f"{name}[") and key.endswith("]") and form_number(value):
            index = key[len(name) + 1:-1]
            if form_number(index):
                chosen[int(index)] = int(value)
    return chosen


def written_note(ticket: Ticket, *, already: bool = False) -> str:
    """What the page says after an approval, naming any lines written with no budget code."""
    note = "It was already in Procore." if already else "Written to Procore."
    return " ".join([note, *_blank_lines(ticket)])


def next_ticket_note(company_id: int, written_id: str) -> str | None:
    """What the next ticket's page says about the one 'Approve and next' just wrote."""
    key = ticket_key(written_id)
    if key is None:
        return None
    note = f"{short_reference(key)} was written to Procore. This is the next ticket."
    try:
        record = find_ticket(company_id, key)
    except ServiceError:
        return note
    if record.status != "written" or not record.written_routing:
        return note
    return " ".join([note, *_blank_lines(shape_ticket(record, Wait.NO))])


def _blank_lines(ticket: Ticket) -> list[str]:
    """How many lines, and dollars, of a written ticket landed on no budget code (nothing if none)."""
    blank = [r for r in ticket.routing if r.budget_code is None]
    if not blank:
        return []
    amount = sum((r.amount for r in blank), Decimal("0.00"))
    lines = f"{len(blank)} line{'s' if len(blank) != 1 else ''}"
    verb = "was" if len(blank) == 1 else "were"
    return [f"{lines} (${amount:,.2f}) {verb} written with no budget code."]


# ------------------------------------------------------------------ reject with a reason

REJECT_REASONS = (
    "Not extra: it is part of the contract scope",
    "We did not direct this work",
    "Hours or quantities do not match what we saw",
    "Already claimed on another ticket",
    "Needs a signature or photos",
)


def reject_reason(form: dict[str, str]) -> str:
    """The reason a reviewer chose and/or typed; refused when there is none."""
    choice = (form.get("reason_choice") or "").strip()
    typed = " ".join((form.get("reason_text") or "").split())[:500]
    chosen = choice if choice in REJECT_REASONS else ""
    reason = f"{chosen}: {typed}" if chosen and typed else (chosen or typed)
    if not reason:
        raise ValidationFailed("choose or type a reason", code="reason_required")
    return reason[:500]


def reject_from_form(company_id: int, ticket_id: str, form: dict[str, str], actor: str) -> Ticket:
    """Reject from the page, with the reason the crew will read."""
    return approval.reject(company_id, ticket_id, actor=actor, reason=reject_reason(form))


# ------------------------------------------------------------------ signing links

def signing_context(company_id: int, ticket_id: str, *, new_request=None,
                    error: ServiceError | None = None) -> dict:
    """What the ticket page shows about signing links: the requests, a new one's link (once),
    a refused request in plain words, and whether e-mail is set up."""
    return {"sign_requests": signing.list_requests(company_id, ticket_id).data,
            "new_request": new_request, "sign_error": error,
            "sign_error_text": signing_refusal(error) if error is not None else "",
            "qualifier_labels": QUALIFIER_LABELS, "mail_ready": mail.configured(),
            "signable": signing.signable,
            "link_days": current_app.config["SIGNATURE_LINK_DAYS"]}
