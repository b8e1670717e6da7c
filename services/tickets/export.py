"""The ticket log as CSV: one row per cost line, for a spreadsheet or an accounting import.

It is made for a spreadsheet (programs read the JSON list): UTF-8 with a byte-order mark,
the ticket's reference, project name and sub, times on the jobsite's clock, and no bare long
ids a spreadsheet would turn into 5.6E+14. Every column names where its value comes from, so
adding a column is adding one entry to COLUMNS_FROM (an optional text field of the
ticket gets its column by declaring it, on TicketText). The same filters and the
same list query as the ticket list; the queue's export keeps the queue's sort. Lines not yet
written are routed as the review pages route them: on the project's codes, or the last ones
read while the project system is slow or away. Cells a spreadsheet would take for a formula
are neutralised.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Any
from zoneinfo import ZoneInfo

from models import Ticket as TicketRecord
from models.schemas import Shows, ticket_fields
from services.project_system import projects
from services.tickets.ticket_queries import ListFilter, list_ticket_records
from services.tickets.ticket_shapes import Wait, routing_of, shape

PAGE = 200
# (column, source): `ticket.<field>` is a field of the ticket's summary shape (TicketSummary,
# dotted into a nested one), `about.<name>` what a spreadsheet reader needs beside it (its
# reference, project name and times on the jobsite's clock), `route.<field>` one of the
# line's routing (RoutingLine), `line.<field>` one of the line as it was sent, and `number`
# the line's number as the page shows it (from 1). The optional text fields declared to show
# in the CSV (TicketText) follow the project, each in a column named as the field.
COLUMNS_FROM = (
    ("reference", "about.reference"), ("status", "ticket.status"),
    ("project", "about.project"), ("captured", "about.captured"),
    ("worked_on", "ticket.worked_on"), ("time_zone", "about.time_zone"),
    ("captured_via", "ticket.captured_via"),
    ("directed_by", "ticket.directed_by"), ("description", "ticket.description"),
    ("reason", "ticket.reason"), ("ticket_total", "ticket.total"),
    ("approved_by", "ticket.approved_by"), ("approved", "about.approved"),
    ("record_number", "ticket.external.number"), ("record_url", "ticket.external.url"),
    ("line", "number"), ("kind", "route.kind"), ("line_description", "route.description"),
    ("cost_code", "line.costCode"), ("quantity", "route.quantity"), ("unit_cost", "route.unit_cost"),
    ("amount", "route.amount"), ("cost_type", "route.cost_type"), ("budget_code", "route.budget_code"),
    ("exact", "route.exact"), ("needs_review", "route.needs_review"),
    ("routing_reason", "route.reason"), ("ticket_id", "ticket.id"),
)
AFTER = "project"  # the column the declared fields follow


def columns_from() -> list[tuple[str, str]]:
    """Every column with its source: COLUMNS_FROM with the declared fields after the project."""
    declared = [(field.name, f"ticket.{field.name}") for field in ticket_fields(Shows.CSV)]
    at = next(index for index, (column, _) in enumerate(COLUMNS_FROM) if column == AFTER) + 1
    return [*COLUMNS_FROM[:at], *declared, *COLUMNS_FROM[at:]]


def columns() -> tuple[str, ...]:
    """The CSV's header: its column names in order."""
    return tuple(column for column, _source in columns_from())


BOM = "\ufeff"
# A cell starting with one of these is a formula to Excel, LibreOffice or Google Sheets.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> str:
    """One CSV cell: text a spreadsheet would run as a formula gets a leading apostrophe."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, dt.date):
        return value.isoformat()
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def export_csv(company_id: int, where: ListFilter, sort: str = "newest") -> str:
    """Every matching ticket of the company as CSV text for a spreadsheet, one row per line, in
    the list's `sort`: UTF-8 with a byte-order mark, so Excel reads it as UTF-8 too."""
    buffer = io.StringIO()
    buffer.write(BOM)
    writer = csv.writer(buffer, lineterminator="\r\n")
    sources = columns_from()
    writer.writerow(column for column, _source in sources)
    names = projects.project_names(company_id)
    for row in _rows(company_id, where, sort, names, sources):
        writer.writerow([safe_cell(value) for value in row])
    return buffer.getvalue()


def _rows(company_id: int, where: ListFilter, sort: str, names: dict[str, str],
          sources: list[tuple[str, str]]) -> Iterator[list[Any]]:
    """Rows of the matching tickets, read a page at a time through the one list query."""
    zones: dict[str, ZoneInfo] = {}
    offset = 0
    while True:
        records, _ = list_ticket_records(company_id, where=where, sort=sort, limit=PAGE,
                                         offset=offset, project_names=names)
        for record in records:
            if record.project_id not in zones:
                zones[record.project_id] = projects.page_time_zone(company_id, record.project_id)
            yield from _ticket_rows(record, names, zones[record.project_id], sources)
        if len(records) < PAGE:
            return
        offset += PAGE


@dataclass(frozen=True)
class About:
    """What a spreadsheet reader needs beside a ticket's fields."""

    reference: str
    project: str
    captured: str
    approved: str | None
    time_zone: str


def _local(moment: dt.datetime | None, zone: ZoneInfo) -> str | None:
    """A time on the jobsite's clock as a spreadsheet reads it: '2026-06-03 20:30'."""
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M") if moment else None


def _value(sources: dict[str, Any], path: str) -> Any:
    """The value a column's source names, or None where a part of it is missing."""
    value: Any = sources
    for part in path.split("."):
        if value is None:
            return None
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return value


def _ticket_rows(record: TicketRecord, names: dict[str, str], zone: ZoneInfo,
                 sources: list[tuple[str, str]]) -> Iterator[list[Any]]:
    """One row per line of a ticket (one row with empty line cells for a ticket without lines)."""
    ticket = shape(record)
    about = About(reference=record.reference,
                  project=names.get(record.project_id, f"Project {record.project_id}"),
                  captured=_local(record.captured_at, zone), approved=_local(record.approved_at, zone),
                  time_zone=getattr(zone, "key", "UTC"))
    routing = routing_of(record, Wait.BRIEFLY).lines
    pairs = list(zip(record.lines, routing, strict=True)) or [(None, None)]
    for line, route in pairs:
        found = {"ticket": ticket, "about": about, "line": line, "route": route,
                 "number": route.line + 1 if route is not None else None}
        yield [_value(found, source) for _column, source in sources]
