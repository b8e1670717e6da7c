"""The board of outstanding dollars: the page, its CSV, and the outstanding report under /v1."""
from __future__ import annotations

from flask import Blueprint, Response, g, request
from flask_login import current_user, login_required

from blueprints.api import api_route
from models import utcnow
from models.schemas import OutstandingQuery, OutstandingReport
from services.platform.validation import validate
from services.platform.web import csv_download, render_page
from services.reports import board
from services.reports.outstanding import GROUPS
from services.review.review_queue import QueueView

bp = Blueprint("board", __name__)


def report_csv_answer(text: str) -> Response:
    """The outstanding report as a CSV download named by today's date."""
    return csv_download(text, f"outstanding-{utcnow():%Y-%m-%d}.csv")


@api_route(bp, "/reports/outstanding", tag="reports", query=OutstandingQuery,
           response=OutstandingReport)
def outstanding_report(query: OutstandingQuery) -> OutstandingReport:
    """Outstanding dollars by stage, sub or project, each split by age.

    A ticket is outstanding until every change order its lines are on is approved in the
    project system: `signature` (waiting for a signature), `review` (signed, waiting for the
    project manager), `written` (a change event on no change order yet) or `change_order` (on
    a change order not yet approved). A daily log entry, a record deleted or voided in the
    project system and a ticket sent back are not. Each row counts its tickets, sums their
    totals and gives its oldest capture, split by age in whole days since capture (`0_2`,
    `3_7`, `8_30`, `over_30`) as of `as_of`. The ticket list's filters narrow it.
    """
    return board.report(g.company_id, query)


@api_route(bp, "/reports/outstanding.csv", tag="reports", query=OutstandingQuery,
           media_type="text/csv")
def outstanding_report_csv(query: OutstandingQuery) -> Response:
    """The outstanding report as CSV for a spreadsheet.

    The same figures as `GET /reports/outstanding` with the same parameters: a row per stage,
    sub or project (the first column, named by `group_by`), its `label`, `count`, `total`,
    `oldest_at`, then `count_<age>` and `total_<age>` for each age. UTF-8 with a byte-order
    mark; a cell a spreadsheet would run as a formula starts with an apostrophe instead.
    """
    return report_csv_answer(board.report_csv(g.company_id, query))


@bp.get("/board")
@login_required
def board_page() -> Response:
    """The board: outstanding dollars by stage, sub and project, by age, with the queue's
    filters; each bar opens the queue on its tickets."""
    view = QueueView.from_args(request.args)
    data = board.board(current_user.company_id, view.project_id, view.sub, view.q)
    return render_page("review/board.html", "review/_board.html", board=data, view=view)


@bp.get("/board/outstanding.csv")
@login_required
def board_csv() -> Response:
    """The board's figures of one grouping (by stage unless it names another) as a CSV
    download, with the board's filters as the queue reads them."""
    view = QueueView.from_args(request.args)
    group_by = request.args.get("group_by")
    query = validate(OutstandingQuery, {"project_id": view.project_id, "sub": view.sub,
                                        "q": view.q,
                                        "group_by": group_by if group_by in GROUPS else "stage"})
    return report_csv_answer(board.report_csv(current_user.company_id, query))
