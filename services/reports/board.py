"""The board: outstanding dollars by stage, sub and project split by age, in people's words,
each figure with the queue view that lists its tickets; the same figures for /v1 and as CSV."""
from __future__ import annotations

import csv
import datetime as dt
import io
from dataclasses import dataclass
from decimal import Decimal

from flask_babel import force_locale

from models import utcnow
from models.schemas import OutstandingAge, OutstandingQuery, OutstandingReport
from models.schemas import OutstandingRow as OutstandingRowOut
from services.capture import links
from services.project_system import projects
from services.reports.outstanding import (
    GROUPS,
    OutstandingRow,
    WrittenRecord,
    outstanding,
    written_records,
)
from services.review.review_queue import QueueView
from services.tickets import stages, ticket_queries
from services.tickets.export import BOM, safe_cell
from services.tickets.plain_words import age_text
from services.tickets.ticket_queries import ListFilter

AGE_LABELS = {key: label for key, label, *_days in stages.AGES}
TITLES = {"stage": "By stage", "sub": "By sub", "project": "By project"}
NO_SUB = "No sub named"


@dataclass(frozen=True)
class Figure:
    """One age of a row, or a whole row: how many tickets, their dollars, and the queue view
    that lists exactly them (None when the queue cannot: tickets naming no sub)."""

    key: str | None
    label: str
    count: int
    total: Decimal
    queue: dict[str, str] | None


@dataclass(frozen=True)
class Line:
    """One stage, sub or project of a chart: the row itself and each of its ages."""

    whole: Figure
    oldest_at: dt.datetime | None
    ages: tuple[Figure, ...]


@dataclass(frozen=True)
class Chart:
    """The rows of one grouping, and the largest row's dollars the bars are drawn against."""

    group_by: str
    title: str
    lines: tuple[Line, ...]

    @property
    def scale(self) -> Decimal:
        """The largest row's dollars (1 when every row is empty, so no bar divides by zero)."""
        return max((line.whole.total for line in self.lines), default=Decimal(0)) or Decimal(1)


@dataclass(frozen=True)
class Board:
    """The board page: a chart per grouping, the filters it was drawn with and their choices."""

    charts: tuple[Chart, ...]
    where: ListFilter
    as_of: dt.datetime
    projects: list[tuple[str, str]]
    subs: list[str]
    ages: tuple[tuple[str, str], ...]  # each age's key and words, youngest first
    # Change events with outstanding tickets on them, each with its project's name: their
    # backup packages (signed tickets and photos as one document).
    records: tuple[tuple[WrittenRecord, str], ...] = ()

    @property
    def filters(self) -> dict[str, str]:
        """The board's filters as a query string's arguments, leaving out those not set."""
        chosen = {"project_id": self.where.project_id, "sub": self.where.sub, "q": self.where.q}
        return {name: value for name, value in chosen.items() if value}

    @property
    def filter_words(self) -> str:
        """The board's filters as a PM reads them (for the page and its print); empty when none."""
        project = dict(self.projects).get(self.where.project_id, self.where.project_id)
        words = [f"Project: {project}." if self.where.project_id else "",
                 f"Sub or crew: {self.where.sub}." if self.where.sub else "",
                 f"Search: “{self.where.q}”." if self.where.q else ""]
        return " ".join(word for word in words if word)

    def oldest(self, line: Line) -> str:
        """How long ago a line's oldest ticket was captured ('12 d'); empty when it has none."""
        return age_text(line.oldest_at, self.as_of) if line.oldest_at else ""

    @property
    def count(self) -> int:
        """Every outstanding ticket the board counts."""
        return sum(line.whole.count for line in self.charts[0].lines)

    @property
    def total(self) -> Decimal:
        """Every outstanding dollar the board counts."""
        return sum((line.whole.total for line in self.charts[0].lines), Decimal("0.00"))


def where_of(project_id: str | None, sub: str | None, q: str | None) -> ListFilter:
    """The list filter of the board's (and the report's) filters, outstanding tickets only."""
    return ListFilter(project_id=project_id or None, sub=sub or None, q=q or None,
                      outstanding=True)


def _label(company_id: int, group_by: str, key: str | None, names: dict[str, str]) -> str:
    """A row's key in words: the stage, the sub (or that none is named), the project's name
    (as the project system last gave it, else as the company's links and tickets knew it)."""
    if group_by == "stage":
        return str(stages.LABELS[key])
    if group_by == "sub":
        return key or NO_SUB
    return names.get(key) or projects.known_project_name(company_id, key) or f"Project {key}"


