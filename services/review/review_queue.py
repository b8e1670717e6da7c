"""The review queue: its view (filters, sort and page in the URL), its rows, the tickets ready
for bulk approval and the ticket that comes next."""
from __future__ import annotations

import dataclasses
import datetime as dt
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from zoneinfo import ZoneInfo

from flask_babel import force_locale
from sqlalchemy.orm import undefer

from models import Ticket as TicketRecord
from models import utcnow
from models.schemas import NteStatus, Shows, ticket_fields
from models.ticket import STATUSES
from services.capture import links
from services.pricing import authorizations
from services.project_system import projects
from services.project_system.zones import UTC, on_clock
from services.review.review_bulk import MAX_BULK, bulk_confirmable
from services.tickets import signatures, stages, ticket_queries
from services.tickets.plain_words import age_text, held_back, record_words
from services.tickets.ticket_shapes import Wait, routing_of

AGES = tuple(key for key, _label, _days in ticket_queries.AGE_BUCKETS)
# The board's ages (days since capture), which a tap on one of its bars opens the queue with.
BOARD_AGES = tuple(key for key, *_rest in stages.AGES)
# Where a claim stands (stages.STAGES), or "outstanding": in any stage not yet paid.
STAGE_CHOICES = (*stages.STAGES, "outstanding")
STATUS_TABS = (("submitted", "Needs review"), ("written", "Written"), ("rejected", "Rejected"))


SORT_CHOICES = (("oldest", "Oldest first"), ("newest", "Newest first"),
                ("amount", "Largest amount"), ("project", "Project"), ("sub", "Sub or crew"))


PAGE_SIZE = 25
# How long a queue drawn from stale answers waits for their fresh reads, to say whether Procore
# is away on this page rather than the next one (only while it is not known away already).
AWAY_GRACE_S = 0.5


