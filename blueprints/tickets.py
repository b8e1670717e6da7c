"""Tickets: the /v1 routes and the review pages (queue, ticket), on the same services."""
from __future__ import annotations

from flask import Blueprint, Response, g, request
from flask_login import current_user, login_required

from blueprints.api import api_route
from models.schemas import (
    ApprovalResult,
    ApproveInput,
    BudgetCodeInput,
    PhotosInput,
    Ticket,
    TicketInput,
    TicketList,
    TicketListQuery,
)
from services import approval, projects, review, tickets
from services.errors import ServiceError
from services.validation import validate
from services.web import render_page

bp = Blueprint("tickets", __name__)


@api_route(bp, "/tickets", tag="tickets", query=TicketListQuery, response=TicketList)
def list_tickets(query: TicketListQuery) -> TicketList:
    """List tickets, newest first; filter by status and project."""
    return tickets.list_tickets(g.company_id, status=query.status, project_id=query.project_id,
                                limit=query.limit, offset=query.offset, q=query.q)


@api_route(bp, "/tickets", method="POST", tag="tickets", body=TicketInput, response=Ticket,
           errors=(404, 409, 502))
def create_ticket(body: TicketInput) -> Ticket:
    """Create a ticket with the same validation as the capture form.

    Send a `client_ref` of your own to make retries safe: the same value again returns
    the ticket made the first time.
    """
    return tickets.create_ticket(g.company_id, body)[0]


@api_route(bp, "/tickets/<ticket_id>", tag="tickets", response=Ticket, errors=(404,))
def get_ticket(ticket_id: str) -> Ticket:
    """Read one ticket with its routing."""
    return tickets.get_ticket(g.company_id, ticket_id)


@api_route(bp, "/tickets/<ticket_id>/photos", method="POST", tag="tickets", body=PhotosInput,
           response=Ticket, errors=(404, 409))
def add_photos(ticket_id: str, body: PhotosInput) -> Ticket:
    """Attach 1 to 12 photos to a ticket that is not written yet."""
    return tickets.add_photos(g.company_id, ticket_id, body.photos)


@api_route(bp, "/tickets/<ticket_id>/photos/<key>", method="PUT", tag="tickets", response=Ticket,
           errors=(400, 404, 409))
def put_photo(ticket_id: str, key: str) -> Ticket:
    """Attach one photo under your own key (1-64 letters, digits, '-', '_'); again changes nothing.

    The body is the image itself (JPEG, PNG or WebP, at most 2 MiB); `name`, `taken_at`, `lat`
    and `lng` may be given in the query. For senders on a weak signal: one small upload per
    photo, each safe to repeat. Send `photos_expected` with the ticket so it shows the photos
    as arriving until all are in.
    """
    from services import capture

    tickets.find_ticket(g.company_id, ticket_id)  # an unknown ticket is a 404 whatever the body
    photo = capture.photo_from_upload(request.get_data(), request.args)
    return tickets.put_photo(g.company_id, ticket_id, capture.part_key(key), photo)[0]


@api_route(bp, "/tickets/<ticket_id>/approve", method="POST", tag="tickets", body=ApproveInput,
           response=ApprovalResult, errors=(404, 409, 502), body_required=False,
           extra_responses={
               400: "The body or a `routes` entry is unusable (code `validation_failed`): a key "
                    "that is not a line index of the ticket, or a value that is not a budget "
                    "code id of its project, named in `details` as `routes.<key>`.",
               409: "Nothing was written. Codes: `ticket_rejected` (the ticket is rejected and "
                    "`allow_rejected` is not true); `lines_need_review` (`details` lists each "
                    "refused line as {line, reason, description}: a line without a budget code "
                    "unless `allow_unrouted`, or under `require_exact` a line not on a confirmed "
                    "code); `no_change_events` (the project has no change-event tool and no "
                    "destination, or `change_event`, was named: name `daily_log`); "
                    "`approval_in_progress` (another approval is writing this ticket now; "
                    "retry after the seconds in Retry-After to see its outcome).",
               502: "The project system refused or could not take the write; the message is "
                    "its own. The ticket stays approvable, and a retry finds any record the "
                    "failed attempt left (by origin id) instead of writing a second one.",
           })
def approve_ticket(ticket_id: str, body: ApproveInput) -> ApprovalResult:
    """Write the ticket into the project system once; a repeat answers already: true."""
    return approval.approve(g.company_id, ticket_id, body, actor=g.actor)


@api_route(bp, "/tickets/<ticket_id>/reject", method="POST", tag="tickets", response=Ticket,
           errors=(404, 409), extra_responses={
               409: "Codes: `ticket_rejected` (already rejected), `ticket_written` (already in "
                    "the project system), `approval_in_progress` (an approval is writing it).",
           })
def reject_ticket(ticket_id: str) -> Ticket:
    """Close a submitted ticket without writing to the project system."""
    return approval.reject(g.company_id, ticket_id, actor=g.actor)


@api_route(bp, "/tickets/<ticket_id>/restore", method="POST", tag="tickets", response=Ticket,
           errors=(404, 409), extra_responses={
               409: "Codes: `ticket_written` (already in the project system), "
                    "`approval_in_progress` (an approval of the rejected ticket is writing it).",
           })
