"""The ticket log as CSV: one row per cost line, for a spreadsheet or an accounting import.

Every column names where its value comes from in the ticket's shapes, so adding a field to the
export is adding one entry to COLUMNS_FROM. The same filters and the same list query as the
ticket list, every matching ticket newest first. Lines not yet written are routed as the
review pages route them: on the project's codes, or the last ones read while the project
system is slow or away. Cells a spreadsheet would take for a formula are neutralised.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterator
from decimal import Decimal
from enum import Enum
from typing import Any

from models import Ticket as TicketRecord
from services.ticket_queries import ListFilter, list_ticket_records
from services.ticket_shapes import Wait, routing_of, shape

PAGE = 200
# (column, source): `ticket.<field>` is a field of the ticket's summary shape (TicketSummary,
# dotted into a nested one), `route.<field>` one of the line's routing (RoutingLine) and
# `line.<field>` one of the line as it was sent.
COLUMNS_FROM = (
    ("ticket_id", "ticket.id"), ("status", "ticket.status"), ("project_id", "ticket.project_id"),
    ("captured_at", "ticket.captured_at"), ("captured_via", "ticket.captured_via"),
    ("captured_by", "ticket.captured_by"), ("directed_by", "ticket.directed_by"),
    ("description", "ticket.description"), ("reason", "ticket.reason"),
    ("ticket_total", "ticket.total"), ("approved_by", "ticket.approved_by"),
    ("approved_at", "ticket.approved_at"), ("record_number", "ticket.external.number"),
    ("record_url", "ticket.external.url"), ("line", "route.line"), ("kind", "route.kind"),
    ("line_description", "route.description"), ("cost_code", "line.costCode"),
    ("quantity", "route.quantity"), ("unit_cost", "route.unit_cost"), ("amount", "route.amount"),
    ("cost_type", "route.cost_type"), ("budget_code", "route.budget_code"),
    ("budget_code_id", "route.budget_code_id"), ("exact", "route.exact"),
    ("needs_review", "route.needs_review"), ("routing_reason", "route.reason"),
    ("worked_on", "ticket.worked_on"), ("authorization_ref", "ticket.authorization_ref"),
    ("sub", "ticket.sub"),
)
COLUMNS = tuple(column for column, _source in COLUMNS_FROM)
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


def export_csv(company_id: int, where: ListFilter) -> str:
    """Every matching ticket of the company as CSV text, one row per line."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for row in _rows(company_id, where):
        writer.writerow([safe_cell(value) for value in row])
    return buffer.getvalue()


def _rows(company_id: int, where: ListFilter) -> Iterator[list[Any]]:
    """Rows of the matching tickets, read a page at a time through the one list query."""
    offset = 0
    while True:
        records, _ = list_ticket_records(company_id, where=where, limit=PAGE, offset=offset)
        for record in records:
            yield from _ticket_rows(record)
        if len(records) < PAGE:
            return
        offset += PAGE


def _value(sources: dict[str, Any], path: str) -> Any:
    """The value a column's source names, or None where a part of it is missing."""
    value: Any = sources
    for part in path.split("."):
        if value is None:
            return None
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return value


def _ticket_rows(record: TicketRecord) -> Iterator[list[Any]]:
    """One row per line of a ticket (one row with empty line cells for a ticket without lines)."""
    ticket = shape(record)
    routing = routing_of(record, Wait.BRIEFLY).lines
    pairs = list(zip(record.lines, routing)) or [(None, None)]
    for line, route in pairs:
        sources = {"ticket": ticket, "line": line, "route": route}
        yield [_value(sources, source) for _column, source in COLUMNS_FROM]
