"""Ticket lists: one query builder for /v1/tickets, the review queue and the CSV, with its
filters, sorts, counts per status and age buckets."""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, replace
from decimal import Decimal

from sqlalchemy import (
    BigInteger,
    Float,
    Numeric,
    String,
    case,
    cast,
    event,
    func,
    inspect,
    literal,
    or_,
    select,
    union_all,
)
from sqlalchemy.orm import defer

from models import Ticket as TicketRecord
from models import db, utcnow
from models.schemas import Shows, TicketList, ticket_fields
from models.ticket import STATUSES
from services.routing.learned_words import fold, ticket_words
from services.tickets import signatures, stages
from services.tickets.ticket_records import NEWEST_FIRST, OLDEST_FIRST
from services.tickets.ticket_shapes import Wait, routing_of, shape


@dataclass(frozen=True)
class ListFilter:
    """Which of a company's tickets a list shows; every field narrows it.

    `sub` is the sub or crew a ticket names (a capture link's label for its tickets); `to_check`
    keeps tickets with a line whose budget code needs a check, which only the project's
    codes can tell, so it is applied after the database's own conditions.
    """

    status: str | None = None
    project_id: str | None = None
    q: str | None = None
    sub: str | None = None
    unsigned: bool = False
    awaiting_signature: bool = False
    to_check: bool = False
    captured_from: dt.datetime | None = None
    captured_before: dt.datetime | None = None
    # Written as a change event whose lines are on no change order yet (as last read), and
    # neither deleted nor voided there.
    not_on_change_order: bool = False
    # Written (approved) before this moment.
    written_before: dt.datetime | None = None
    # One of stages.STAGES: where the ticket stands on its way to being paid.
    stage: str | None = None
    # In any of stages.OUTSTANDING: not yet paid (the board's figures).
    outstanding: bool = False


