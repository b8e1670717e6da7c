"""Tickets: create, list, read, attach photos, approve, reject, restore."""
from __future__ import annotations

from flask import Blueprint, g

from blueprints.api import api_route
from models.schemas import (
    ApprovalResult,
    ApproveInput,
    PhotosInput,
    Ticket,
    TicketInput,
    TicketList,
    TicketListQuery,
)
from services import approval, tickets

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
    ticket, _created = tickets.create_ticket(g.company_id, body)
    return ticket


@api_route(bp, "/tickets/<ticket_id>", tag="tickets", response=Ticket, errors=(404,))
def get_ticket(ticket_id: str) -> Ticket:
    """Read one ticket with its routing."""
    return tickets.get_ticket(g.company_id, ticket_id)


@api_route(bp, "/tickets/<ticket_id>/photos", method="POST", tag="tickets", body=PhotosInput,
           response=Ticket, errors=(404, 409))
def add_photos(ticket_id: str, body: PhotosInput) -> Ticket:
    """Attach 1 to 12 photos to a ticket that is not written yet."""
    return tickets.add_photos(g.company_id, ticket_id, body.photos)


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