def restore_ticket(ticket_id: str) -> Ticket:
    """Put a rejected ticket back to submitted; idempotent on a submitted one."""
    return approval.restore(g.company_id, ticket_id, actor=g.actor)


# ------------------------------------------------------------------ pages

def _ticket_panel(ticket_id: str, *, error: ServiceError | None = None, message: str | None = None,
                  selected: dict[int, int] | None = None, status: int = 200) -> Response:
    """The ticket page, or its main panel for htmx."""
    page = review.ticket_page(current_user.company_id, ticket_id, error=error, message=message,
                              selected_routes=selected)
    response = render_page("review/ticket.html", "review/_ticket.html", page=page)
    response.status_code = status
    return response


@bp.get("/queue")
@login_required
def queue_page() -> Response:
    """The review queue: 'Needs review' first, filter by status and project, search descriptions."""
    status = request.args.get("status", "submitted")
    data = review.queue(current_user.company_id, status=None if status == "all" else status,
                        project_id=request.args.get("project_id") or None,
                        q=(request.args.get("q") or "").strip()[:100] or None)
    return render_page("review/queue.html", "review/_queue_rows.html", queue=data,
                       tabs=review.STATUS_TABS)


@bp.get("/tickets/<ticket_id>")
@login_required
def ticket_page(ticket_id: str) -> Response:
    """One ticket with everything a reviewer needs to approve it."""
    return _ticket_panel(ticket_id)


@bp.post("/tickets/<ticket_id>/approve")
@login_required
def approve_page(ticket_id: str) -> Response:
    """Approve from the page: the same service and rules as the API, with the page's routes."""
    form = request.form.to_dict()
    try:
        result = review.approve_from_form(current_user.company_id, ticket_id, form,
                                          actor=current_user.email)
    except ServiceError as error:
        if error.status == 404:
            raise
        return _ticket_panel(ticket_id, error=error, status=422,
                             selected=review.selected_routes_from_form(form))
    note = "It was already written." if result.already else "Written to the project system."
    return _ticket_panel(ticket_id, message=note)


def _decide(ticket_id: str, decide, done: str) -> Response:
    """Run reject or restore for the signed-in reviewer and show the ticket again."""
    try:
        decide(current_user.company_id, ticket_id, actor=current_user.email)
    except ServiceError as error:
        if error.status == 404:
            raise
        return _ticket_panel(ticket_id, error=error, status=422)
    return _ticket_panel(ticket_id, message=done)


@bp.post("/tickets/<ticket_id>/reject")
@login_required
def reject_page(ticket_id: str) -> Response:
    """Reject from the page."""
    return _decide(ticket_id, approval.reject, "Rejected. Nothing was written to the project system.")


@bp.post("/tickets/<ticket_id>/restore")
@login_required
def restore_page(ticket_id: str) -> Response:
    """Restore a rejected ticket to the queue from the page."""
    return _decide(ticket_id, approval.restore, "Restored to the queue.")


@bp.post("/tickets/<ticket_id>/budget-codes")
@login_required
def create_budget_code_page(ticket_id: str) -> Response:
    """Create the budget code a line lacks, through the same service as the budget-codes endpoint."""
    form = request.form.to_dict()
    ticket = tickets.find_ticket(current_user.company_id, ticket_id)
    try:
        body = validate(BudgetCodeInput, {"cost_code_item_id": form.get("cost_code_item_id"),
                                          "cost_type": form.get("cost_type") or "other"})
        made = projects.create_budget_code(current_user.company_id, ticket.project_id,
                                           body.cost_code_item_id, body.cost_type)
    except ServiceError as error:
        if error.status == 404 and error.code == "ticket_not_found":
            raise
        return _ticket_panel(ticket_id, error=error, status=422)
    selected = review.selected_routes_from_form(form)
    line = form.get("line", "")
    if line.isdigit():
        selected[int(line)] = made.id
    return _ticket_panel(ticket_id, message=f"Budget code {made.code} is ready; it is selected "
                                           f"for line {line}.", selected=selected)


def _image(data: bytes, media_type: str) -> Response:
    """An image answer that browsers cache privately."""
    response = Response(data, mimetype=media_type)
    response.headers["Cache-Control"] = "private, max-age=3600"
    return response


@bp.get("/tickets/<ticket_id>/photos/<int:position>.jpg")
@login_required
def photo_page(ticket_id: str, position: int) -> Response:
    """A photo at full size."""
    return _image(tickets.photo_file(current_user.company_id, ticket_id, position), "image/jpeg")


@bp.get("/tickets/<ticket_id>/photos/<int:position>/thumb.jpg")
@login_required
def photo_thumb_page(ticket_id: str, position: int) -> Response:
    """A photo's thumbnail."""
    return _image(tickets.photo_file(current_user.company_id, ticket_id, position, thumbnail=True),
                  "image/jpeg")


@bp.get("/tickets/<ticket_id>/signature.png")
@login_required
def signature_page(ticket_id: str) -> Response:
    """The signature image."""
    return _image(tickets.signature_file(current_user.company_id, ticket_id), "image/png")