def _date(text: str | None) -> dt.date | None:
    """A yyyy-mm-dd date from a query string, or None when absent or not a date."""
    try:
        day = dt.date.fromisoformat((text or "").strip()[:10]) if text else None
        return day if day is None or day < dt.date.max else None  # a day after it exists
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
    age: str | None = None  # one of the age buckets' keys, or of the board's ages
    stage: str | None = None  # one of STAGE_CHOICES
    # Written as a change event and on no change order yet: claimed, not yet billed.
    not_on_change_order: bool = False
    written_to: dt.date | None = None  # written on or before this day (UTC), as `to` reads
    sort: str = "oldest"  # the ticket closest to missing its billing window first
    page: int = 1

    @classmethod
    def from_args(cls, args) -> QueueView:
        """The view a query string asks for; anything unusable falls back to the default."""
        status = args.get("status", "submitted")
        page = args.get("page", "1")
        sort = args.get("sort", "oldest")
        project_id = (args.get("project_id") or "").strip()
        unbilled = args.get("not_on_change_order") in ("1", "on", "true")
        if unbilled:
            status = "written"
        stage = args.get("stage") if args.get("stage") in STAGE_CHOICES else None
        if stage and "status" not in args:  # a stage says the status itself
            status = stages.STATUS_OF.get(stage, "all")
        return cls(
            status=None if status == "all" else (status if status in STATUSES else "submitted"),
            not_on_change_order=unbilled, written_to=_date(args.get("written_to")),
            project_id=project_id[:40] if project_id.isdigit() else None,
            sub=(args.get("sub") or "").strip()[:120] or None,
            q=(args.get("q") or "").strip()[:100] or None,
            to_check=args.get("to_check") in ("1", "on", "true"),
            unsigned=args.get("unsigned") in ("1", "on", "true"),
            awaiting_signature=args.get("awaiting_signature") in ("1", "on", "true"),
            date_from=_date(args.get("from")), date_to=_date(args.get("to")),
            age=args.get("age") if args.get("age") in (*AGES, *BOARD_AGES) else None,
            stage=stage,
            sort=sort if sort in ticket_queries.SORTS else "oldest",
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
                  "age": view.age, "stage": view.stage,
                  "not_on_change_order": "1" if view.not_on_change_order else None,
                  "written_to": view.written_to.isoformat() if view.written_to else None,
                  "sort": view.sort if view.sort != "oldest" else None,
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

    def list_filter(self, now: dt.datetime | None = None, *, age: bool = True
                    ) -> ticket_queries.ListFilter:
        """The ticket list filter of this view; dates count whole days, the end date included,
        and an age bucket (unless `age` is false) counts back from `now`."""
        def midnight(day: dt.date) -> dt.datetime:
            return dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)
        bounds = [midnight(self.date_from) if self.date_from else None,
                  midnight(self.date_to + dt.timedelta(days=1)) if self.date_to else None]
        if age and self.age in BOARD_AGES:
            older, younger = stages.age_range(self.age, now or utcnow())
        elif age and self.age:
            younger, older = ticket_queries.age_range(self.age, now or utcnow())
        if age and self.age:
            bounds = [max(b for b in (bounds[0], older) if b is not None) if older else bounds[0],
                      min(b for b in (bounds[1], younger) if b is not None) if younger
                      else bounds[1]]
        return ticket_queries.ListFilter(
            status=self.status, project_id=self.project_id, q=self.q, sub=self.sub,
            unsigned=self.unsigned, awaiting_signature=self.awaiting_signature,
            to_check=self.to_check, captured_from=bounds[0], captured_before=bounds[1],
            not_on_change_order=self.not_on_change_order,
            written_before=midnight(self.written_to + dt.timedelta(days=1)) if self.written_to
            else None,
            stage=self.stage if self.stage in stages.STAGES else None,
            outstanding=self.stage == "outstanding")

    @property
    def board_filter(self) -> str | None:
        """The board's stage and age this view shows, in a PM's words; None when neither."""
        with force_locale("en"):  # as the board says them
            words = [str(stages.LABELS[self.stage]) if self.stage in stages.LABELS
                     else "Not yet paid" if self.stage else None,
                     next((str(label) for key, label, *_days in stages.AGES if key == self.age),
                          None)]
        return " · ".join(word for word in words if word) or None

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
    # The optional text fields declared to show in the queue that the ticket gives, in order.
    texts: tuple[str, ...]
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
    # Of the lines to check, those whose budget code is a suggestion from past decisions on this
    # sub's (or unattributed) tickets, which bulk approval may confirm.
    suggested: int = 0
    # A written ticket: how long ago it was written, and its record in Procore as last read.
    written_age: str | None = None
    in_procore: str | None = None

    @property
    def clean(self) -> bool:
        """Ready to write in bulk, signed without reserve: with change events on, every line on
        a confirmed code; on a project without them, as a daily log entry, which needs none."""
        return self._signed_whole and (self.change_events is False or (
            self.change_events is True and self.needs_review == 0))

    @property
    def ready(self) -> bool:
        """Ready to write in bulk once the PM confirms its suggestions: clean but for lines whose
        budget code is a suggestion from past decisions."""
        return self._signed_whole and self.change_events is True \
            and self.needs_review is not None and self.needs_review == self.suggested

    @property
    def _signed_whole(self) -> bool:
        """Submitted, and signed without anything held back."""
        return self.status == "submitted" and self.signed and self.signed_with is None


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
    # The jobsite clock the page's times are read on: the zone most of its rows' projects share.
    zone: ZoneInfo = UTC
    # Written change events on no change order yet, within the view's other filters: how many,
    # and their dollars.
    unbilled: tuple[int, Decimal] = (0, Decimal(0))

    def clock(self, moment: dt.datetime | None) -> str:
        """A time on the queue's jobsite clock: '2026-06-03 10:53 PST'."""
        return on_clock(moment, self.zone) if moment else ""

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


