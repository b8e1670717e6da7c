"""What the review pages show: the queue and one ticket, composed from the ticket services."""
from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import math
import re
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from decimal import Decimal
from zoneinfo import ZoneInfo

from flask import current_app

from models import utcnow
from models.schemas import ApproveInput, NteStatus, RoutingLine, Ticket
from services import approval, authorizations, links, projects, signatures, tickets
from services.capture import short_reference
from services.errors import Conflict, ServiceError, ValidationFailed
from services.project_system import BudgetCode
from services.project_system.zones import UTC, jobsite_time, on_clock, project_zone
from services.routing import unrouted
from services.validation import validate

STATUS_TABS = (("submitted", "Needs review"), ("written", "Written"), ("rejected", "Rejected"))


SORT_CHOICES = (("oldest", "Oldest first"), ("newest", "Newest first"),
                ("amount", "Largest amount"), ("project", "Project"), ("sub", "Sub or crew"))
PAGE_SIZE = 25
STATUSES = ("submitted", "written", "rejected")


def _date(text: str | None) -> dt.date | None:
    """A yyyy-mm-dd date from a query string, or None when absent or not a date."""
    try:
        return dt.date.fromisoformat((text or "").strip()[:10]) if text else None
    except ValueError:
        return None


@dataclass(frozen=True)
class QueueView:
    """What a queue page shows: filters, sort and page, all kept in its URL."""

    status: str | None = "submitted"
    project_id: str | None = None
    sub: str | None = None
    q: str | None = None
    to_check: bool = False
    unsigned: bool = False
    awaiting_signature: bool = False
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    sort: str = "newest"
    page: int = 1

    @classmethod
    def from_args(cls, args) -> QueueView:
        """The view a query string asks for; anything unusable falls back to the default."""
        status = args.get("status", "submitted")
        page = args.get("page", "1")
        sort = args.get("sort", "newest")
        project_id = (args.get("project_id") or "").strip()
        return cls(
            status=None if status == "all" else (status if status in STATUSES else "submitted"),
            project_id=project_id[:40] if project_id.isdigit() else None,
            sub=(args.get("sub") or "").strip()[:120] or None,
            q=(args.get("q") or "").strip()[:100] or None,
            to_check=args.get("to_check") in ("1", "on", "true"),
            unsigned=args.get("unsigned") in ("1", "on", "true"),
            awaiting_signature=args.get("awaiting_signature") in ("1", "on", "true"),
            date_from=_date(args.get("from")), date_to=_date(args.get("to")),
            sort=sort if sort in tickets.SORTS else "newest",
            page=max(1, min(int(page), 100_000)) if page.isdigit() else 1)

    def params(self, **changes) -> dict[str, str]:
        """The query string of this view with some changes, leaving out what is the default."""
        view = dataclasses.replace(self, **changes)
        params = {"status": view.status or "all", "project_id": view.project_id, "sub": view.sub,
                  "q": view.q, "to_check": "1" if view.to_check else None,
                  "unsigned": "1" if view.unsigned else None,
                  "awaiting_signature": "1" if view.awaiting_signature else None,
                  "from": view.date_from.isoformat() if view.date_from else None,
                  "to": view.date_to.isoformat() if view.date_to else None,
                  "sort": view.sort if view.sort != "newest" else None,
                  "page": str(view.page) if view.page > 1 else None}
        return {key: value for key, value in params.items() if value}

    @property
    def query_string(self) -> str:
        """This view as a query string, to come back to it from a ticket."""
        return urllib.parse.urlencode(self.params())

    @classmethod
    def from_query_string(cls, text: str | None) -> QueueView:
        """The view a ticket page was opened from (its `from` argument)."""
        return cls.from_args(dict(urllib.parse.parse_qsl((text or "")[:1000])))

    def list_filter(self) -> tickets.ListFilter:
        """The ticket list filter of this view; dates count whole days, the end date included."""
        def midnight(day: dt.date) -> dt.datetime:
            return dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)
        return tickets.ListFilter(
            status=self.status, project_id=self.project_id, q=self.q, sub=self.sub,
            unsigned=self.unsigned, awaiting_signature=self.awaiting_signature,
            to_check=self.to_check,
            captured_from=midnight(self.date_from) if self.date_from else None,
            captured_before=midnight(self.date_to + dt.timedelta(days=1)) if self.date_to else None)

    @property
    def more_filters(self) -> bool:
        """Whether any filter behind 'More filters' is set, so that section opens."""
        return bool(self.to_check or self.unsigned or self.awaiting_signature or self.date_from
                    or self.date_to)