def _like(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, its wildcards escaped with a backslash."""
    needle = text.strip().lower()
    for special in ("\\", "%", "_"):
        needle = needle.replace(special, "\\" + special)
    return f"%{needle}%"


# A ticket's reference as crews read it out: T- and the first 8 hex digits of its id.
# The "T-" may be left out when at least 4 digits are given.
T_REFERENCE = re.compile(r"^(?:t-?([0-9a-f]{1,8})|([0-9a-f]{4,8}))$", re.IGNORECASE)


# The ticket's own columns the search reads; the optional text fields declared to show in
# search (TicketText) are read beside them.
SEARCHED = (TicketRecord.description, TicketRecord.reason, TicketRecord.directed_by)


def searched() -> list:
    """The columns a search reads: SEARCHED and each optional text field declared for search."""
    return [*SEARCHED, *(getattr(TicketRecord, field.name)
                         for field in ticket_fields(Shows.SEARCH))]


@event.listens_for(TicketRecord, "before_insert")
@event.listens_for(TicketRecord, "before_update")
def _keep_search_words(_mapper, _connection, ticket: TicketRecord) -> None:
    """Keep a ticket's search words with its lines and declared search fields whenever one of
    them is written."""
    state = inspect(ticket)
    fields = ticket_fields(Shows.SEARCH)
    if state.pending or any(state.attrs[name].history.has_changes()
                            for name in ("lines", *(field.name for field in fields))):
        ticket.search_words = ticket_words(ticket.lines, " ".join(
            text for text in (field.value(ticket) for field in fields) if text))


def _search(q: str):
    """Text found in the description, reason, directed-by or a declared search field, in what a
    line said or a declared search field says (Spanish or English words for it), or a
    T-reference."""
    pattern = _like(q)
    matches = [func.lower(column).like(pattern, escape="\\") for column in searched()]
    matches.append(TicketRecord.search_words.like(_like(fold(q)), escape="\\"))
    reference = T_REFERENCE.match(q.strip())
    if reference:
        digits = (reference.group(1) or reference.group(2)).lower()
        matches.append(TicketRecord.id.like(digits + "%"))
    return or_(*matches)


def _time_conditions(where: ListFilter) -> list:
    """WHERE conditions of a list's capture and writing times."""
    bounds = ((where.captured_from, TicketRecord.captured_at.__ge__),
              (where.captured_before, TicketRecord.captured_at.__lt__),
              (where.written_before, TicketRecord.approved_at.__lt__))
    return [compare(moment) for moment, compare in bounds if moment]


def list_conditions(company_id: int, where: ListFilter) -> list:
    """WHERE conditions for a filtered ticket list, always scoped to the company."""
    conditions = [TicketRecord.company_id == company_id]
    if where.status:
        conditions.append(TicketRecord.status == where.status)
    if where.project_id:
        conditions.append(TicketRecord.project_id == where.project_id)
    if where.q and where.q.strip():
        conditions.append(_search(where.q))
    if where.sub:
        conditions.append(func.lower(TicketRecord.sub) == where.sub.strip().lower())
    if where.unsigned:
        conditions.append(stages.unsigned())
    if where.awaiting_signature:
        conditions.append(TicketRecord.id.in_(signatures.open_request_tickets(company_id)))
    conditions += _time_conditions(where)
    if where.not_on_change_order:
        conditions.append(stages.condition("written"))
    if where.stage:
        conditions.append(stages.condition(where.stage))
    if where.outstanding:
        conditions.append(stages.outstanding())
    return conditions


SORTS = ("newest", "oldest", "amount", "project", "sub")


# The most tickets a filter the database cannot answer (lines to check) looks through.
MAX_CHECKED = 5000


def _order(company_id: int, sort: str, project_names: dict[str, str] | None) -> tuple:
    """ORDER BY for a sort: newest or oldest first, largest amount, project name, sub's label."""
    if sort == "oldest":
        return OLDEST_FIRST
    if sort == "amount":
        return (cast(TicketRecord.total, Numeric(14, 2)).desc(), *OLDEST_FIRST)
    if sort == "project":
        names = {key: name.lower() for key, name in (project_names or {}).items()}
        by_name = case(names, value=TicketRecord.project_id, else_=TicketRecord.project_id) \
            if names else TicketRecord.project_id
        return (by_name, *OLDEST_FIRST)
    if sort == "sub":
        sub = func.lower(TicketRecord.sub)
        return (sub.is_(None), sub, func.lower(func.coalesce(TicketRecord.captured_by, "")),
                *OLDEST_FIRST)
    return NEWEST_FIRST


def _ids_to_check(conditions: list, order: tuple, wait: Wait) -> list[str]:
    """The ids, in list order, of matching tickets with a line whose routing needs a check
    (routed as `routing_of` routes them, waiting on the project system as `wait` allows)."""
    columns = ("id", "company_id", "project_id", "status", "lines", "written_routing")
    rows = db.session.execute(select(*(getattr(TicketRecord, name) for name in columns))
                              .where(*conditions).order_by(*order).limit(MAX_CHECKED))
    # Each row as a ticket of its own (never added to the session) for routing_of to read.
    tickets = (TicketRecord(**dict(zip(columns, row, strict=True))) for row in rows)
    return [ticket.id for ticket in tickets
            if any(line.needs_review for line in routing_of(ticket, wait).lines)]


def list_ticket_records(company_id: int, *, where: ListFilter | None = None,
                        sort: str = "newest", limit: int = 50, offset: int = 0,
                        project_names: dict[str, str] | None = None, wait: Wait = Wait.YES,
                        load: tuple = ()) -> tuple[list[TicketRecord], int]:
    """A page of ticket records, and the match count.

    The one query builder behind /v1/tickets, the review queue and the CSV. `where` carries
    every filter; `sort` is one of SORTS, newest first by default; sorting by project orders
    by the names in `project_names`; `wait` is how long the lines-to-check filter may wait on
    the project system for the codes; `load` holds loader options for what the caller reads
    of each record (such as columns it leaves out).
    """
    where = where or ListFilter()
    conditions = list_conditions(company_id, where)
    order = _order(company_id, sort, project_names)
    if where.to_check:
        ids = _ids_to_check(conditions, order, wait)
        page = ids[offset:offset + limit]
        found = {record.id: record for record in db.session.scalars(
            select(TicketRecord).where(TicketRecord.id.in_(page)).options(*load))} if page else {}
        return [found[ticket_id] for ticket_id in page if ticket_id in found], len(ids)
    total = db.session.scalar(select(func.count()).select_from(TicketRecord).where(*conditions))
    rows = db.session.scalars(
        select(TicketRecord).where(*conditions).order_by(*order).limit(limit).offset(offset)
        .options(*load))
    return list(rows), int(total)


# Age buckets of the queue: (key, label, upper bound of the age in days; None for no bound).
AGE_BUCKETS = (("today", "Under a day", 1), ("days", "1-3 days", 3), ("week", "3-7 days", 7),
               ("old", "Over a week", None))


def age_range(key: str, now: dt.datetime) -> tuple[dt.datetime | None, dt.datetime | None]:
    """An age bucket as capture times: (captured before, captured from), None where open."""
    younger = None
    for bucket, _label, days in AGE_BUCKETS:
        older = now - dt.timedelta(days=days) if days is not None else None
        if bucket == key:
            return younger, older
        younger = older
    raise ValueError(f"no age bucket {key!r}")


def age_bucket(captured_at: dt.datetime, now: dt.datetime) -> str:
    """The key of the age bucket a ticket captured at `captured_at` falls in."""
    age = now - captured_at
    for key, _label, days in AGE_BUCKETS:
        if days is None or age < dt.timedelta(days=days):
            return key
    return AGE_BUCKETS[-1][0]


def cents_column():
    """A ticket's total in whole cents, as an SQL expression sums keep every cent of."""
    return cast(func.round(cast(TicketRecord.total, Float) * 100), BigInteger)


def _bucket_spans(now: dt.datetime) -> list[tuple[str, list]]:
    """Each queue age bucket's key and its capture-time conditions at `now`."""
    spans, newer_than = [], None
    for key, _label, days in AGE_BUCKETS:
        older_than = now - dt.timedelta(days=days) if days is not None else None
        spans.append((key, [condition for condition in (
            TicketRecord.captured_at > older_than if older_than else None,
            TicketRecord.captured_at <= newer_than if newer_than else None)
            if condition is not None]))
        newer_than = older_than
    return spans


def _board_spans(now: dt.datetime) -> list[tuple[str, list]]:
    """Each of the board's ages (stages.AGES) and its capture-time conditions at `now`, as the
    queue's list filter reads them."""
    spans = []
    for key, *_rest in stages.AGES:
        start, before = stages.age_range(key, now)
        spans.append((key, [condition for condition in (
            TicketRecord.captured_at >= start if start else None,
            TicketRecord.captured_at < before if before else None) if condition is not None]))
    return spans


def age_totals(company_id: int, where: ListFilter, now: dt.datetime | None = None,
               wait: Wait = Wait.YES, board: bool = False) -> dict[str, tuple[int, Decimal]]:
    """How many tickets of a filtered list fall in each age bucket (each of the board's ages
    when `board`), and their dollar total.

    The database counts and sums each bucket's range of capture times from the list's index
    alone (the index carries the total), in whole cents so every cent is kept.
    """
    now = now or utcnow()
    conditions = list_conditions(company_id, where)
    if where.to_check:
        conditions.append(TicketRecord.id.in_(_ids_to_check(conditions, NEWEST_FIRST, wait)))
    cents = cents_column()
    buckets = [select(cast(literal(key), String), func.count(), func.coalesce(func.sum(cents), 0))
               .where(*conditions, *within)
               for key, within in (_board_spans(now) if board else _bucket_spans(now))]
    return {key: (int(count), Decimal(int(summed)) / 100)
            for key, count, summed in db.session.execute(union_all(*buckets))}


def count_and_total(company_id: int, where: ListFilter) -> tuple[int, Decimal]:
    """How many tickets a filtered list holds and their dollar total, in whole cents."""
    cents = cents_column()
    count, summed = db.session.execute(
        select(func.count(), func.coalesce(func.sum(cents), 0))
        .where(*list_conditions(company_id, where))).one()
    return int(count), Decimal(int(summed)) / 100


def list_status_counts(company_id: int, where: ListFilter, wait: Wait = Wait.YES
                       ) -> dict[str, int]:
    """How many tickets of a filtered list are in each status, whatever status it shows."""
    where = replace(where, status=None)
    conditions = list_conditions(company_id, where)
    if where.to_check:
        conditions.append(TicketRecord.id.in_(_ids_to_check(conditions, NEWEST_FIRST, wait)))
    counts = dict.fromkeys(STATUSES, 0)
    counts.update({status: int(count) for status, count in db.session.execute(
        select(TicketRecord.status, func.count()).where(*conditions)
        .group_by(TicketRecord.status))})
    return counts


# A list shows no lines or warnings: their JSON is left in the database.
SUMMARY_LOAD = (defer(TicketRecord.lines), defer(TicketRecord.warnings))


def list_tickets(company_id: int, where: ListFilter, *, limit: int, offset: int) -> TicketList:
    """A page of the company's tickets as summaries, newest first, id breaking ties."""
    records, total = list_ticket_records(company_id, where=where, limit=limit, offset=offset,
                                         load=SUMMARY_LOAD)
    awaiting = signatures.awaiting_since(company_id, [r.id for r in records if not r.signature])
    return TicketList(data=[shape(record, awaiting_signature_since=awaiting.get(record.id))
                            for record in records], total=total, limit=limit, offset=offset)


def subs(company_id: int, also: list[str] = ()) -> list[str]:
    """Every sub or crew the company's tickets name, with `also` (capture links' labels), once
    each whatever the case, in alphabetical order."""
    named = db.session.scalars(select(TicketRecord.sub).where(
        TicketRecord.company_id == company_id, TicketRecord.sub.is_not(None)).distinct())
    found: dict[str, str] = {}
    for name in [*also, *named]:
        found.setdefault(name.casefold(), name)
    return sorted(found.values(), key=str.casefold)
