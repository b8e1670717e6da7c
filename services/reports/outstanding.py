"""Outstanding dollars: tickets not yet paid, counted and summed by stage, sub or project, each
row split by age."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import func, select

from models import Ticket as TicketRecord
from models import db, utcnow
from services.tickets import stages
from services.tickets.ticket_queries import ListFilter, cents_column, list_conditions

GROUPS = ("stage", "sub", "project")


@dataclass(frozen=True)
class AgeFigure:
    """How many outstanding tickets of a row are of one age, and their dollars."""

    key: str
    count: int
    total: Decimal


@dataclass(frozen=True)
class OutstandingRow:
    """One stage, sub or project: its outstanding tickets, dollars, oldest capture and ages.

    `key` is the stage key, the sub as first written (None for tickets naming none) or the
    project id.
    """

    key: str | None
    count: int
    total: Decimal
    oldest_at: dt.datetime | None
    buckets: tuple[AgeFigure, ...]


def outstanding(company_id: int, where: ListFilter, group_by: str = "stage",
                now: dt.datetime | None = None) -> list[OutstandingRow]:
    """A company's outstanding tickets matching a list's filters, grouped by stage, sub or
    project: every stage in order (empty ones too), else the largest total first."""
    if group_by not in GROUPS:
        raise ValueError(f"no grouping {group_by!r}")
    now = now or utcnow()
    rows = select(stages.stage_column().label("stage"), stages.age_column(now).label("age"),
                  func.lower(TicketRecord.sub).label("sub_key"), TicketRecord.sub,
                  TicketRecord.project_id, TicketRecord.captured_at,
                  cents_column().label("cents")) \
        .where(*list_conditions(company_id, where), stages.outstanding()).subquery()
    group = {"stage": rows.c.stage, "sub": rows.c.sub_key, "project": rows.c.project_id}[group_by]
    found: dict[str | None, dict] = {}
    for key, age, count, cents, oldest, name in db.session.execute(
            select(group, rows.c.age, func.count(), func.coalesce(func.sum(rows.c.cents), 0),
                   func.min(rows.c.captured_at), func.min(rows.c.sub))
            .group_by(group, rows.c.age)):
        shown = name if group_by == "sub" else key
        row = found.setdefault(key, {"key": shown, "ages": {}, "oldest": oldest})
        row["ages"][age] = (int(count), Decimal(int(cents)) / 100)
        row["oldest"] = min(row["oldest"], oldest) if row["oldest"] and oldest else oldest
    if group_by == "stage":
        for stage in stages.OUTSTANDING:
            found.setdefault(stage, {"key": stage, "ages": {}, "oldest": None})
    result = [_row(row) for row in found.values()]
    if group_by == "stage":
        return sorted(result, key=lambda row: stages.OUTSTANDING.index(row.key))
    return sorted(result, key=lambda row: (-row.total, (row.key or "").casefold()))


def _row(found: dict) -> OutstandingRow:
    """An OutstandingRow from a group's counts and cents per age."""
    buckets = tuple(AgeFigure(key, *found["ages"].get(key, (0, Decimal("0.00"))))
                    for key, *_rest in stages.AGES)
    return OutstandingRow(key=found["key"], count=sum(bucket.count for bucket in buckets),
                          total=sum((bucket.total for bucket in buckets), Decimal("0.00")),
                          oldest_at=found["oldest"], buckets=buckets)


@dataclass(frozen=True)
class WrittenRecord:
    """A change event in the project system with outstanding tickets on it."""

    project_id: str
    change_event_id: int
    number: str | None
    count: int
    total: Decimal


def written_records(company_id: int, where: ListFilter, limit: int = 20) -> list[WrittenRecord]:
    """The change events that outstanding written tickets matching `where` are on, most
    recently written first (at most `limit`)."""
    rows = db.session.execute(
        select(TicketRecord.project_id, TicketRecord.external, TicketRecord.total)
        .where(*list_conditions(company_id, where),
               stages.condition("written") | stages.condition("change_order"))
        .order_by(TicketRecord.approved_at.desc()))
    found: dict[tuple[str, int], dict] = {}
    for project_id, external, total in rows:
        event_id = (external or {}).get("change_event_id")
        if event_id is None:
            continue
        record = found.setdefault((project_id, int(event_id)), {
            "number": (external or {}).get("number"), "count": 0, "total": Decimal("0.00")})
        record["count"] += 1
        record["total"] += total
    return [WrittenRecord(project_id, event_id, record["number"], record["count"],
                          record["total"])
            for (project_id, event_id), record in list(found.items())[:limit]]