def _queue(where: ListFilter, group_by: str, key: str | None, age: str | None
           ) -> dict[str, str] | None:
    """The queue view's query that lists exactly a figure's tickets; None for tickets naming
    no sub, which the queue cannot pick out."""
    if group_by == "sub" and key is None:
        return None
    # A stage's tickets are all of one status: the queue then offers what it offers for that
    # status (approving submitted ones, a backup package of written ones).
    status = stages.STATUS_OF.get(key) if group_by == "stage" else None
    view = QueueView(status=status, project_id=key if group_by == "project" else where.project_id,
                     sub=key if group_by == "sub" else where.sub, q=where.q,
                     stage=key if group_by == "stage" else "outstanding", age=age)
    return view.params()


def _line(company_id: int, row: OutstandingRow, where: ListFilter, group_by: str,
          names: dict[str, str]) -> Line:
    """A report row as a chart's line, with its words and queue views."""
    whole = Figure(row.key, _label(company_id, group_by, row.key, names), row.count, row.total,
                   _queue(where, group_by, row.key, None))
    ages = tuple(Figure(age.key, str(AGE_LABELS[age.key]), age.count, age.total,
                        _queue(where, group_by, row.key, age.key)) for age in row.buckets)
    return Line(whole=whole, oldest_at=row.oldest_at, ages=ages)


def chart(company_id: int, where: ListFilter, group_by: str, now: dt.datetime,
          names: dict[str, str]) -> Chart:
    """One grouping of the outstanding tickets matching `where`, as a chart's lines."""
    rows = outstanding(company_id, where, group_by, now=now)
    return Chart(group_by=group_by, title=TITLES[group_by],
                 lines=tuple(_line(company_id, row, where, group_by, names) for row in rows))


def board(company_id: int, project_id: str | None = None, sub: str | None = None,
          q: str | None = None, now: dt.datetime | None = None) -> Board:
    """The board for a company's outstanding tickets matching the queue's filters: by stage,
    by sub and by project, each split by age. Project names wait on the project system only
    briefly (the last known while it is away)."""
    now = now or utcnow()
    where = where_of(project_id, sub, q)
    names = projects.project_names(company_id)
    with force_locale("en"):  # the review pages are in English, whatever the browser asks
        return Board(charts=tuple(chart(company_id, where, group_by, now, names)
                                  for group_by in GROUPS),
                     where=where, as_of=now,
                     projects=sorted(names.items(), key=lambda item: item[1].casefold()),
                     subs=ticket_queries.subs(company_id, links.labels(company_id)),
                     ages=tuple((key, str(label)) for key, label in AGE_LABELS.items()),
                     records=tuple((record, _label(company_id, "project", record.project_id,
                                                   names))
                                   for record in written_records(company_id, where)))


def _money(amount: Decimal) -> str:
    """Dollars as a decimal string with cents, as the API gives money."""
    return format(amount.quantize(Decimal("0.01")), "f")


def report(company_id: int, query: OutstandingQuery, now: dt.datetime | None = None
           ) -> OutstandingReport:
    """The outstanding report (GET /v1/reports/outstanding): the board's figures of one
    grouping."""
    now = now or utcnow()
    group_by = query.group_by.value
    names = projects.project_names(company_id) if group_by == "project" else {}
    with force_locale("en"):  # a program reads the same words whatever language it asks for
        lines = chart(company_id, where_of(query.project_id, query.sub, query.q), group_by,
                      now, names).lines
    return OutstandingReport(as_of=now, group_by=query.group_by, rows=[OutstandingRowOut(
        key=line.whole.key, label=line.whole.label, count=line.whole.count,
        total=_money(line.whole.total), oldest_at=line.oldest_at,
        buckets=[OutstandingAge(key=age.key, label=age.label, count=age.count,
                                total=_money(age.total)) for age in line.ages])
        for line in lines])


def report_csv(company_id: int, query: OutstandingQuery, now: dt.datetime | None = None) -> str:
    """The outstanding report as CSV for a spreadsheet: a row per stage, sub or project with
    its count, dollars and oldest capture, then each age's count and dollars (UTF-8 with a
    byte-order mark, formulas defused as in the ticket log)."""
    answer = report(company_id, query, now)
    buffer = io.StringIO()
    buffer.write(BOM)
    writer = csv.writer(buffer, lineterminator="\r\n")
    ages = [key for key, *_rest in stages.AGES]
    writer.writerow([answer.group_by.value, "label", "count", "total", "oldest_at",
                     *(f"{column}_{key}" for key in ages for column in ("count", "total"))])
    for row in answer.model_dump(mode="json")["rows"]:  # every cell as the JSON writes it
        writer.writerow([safe_cell(value) for value in (
            row["key"], row["label"], row["count"], row["total"], row["oldest_at"],
            *(value for age in row["buckets"] for value in (age["count"], age["total"])))])
    return buffer.getvalue()