@dataclass(frozen=True)
class QueueRow:
    """One ticket as a row of the queue."""

    id: str
    reference: str
    status: str
    project_name: str
    description: str
    directed_by: str
    sub: str | None
    recorded_by: str | None
    age: str
    age_bucket: str
    total: Decimal
    needs_review: int | None
    photo_count: int
    signed: bool
    # What the signer held back, in plain words ('scope disputed'); None when nothing was.
    signed_with: str | None = None
    change_events: bool | None = None
    nte: NteStatus | None = None
    # When the oldest open signing link of an unsigned ticket was sent, on the jobsite's clock
    # ('2026-06-03 20:30 PDT'); None when none is open.
    awaiting_since: str | None = None

    @property
    def clean(self) -> bool:
        """Ready to write in bulk: every line on a confirmed code, signed without reserve,
        change events on."""
        return self.status == "submitted" and self.needs_review == 0 and self.signed \
            and self.signed_with is None and self.change_events is True


@dataclass(frozen=True)
class AgeBucket:
    """How many tickets of the current filter are of one age, and their dollar total."""

    key: str
    label: str
    count: int
    total: Decimal


@dataclass(frozen=True)
class Queue:
    """A page of the queue with its view, per-status counts, age buckets and choices."""

    rows: list[QueueRow]
    counts: dict[str, int]
    total: int
    view: QueueView
    projects: list[tuple[str, str]]
    subs: list[str]
    buckets: list[AgeBucket]
    page_size: int = PAGE_SIZE
    procore_down_since: dt.datetime | None = None

    @property
    def pages(self) -> int:
        """How many pages the current filter has (at least one)."""
        return max(1, -(-self.total // self.page_size))

    @property
    def first_shown(self) -> int:
        """The position of the page's first row among all matches (1-based; 0 when none)."""
        return (self.view.page - 1) * self.page_size + 1 if self.rows else 0

    @property
    def last_shown(self) -> int:
        """The position of the page's last row among all matches."""
        return self.first_shown + len(self.rows) - 1 if self.rows else 0

    @property
    def down_for(self) -> str:
        """How long Procore has been away, as the queue shows ages."""
        return age_text(self.procore_down_since) if self.procore_down_since else ""

    # Shorthands the templates use.
    @property
    def status(self) -> str | None:
        return self.view.status


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
class TicketPage:
    """Everything the ticket page shows."""

    ticket: Ticket
    project_name: str
    change_events: bool | None
    captured_at_text: str
    choices: dict[int, LineChoice] = field(default_factory=dict)
    error: ServiceError | None = None
    message: str | None = None
    chosen: FormChoices = field(default_factory=FormChoices)
    authorizations: list[NteStatus] = field(default_factory=list)
    zone: ZoneInfo = UTC
    reject_open: bool = False
    procore_down_since: dt.datetime | None = None
    being_written: bool = False

    @property
    def down_for(self) -> str:
        """How long Procore has been away."""
        return age_text(self.procore_down_since) if self.procore_down_since else ""

    def clock(self, moment: dt.datetime | str | None) -> str:
        """Any time on the page, in one format on the jobsite's clock: '2026-06-03 20:30 PDT'."""
        return on_clock(moment, self.zone)

    def photo_caption(self, photo) -> str:
        """When and where a photo was taken, as far as the phone said."""
        parts = [self.clock(photo.taken_at) if photo.taken_at else "time not given"]
        if photo.coords:
            place = f"{photo.coords.lat:.5f}, {photo.coords.lng:.5f}"
            if photo.coords.accuracy_m is not None:
                place += f" (within {photo.coords.accuracy_m:.0f} m)"
            parts.append(place)
        else:
            parts.append("place not given")
        return " · ".join(parts)

    @staticmethod
    def units(route) -> tuple[str, str]:
        """A line's quantity and rate with their units and currency."""
        quantity = "" if route.quantity is None else f"{route.quantity.normalize():f}"
        rate = "" if route.unit_cost is None else f"${route.unit_cost:,.2f}"
        if route.kind == "labor":
            return (f"{quantity} worker-h" if quantity else "", f"{rate}/h" if rate else "no rate")
        if route.kind == "equipment":
            return (f"{quantity} h" if quantity else "", f"{rate}/h" if rate else "no rate")
        return (quantity, f"{rate} each" if rate else "no unit cost")

    @property
    def subtotals(self) -> list[tuple[str, str, Decimal]]:
        """Labor, equipment and materials subtotals, for the kinds the ticket has."""
        totals = []
        for kind, label in (("labor", "Labor"), ("equipment", "Equipment"), ("materials", "Materials")):
            lines = [r.amount for r in self.ticket.routing if r.kind == kind]
            if lines:
                totals.append((kind, label, sum(lines, Decimal("0.00"))))
        return totals

    def other_type_chosen(self, line: int) -> bool:
        """Whether the code picked for a line is of another cost type than the line's."""
        choice = self.choices.get(line)
        chosen = self.chosen.routes.get(line)
        return bool(choice and chosen and any(b.id == chosen for b in choice.other_types))

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

    @property
    def warnings(self) -> list[str]:
        """The ticket's warnings in plain words."""
        return [plain_warning(w) for w in self.ticket.warnings]


def age_text(moment: dt.datetime, now: dt.datetime | None = None) -> str:
    """How long ago, in the largest sensible unit: '5 min', '3 h', '2 d'."""
    seconds = max(0, int(((now or utcnow()) - moment).total_seconds()))
    if seconds < 3600:
        return f"{max(1, seconds // 60)} min"
    if seconds < 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


# ------------------------------------------------------------------ Procore away

# How long a page waits for Procore before answering with what it last knew, and how long
# after a failure pages keep to what they know before asking Procore again.
PROCORE_WAIT_S = 1.2
PROCORE_RETRY_S = 30


class Unknown(ServiceError):
    """Procore is away and nothing was known before."""

    status = 503
    code = "project_system_unavailable"


class _Known:
    """What the pages last read from Procore for each company, and since when it is away."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: dict[tuple, object] = {}
        self.down_since: dict[int, dt.datetime] = {}
        self.failed_at: dict[int, float] = {}

    def down(self, company_id: int) -> None:
        with self.lock:
            self.down_since.setdefault(company_id, utcnow())
            self.failed_at[company_id] = time.monotonic()

    def up(self, company_id: int) -> None:
        with self.lock:
            self.down_since.pop(company_id, None)
            self.failed_at.pop(company_id, None)

    def resting(self, company_id: int) -> bool:
        """Whether Procore failed recently enough that pages do not ask it again yet."""
        with self.lock:
            failed = self.failed_at.get(company_id)
        return failed is not None and time.monotonic() - failed < PROCORE_RETRY_S


def _known() -> _Known:
    """This app's record of last-known Procore answers."""
    return current_app.extensions.setdefault("review_last_known", _Known())


def procore_down_since(company_id: int) -> dt.datetime | None:
    """Since when the pages have found Procore unreachable, or None when it answers."""
    known = _known()
    with known.lock:
        return known.down_since.get(company_id)


def _in_background(load):
    """Run a Procore read on its own thread with the app context; a Future of its answer."""
    app = current_app._get_current_object()
    future: Future = Future()

    def run() -> None:
        with app.app_context():
            try:
                future.set_result(load())
            except BaseException as error:  # noqa: BLE001 - handed to the waiting page
                future.set_exception(error)
    threading.Thread(target=run, name="procore-page-read", daemon=True).start()
    return future


def _last_known(company_id: int, key: tuple, load):
    """A Procore read for a page: live when Procore answers within PROCORE_WAIT_S, else the
    last known answer (raising Unknown when there is none). A read that outlives the wait
    still finishes on its own thread and refreshes what is known."""
    known = _known()
    full_key = (company_id, *key)
    if not known.resting(company_id):
        future = _in_background(load)

        def keep(done: Future) -> None:
            if done.exception() is None:
                with known.lock:
                    known.values[full_key] = done.result()
                known.up(company_id)
        future.add_done_callback(keep)
        try:
            return future.result(timeout=PROCORE_WAIT_S)
        except FutureTimeout:
            known.down(company_id)
        except ServiceError as error:
            if error.status < 500:
                raise
            known.down(company_id)
    with known.lock:
        if full_key in known.values:
            return known.values[full_key]
    raise Unknown("Procore cannot be reached and nothing is known about this yet")


def _remote_projects(company_id: int) -> list:
    """The company's projects, or the last known list while Procore is away."""
    return _last_known(company_id, ("projects",), lambda: projects.remote_projects(company_id))


def _catalog(company_id: int, project_id: str):
    """A project's codes, or the last known ones while Procore is away."""
    return _last_known(company_id, ("catalog", project_id),
                       lambda: projects.catalog(company_id, project_id))


def _route(company_id: int, project_id: str, lines: list) -> tuple[list, list[str]]:
    """Route lines with the project's (last known) codes; every line flagged when none."""
    try:
        codes = _catalog(company_id, project_id)
    except ServiceError:
        return unrouted(lines, "the project's budget codes could not be read"), \
            ["routing is unavailable"]
    return codes.router.route_all(lines), []


def _project_names(company_id: int) -> dict[str, str]:
    """Project names by id (the last known ones while Procore is away), or nothing."""
    try:
        return {str(p.id): p.display_name or p.name for p in _remote_projects(company_id)}
    except ServiceError:
        return {}


def _on_site_clock(moment: dt.datetime, company_id: int, project_id: str) -> str:
    """A time on the project's jobsite clock, in the pages' one format."""
    return on_clock(moment, _time_zone(company_id, project_id))


def _time_zone(company_id: int, project_id: str) -> ZoneInfo:
    """A project's time zone from the (last known) project list; UTC when unknown."""
    try:
        found = next((p for p in _remote_projects(company_id) if str(p.id) == str(project_id)), None)
    except ServiceError:
        return UTC
    return project_zone(found.time_zone) if found is not None else UTC


def _change_events(company_id: int, project_id: str) -> bool | None:
    """Whether a project takes change events (last known while Procore is away); None if unknown."""
    try:
        return _last_known(company_id, ("change_events", project_id),
                           lambda: projects.change_events_enabled(company_id, project_id))
    except ServiceError:
        return None


# What a signer held back, as the queue's Signed column says it after "Yes, ".
HELD_BACK = {"verified_scope_disputed": "scope disputed", "not_verified": "not verified"}


def _held_back(signature: dict | None) -> str | None:
    """What a stored signature does not vouch for, in plain words; None when it vouches for all."""
    code, reason = signatures.qualifier(signature)
    if code in HELD_BACK:
        return HELD_BACK[code]
    return "with a note" if code is None and reason else None


def queue(company_id: int, view: QueueView | None = None, *, now: dt.datetime | None = None
          ) -> Queue:
    """A page of the review queue: 'Needs review' newest first unless the view says otherwise."""
    view = view or QueueView()
    now = now or utcnow()
    names = _project_names(company_id)
    where = view.list_filter()
    route = functools.partial(_route, company_id)
    records, total = tickets.list_ticket_records(
        company_id, where=where, sort=view.sort, project_names=names, limit=PAGE_SIZE,
        offset=(view.page - 1) * PAGE_SIZE, route=route)
    if not records and total and view.page > 1:  # past the end: show the last page instead
        view = dataclasses.replace(view, page=max(1, -(-total // PAGE_SIZE)))
        records, total = tickets.list_ticket_records(
            company_id, where=where, sort=view.sort, project_names=names, limit=PAGE_SIZE,
            offset=(view.page - 1) * PAGE_SIZE, route=route)
    labels = links.labels_by_token(company_id, {r.link_token for r in records if r.link_token})
    awaiting = signatures.awaiting_since(company_id, [r.id for r in records if not r.signature])
    change_events = {project_id: _change_events(company_id, project_id)
                     for project_id in {r.project_id for r in records}}
    rows = []
    for record in records:
        routes, warnings = _route(company_id, record.project_id, record.lines)
        rows.append(QueueRow(
            id=record.id, reference=short_reference(record.id), status=record.status,
            project_name=names.get(record.project_id, record.project_id),
            description=record.description, directed_by=record.directed_by,
            sub=labels.get(record.link_token or ""), recorded_by=record.captured_by,
            age=age_text(record.captured_at, now),
            age_bucket=tickets.age_bucket(record.captured_at, now), total=record.total,
            needs_review=None if warnings else sum(1 for r in routes if r.needs_review),
            photo_count=record.photo_count, signed=bool(record.signature),
            signed_with=_held_back(record.signature),
            change_events=change_events[record.project_id],
            nte=authorizations.status_of(company_id, record.authorization_id),
            awaiting_since=_on_site_clock(awaiting[record.id], company_id, record.project_id)
            if record.id in awaiting else None))
    totals = tickets.age_totals(company_id, where, now, route=route)
    buckets = [AgeBucket(key=key, label=label, count=totals[key][0], total=totals[key][1])
               for key, label, _days in tickets.AGE_BUCKETS]
    return Queue(rows=rows, counts=tickets.list_status_counts(company_id, where, route=route),
                 total=total, view=view, projects=sorted(names.items(), key=lambda item: item[1]),
                 subs=links.labels(company_id), buckets=buckets,
                 procore_down_since=procore_down_since(company_id))


def ticket_page(company_id: int, ticket_id: str, *, error: ServiceError | None = None,
                message: str | None = None, chosen: FormChoices | None = None) -> TicketPage:
    """A ticket with the choices a reviewer has for each of its lines.

    Everything read from Procore comes from what was last known when it does not answer
    in time, so the page still opens, with a banner saying since when Procore is away.
    """
    record = tickets.find_ticket(company_id, ticket_id)
    if record.status == "written" and record.written_routing:
        ticket = tickets.shape_ticket(record, [RoutingLine.model_validate(line)
                                               for line in record.written_routing])
    else:
        routes, warnings = _route(company_id, record.project_id, record.lines)
        ticket = tickets.shape_ticket(record, tickets.routing_lines(routes), warnings)
    names = _project_names(company_id)
    page = TicketPage(ticket=ticket, project_name=names.get(ticket.project_id, ticket.project_id),
                      change_events=None, captured_at_text=jobsite_time(ticket.captured_at, UTC),
                      error=error, message=message, chosen=chosen or FormChoices(),
                      being_written=ticket.status != "written" and approval.being_written(record))
    page.zone = _time_zone(company_id, ticket.project_id)
    page.captured_at_text = page.clock(ticket.captured_at)
    page.change_events = _change_events(company_id, ticket.project_id)
    try:
        codes = _catalog(company_id, ticket.project_id)
    except ServiceError:
        codes = None
    page.procore_down_since = procore_down_since(company_id)
    if codes is None:
        return page
    try:
        page.authorizations = authorizations.list_for_project(company_id, ticket.project_id)
    except ServiceError:  # Procore away: the authorizations are shown again once it answers
        page.authorizations = []
    ordered = sorted(codes.budget_codes, key=lambda b: b.flat_code)
    by_code = {c.code.replace(" ", "").lower(): c for c in codes.cost_codes}
    for route in ticket.routing:
        line = record.lines[route.line]
        cost_code = by_code.get((line.get("costCode") or "").replace(" ", "").lower())
        missing = (cost_code is not None and route.cost_type is not None
                   and codes.budget_code(cost_code.id, route.cost_type) is None)
        own = [b for b in ordered if cost_code is not None and b.cost_code_id == cost_code.id
               and b.cost_type == route.cost_type]
        page.choices[route.line] = LineChoice(
            line=route.line, cost_type=route.cost_type, own=own,
            same_type=[b for b in ordered if b.cost_type == route.cost_type and b not in own],
            other_types=[b for b in ordered if b.cost_type != route.cost_type],
            create_cost_code_id=cost_code.id if missing else None,
            create_cost_type=route.cost_type if missing else None)
    return page


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
    record = tickets.find_ticket(company_id, ticket_id)
    if record.status == "written":
        return
    routed, warnings = _route(company_id, record.project_id, record.lines)
    if warnings:
        return
    undecided = [{"line": r.line, "description": r.description,
                  "reason": "not confirmed" if r.budget_code else "no budget code"}
                 for r in routed if r.needs_review and str(r.line) not in routes
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
        if key.startswith(f"{name}[") and key.endswith("]") and value.isdigit():
            index = key[len(name) + 1:-1]
            if index.isdigit():
                chosen[int(index)] = int(value)
    return chosen


def written_note(ticket: Ticket, *, already: bool = False) -> str:
    """What the page says after an approval, naming any lines written with no budget code."""
    note = "It was already in Procore." if already else "Written to Procore."
    return " ".join([note, *_blank_lines(ticket)])


def next_ticket_note(company_id: int, written_id: str) -> str | None:
    """What the next ticket's page says about the one 'Approve and next' just wrote."""
    if not is_ticket_id(written_id):
        return None
    note = f"{short_reference(written_id)} was written to Procore. This is the next ticket."
    try:
        record = tickets.find_ticket(company_id, written_id)
    except ServiceError:
        return note
    if record.status != "written" or not record.written_routing:
        return note
    return " ".join([note, *_blank_lines(tickets.shape_without_waiting(record))])


def _blank_lines(ticket: Ticket) -> list[str]:
    """How many lines, and dollars, of a written ticket landed on no budget code (nothing if none)."""
    blank = [r for r in ticket.routing if r.budget_code is None]
    if not blank:
        return []
    amount = sum((r.amount for r in blank), Decimal("0.00"))
    lines = f"{len(blank)} line{'s' if len(blank) != 1 else ''}"
    verb = "was" if len(blank) == 1 else "were"
    return [f"{lines} (${amount:,.2f}) {verb} written with no budget code."]


# ------------------------------------------------------------------ plain words

PLAIN_ERRORS = {
    "no_change_events": "This project does not use change events in Procore, so this ticket can "
                        "only be recorded as a daily log entry, which bills nothing.",
    "ticket_rejected": "This ticket is already rejected. To write it, restore it to the queue "
                       "first, or tick \"Approve although this ticket was rejected\".",
    "ticket_written": "This ticket is already in Procore, so it can no longer change.",
    "approval_in_progress": "Someone is writing this ticket to Procore right now. Try again in a "
                            "few seconds to see how it went.",
    "project_system_unavailable": "Procore cannot be reached right now. Nothing was written and "
                                  "the ticket stays in the queue; try again in a little while.",
    "project_system_write_unconfirmed": "Procore did not confirm the write, so this ticket may "
                                        "already be in Procore, in whole or in part. It stays in "
                                        "the queue: approve it again in a little while, and what "
                                        "is there is found and finished, never written twice.",
    "project_system_auth_failed": "Procore refused our sign-in. Nothing was written; ask your "
                                  "administrator to reconnect Procore.",
    "project_system_error": "Procore did not accept the ticket. Nothing was written; try again, "
                            "and if it keeps failing tell your administrator.",
    "project_system_not_connected": "This company is not connected to Procore yet; ask your "
                                    "administrator to connect it.",
    "validation_failed": "A chosen budget code can no longer be used; pick the budget codes again.",
    "reason_required": "Choose a reason or type one: the crew will read it. Nothing was changed.",
    "cost_code_not_found": "That cost code is no longer in Procore; pick another.",
    "project_not_found": "This ticket's project is no longer in Procore.",
    "ticket_not_found": "This ticket no longer exists.",
    "document_busy": "The ticket's document could not be made just now. Nothing was written; "
                     "try again in a moment.",
}
PLAIN_LINE_REASONS = {
    "not confirmed": "is marked to check: confirm its budget code or pick another",
    "no budget code": "has no budget code yet: pick one",
    "not on a confirmed budget code (exact: false)":
        "has a budget code that is only a guess: confirm it or pick another",
}


@dataclass(frozen=True)
class PlainError:
    """A refusal as a PM reads it: one sentence, and a point per line it concerns."""

    message: str
    points: list[str]
    lines: dict[int, str]


def plain_error(error: ServiceError) -> PlainError:
    """Say what went wrong and what to do, without codes, field names or HTTP."""
    if error.code == "lines_need_review" and isinstance(error.details, list):
        lines = {d["line"]: PLAIN_LINE_REASONS.get(d.get("reason", ""), "needs a check")
                 for d in error.details if isinstance(d, dict) and "line" in d}
        count = len(lines)
        message = (f"{count} line{'s' if count != 1 else ''} need{'s' if count == 1 else ''} a "
                   "check before this can be written. Nothing was written.")
        described = {d["line"]: d.get("description") or "" for d in error.details
                     if isinstance(d, dict) and "line" in d}
        points = [f"Line {line + 1} ({described[line]}) {reason}" for line, reason in lines.items()]
        return PlainError(message=message, points=points, lines=lines)
    message = PLAIN_ERRORS.get(error.code)
    if error.code == "project_system_busy":
        message = _busy_message(error.headers.get("Retry-After", ""))
    if message is None:
        message = ("Procore could not take this; nothing was written. Try again in a moment."
                   if error.status >= 500 else "That could not be done; nothing was changed.")
    return PlainError(message=message, points=[], lines={})


def _busy_message(retry_after: str) -> str:
    """Procore asked for a pause, or is slow for this company: how long to wait, in words."""
    seconds = int(retry_after) if retry_after.isdecimal() else 0
    if seconds <= 10:
        wait = "in a few seconds"
    elif seconds < 90:
        wait = f"in about {seconds} seconds"
    else:
        wait = f"in about {math.ceil(seconds / 60)} minutes"
    return (f"Procore is busy and asked us to wait before sending more. Nothing was written and "
            f"the ticket stays in the queue; try again {wait}.")


_LINE_PATH = re.compile(r"\b(labor|equipment|materials)\[(\d+)\]")


def plain_warning(text: str) -> str:
    """A stored warning in plain words: 'labor[2] (Mystery)' reads 'Labor line 3 (Mystery)'."""
    if text.startswith("routing is unavailable"):
        return "Procore cannot be reached, so the budget codes could not be checked just now."
    return _LINE_PATH.sub(lambda m: f"{m.group(1).capitalize()} line {int(m.group(2)) + 1}", text)


# ------------------------------------------------------------------ bulk approval

MAX_BULK = 100


@dataclass(frozen=True)
class BulkItem:
    """One ticket of a bulk approval: before (to confirm) or after (with its outcome)."""

    id: str
    reference: str
    description: str
    total: Decimal
    outcome: str | None = None  # written, already, refused
    message: str | None = None


def _selected(company_id: int, ids: list[str]) -> list:
    """The company's tickets among the ids, each once, in the order given (at most 100)."""
    wanted = list(dict.fromkeys(i for i in ids if i))[:MAX_BULK]
    found = []
    for ticket_id in wanted:
        try:
            found.append(tickets.find_ticket(company_id, ticket_id))
        except ServiceError:
            continue  # another company's or a missing ticket: not offered, not written
    return found


def bulk_selection(company_id: int, ids: list[str]) -> list[BulkItem]:
    """The tickets a bulk approval would write, to confirm their count and total."""
    return [BulkItem(id=t.id, reference=short_reference(t.id), description=t.description,
                     total=t.total) for t in _selected(company_id, ids)]


def bulk_approve(company_id: int, ids: list[str], actor: str) -> list[BulkItem]:
    """Approve each ticket once through the one approval service, each with its own outcome.

    Only lines on a confirmed budget code go through (as `require_exact`): a ticket with a
    line to check is refused with the reason and the others are still written.
    """
    results = []
    away = None
    for ticket in _selected(company_id, ids):
        item = BulkItem(id=ticket.id, reference=short_reference(ticket.id),
                        description=ticket.description, total=ticket.total)
        if away is not None:  # Procore was just found away: do not wait on it again per ticket
            results.append(dataclasses.replace(item, outcome="refused", message=away))
            continue
        try:
            result = approval.approve(company_id, ticket.id, ApproveInput(require_exact=True),
                                      actor=actor)
        except ServiceError as error:
            plain = plain_error(error)
            results.append(dataclasses.replace(
                item, outcome="refused", message=" ".join([plain.message, *plain.points])))
            if error.code in ("project_system_unavailable", "project_system_write_unconfirmed",
                              "project_system_auth_failed"):
                away = plain.message
            continue
        results.append(dataclasses.replace(
            item, outcome="already" if result.already else "written",
            message="It was already in Procore." if result.already else "Written to Procore."))
    return results


def bulk_total(items: list[BulkItem]) -> Decimal:
    """The dollar total of some tickets."""
    return sum((item.total for item in items), Decimal("0.00"))


def next_ticket(company_id: int, view: QueueView, current_id: str) -> str | None:
    """The ticket after `current_id` in a queue view (its filters and sort), for 'Approve and next'.

    Read before the approval, while the current ticket is still in a 'Needs review' view;
    when it is not in the view at all, the view's first other ticket.
    """
    records, _total = tickets.list_ticket_records(
        company_id, where=view.list_filter(), sort=view.sort,
        project_names=_project_names(company_id), limit=tickets.MAX_CHECKED,
        route=functools.partial(_route, company_id))
    ids = [record.id for record in records]
    if current_id in ids:
        later = ids[ids.index(current_id) + 1:]
        return later[0] if later else None
    return next((i for i in ids if i != current_id), None)


def is_ticket_id(text: str) -> bool:
    """Whether some text can be a ticket id (a UUID), to quote it safely."""
    try:
        uuid.UUID(str(text)[:40])
    except ValueError:
        return False
    return True


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


QUALIFIER_LABELS = {"verified": "Time and materials verified",
                    "verified_scope_disputed": "Time and materials verified; scope disputed",
                    "not_verified": "Not verified"}


def signing_context(company_id: int, ticket_id: str, *, new_request=None,
                    error: ServiceError | None = None) -> dict:
    """What the ticket page shows about signing links: the requests, a new one's link (once),
    a refused request in plain words, and whether e-mail is set up."""
    from flask import current_app

    from services import mail

    return {"sign_requests": signatures.list_requests(company_id, ticket_id).data,
            "new_request": new_request, "sign_error": error,
            "sign_error_text": _signing_refusal(error) if error is not None else "",
            "qualifier_labels": QUALIFIER_LABELS, "mail_ready": mail.configured(),
            "link_days": current_app.config["SIGNATURE_LINK_DAYS"]}


def _signing_refusal(error: ServiceError) -> str:
    """Why a signing link was not made, in a reviewer's words."""
    if error.code == "ticket_already_signed":
        return "The ticket is already signed."
    if error.code == "ticket_written":
        return "The ticket is already written to Procore; it can no longer be signed."
    if error.code == "ticket_rejected":
        return "The ticket is rejected. Restore it to the queue before sending it to be signed."
    fields = {"name": "the signer's name", "email": "the e-mail address", "phone": "the phone number",
              "role": "the role"}
    problems = [detail for detail in error.details or [] if isinstance(detail, dict)]
    if any(p["field"] == "email" and "or a phone" in p["message"] for p in problems):
        return "Give an e-mail address or a phone number (or both)."
    named = [fields.get(p["field"], "a field") for p in problems]
    return ("Please check " + ", ".join(dict.fromkeys(named)) + ".") if named else error.message
