"""The ticket log as CSV: one row per cost line, for a spreadsheet or an accounting import.

The same filters as the ticket list (status, project, text), the same list query, every
matching ticket newest first. Cells a spreadsheet would take for a formula are neutralised.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from models import Ticket as TicketRecord
from models.schemas import RoutingLine
from services import projects, tickets
from services.errors import ServiceError
from services.projects import Catalog
from services.routing import unrouted

PAGE = 200
COLUMNS = (
    "ticket_id", "status", "project_id", "captured_at", "captured_via", "captured_by",
    "directed_by", "description", "reason", "ticket_total", "approved_by", "approved_at",
    "record_number", "record_url", "line", "kind", "line_description", "cost_code", "quantity",
    "unit_cost", "amount", "cost_type", "budget_code", "budget_code_id", "exact",
    "needs_review", "routing_reason",
)
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
    if isinstance(value, dt.datetime):
        return value.isoformat()
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def export_csv(company_id: int, *, status: str | None = None, project_id: str | None = None,
               q: str | None = None, where: tickets.ListFilter | None = None) -> str:
    """Every matching ticket of the company as CSV text, one row per line (the list's filters,
    or a queue's whole filter as `where`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    where = where or tickets.ListFilter(status=status, project_id=project_id, q=q)
    for row in _rows(company_id, where):
        writer.writerow([safe_cell(value) for value in row])
    return buffer.getvalue()


def _rows(company_id: int, where: tickets.ListFilter) -> Iterator[list[Any]]:
    """Rows of the matching tickets, read a page at a time through the one list query."""
    codes: dict[str, Catalog | None] = {}
    offset = 0
    while True:
        records, _ = tickets.list_ticket_records(company_id, where=where, limit=PAGE,
                                                 offset=offset)
        for record in records:
            yield from _ticket_rows(record, _routing(company_id, record, codes))
        if len(records) < PAGE:
            return
        offset += PAGE


def _routing(company_id: int, record: TicketRecord,
             codes: dict[str, Catalog | None]) -> list[RoutingLine]:
    """Where each line lands: as written, or on the project's codes (read once per export)."""
    if record.status == "written" and record.written_routing:
        return [RoutingLine.model_validate(line) for line in record.written_routing]
    if record.project_id not in codes:
        try:
            codes[record.project_id] = projects.catalog(company_id, record.project_id)
        except ServiceError:  # unreachable or gone: the lines say so, the export goes on
            codes[record.project_id] = None
    catalog = codes[record.project_id]
    routes = (catalog.router.route_all(record.lines) if catalog is not None
              else unrouted(record.lines, "the project's budget codes could not be read"))
    return tickets.routing_lines(routes)


def _ticket_rows(record: TicketRecord, routing: list[RoutingLine]) -> Iterator[list[Any]]:
    """One row per line of a ticket (one row with empty line cells for a ticket without lines)."""
    external = record.external or {}
    ticket = [record.id, record.status, record.project_id, record.captured_at,
              record.captured_via, record.captured_by, record.directed_by, record.description,
              record.reason, record.total, record.approved_by, record.approved_at,
              external.get("number"), external.get("url")]
    if not routing:
        yield ticket + [None] * (len(COLUMNS) - len(ticket))
        return
    for line, route in zip(record.lines, routing):
        yield ticket + [route.line, route.kind.value, route.description, line.get("costCode"),
                        route.quantity, route.unit_cost, route.amount,
                        route.cost_type.value if route.cost_type else None, route.budget_code,
                        route.budget_code_id, route.exact, route.needs_review, route.reason]