def queue(company_id: int, view: QueueView | None = None, *, now: dt.datetime | None = None
          ) -> Queue:
    """A page of the review queue: 'Needs review' newest first unless the view says otherwise.

    Everything read from the project system waits only briefly and else shows what was last
    known, so the queue opens while it is away, with a banner saying since when.
    """
    view = view or QueueView()
    now = now or utcnow()
    names = projects.project_names(company_id)
    where = view.list_filter(now)

    def page(view: QueueView) -> tuple[list[TicketRecord], int]:
        return ticket_queries.list_ticket_records(
            company_id, where=where, sort=view.sort, project_names=names, limit=PAGE_SIZE,
            offset=(view.page - 1) * PAGE_SIZE, wait=Wait.BRIEFLY,
            load=(undefer(TicketRecord.written_routing),))
    records, total = page(view)
    if not records and total and view.page > 1:  # past the end: show the last page instead
        view = dataclasses.replace(view, page=max(1, -(-total // PAGE_SIZE)))
        records, total = page(view)
    rows, zones = _rows(company_id, records, names, now)
    # Opened from a board's bar, the ages are the board's, so the chips and the bar agree.
    board = view.age in BOARD_AGES
    totals = ticket_queries.age_totals(company_id, view.list_filter(now, age=False), now,
                                       wait=Wait.BRIEFLY, board=board)
    with force_locale("en"):
        ages = [(key, str(label)) for key, label, *_days in stages.AGES] if board \
            else [(key, label) for key, label, _days in ticket_queries.AGE_BUCKETS]
    buckets = [AgeBucket(key=key, label=label, count=totals[key][0], total=totals[key][1])
               for key, label in ages]
    if projects.away_since(company_id) is None:
        projects.settle_reads(AWAY_GRACE_S)
    others = dataclasses.replace(view.list_filter(now, age=False), not_on_change_order=False)
    return Queue(rows=rows, counts=ticket_queries.list_status_counts(
                     company_id, dataclasses.replace(where, not_on_change_order=False),
                     wait=Wait.BRIEFLY),
                 unbilled=ticket_queries.count_and_total(company_id, dataclasses.replace(
                     others, status="written", not_on_change_order=True)),
                 total=total, view=view, projects=sorted(names.items(), key=lambda item: item[1]),
                 subs=ticket_queries.subs(company_id, links.labels(company_id)), buckets=buckets,
                 procore_down_since=projects.away_since(company_id),
                 zone=Counter(zones[r.project_id] for r in records).most_common(1)[0][0]
                 if records else UTC)


def _rows(company_id: int, records: list[TicketRecord], names: dict[str, str],
          now: dt.datetime) -> tuple[list[QueueRow], dict[str, ZoneInfo]]:
    """Tickets as rows of the queue, and the jobsite zone of each project among them."""
    awaiting = signatures.awaiting_since(company_id, [r.id for r in records if not r.signature])
    shown = {r.project_id for r in records}
    change_events = {project_id: projects.page_change_events(company_id, project_id)
                     for project_id in shown}
    zones = {project_id: projects.page_time_zone(company_id, project_id) for project_id in shown}
    rows = []
    for record in records:
        routing = routing_of(record, Wait.BRIEFLY)
        rows.append(QueueRow(
            id=record.id, reference=record.reference, status=record.status,
            project_name=names.get(record.project_id, record.project_id),
            description=record.description, directed_by=record.directed_by,
            texts=tuple(field.value(record) for field in ticket_fields(Shows.QUEUE)
                        if field.value(record)),
            age=age_text(record.captured_at, now),
            age_bucket=ticket_queries.age_bucket(record.captured_at, now), total=record.total,
            needs_review=routing.to_check,
            suggested=sum(1 for line in routing.lines if bulk_confirmable(line)),
            photo_count=record.photo_count, signed=bool(record.signature),
            signed_with=held_back(record.signature),
            change_events=change_events[record.project_id],
            nte=authorizations.status_of(company_id, record.authorization_id),
            awaiting_since=on_clock(awaiting[record.id], zones[record.project_id])
            if record.id in awaiting else None,
            written_age=age_text(record.approved_at, now) if record.approved_at else None,
            in_procore=record_words(record) if record.status == "written" else None))
    return rows, zones


def ready_in_view(company_id: int, view: QueueView, now: dt.datetime | None = None
                  ) -> list[str]:
    """The tickets of a queue view, on every page, that bulk approval can write (clean, or
    clean but for suggestions the PM confirms): at most MAX_BULK, in the view's order."""
    now = now or utcnow()
    names = projects.project_names(company_id)
    records, _total = ticket_queries.list_ticket_records(
        company_id, where=view.list_filter(now), sort=view.sort, project_names=names,
        limit=ticket_queries.MAX_CHECKED, wait=Wait.BRIEFLY,
        load=(undefer(TicketRecord.written_routing),))
    ready = []
    for chunk in range(0, len(records), PAGE_SIZE):
        rows, _zones = _rows(company_id, records[chunk:chunk + PAGE_SIZE], names, now)
        ready += [row.id for row in rows if row.clean or row.ready]
        if len(ready) >= MAX_BULK:
            break
    return ready[:MAX_BULK]


def next_ticket(company_id: int, view: QueueView, current_id: str) -> str | None:
    """The ticket after `current_id` in a queue view (its filters and sort), for 'Approve and next'.

    Read before the approval, while the current ticket is still in a 'Needs review' view;
    when it is not in the view at all, the view's first other ticket.
    """
    records, _total = ticket_queries.list_ticket_records(
        company_id, where=view.list_filter(), sort=view.sort,
        project_names=projects.project_names(company_id), limit=ticket_queries.MAX_CHECKED,
        wait=Wait.BRIEFLY)
    ids = [record.id for record in records]
    if current_id in ids:
        later = ids[ids.index(current_id) + 1:]
        return later[0] if later else None
    return next((i for i in ids if i != current_id), None)
