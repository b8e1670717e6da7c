"""Tickets: create, list, read, attach photos."""
from __future__ import annotations

from flask import Blueprint, g

from blueprints.api import api_route
from models.schemas import PhotosInput, Ticket, TicketInput, TicketList, TicketListQuery
from services import tickets

bp = Blueprint("tickets", __name__)


@api_route(bp, "/tickets", tag="tickets", query=TicketListQuery, response=TicketList)
def list_tickets(query: TicketListQuery) -> TicketList:
    """List tickets, newest first; filter by status and project."""
    return tickets.list_tickets(g.company_id, status=query.status, project_id=query.project_id,
                                limit=query.limit, offset=query.offset)


@api_route(bp, "/tickets", method="POST", tag="tickets", body=TicketInput, response=Ticket,
           errors=(404, 409, 502))
def create_ticket(body: TicketInput) -> Ticket:
    """Create a ticket with the same validation as the capture form."""
    return tickets.create_ticket(g.company_id, body)


@api_route(bp, "/tickets/<ticket_id>", tag="tickets", response=Ticket, errors=(404,))
def get_ticket(ticket_id: str) -> Ticket:
    """Read one ticket with its routing."""
    return tickets.get_ticket(g.company_id, ticket_id)


@api_route(bp, "/tickets/<ticket_id>/photos", method="POST", tag="tickets", body=PhotosInput,
           response=Ticket, errors=(404, 409))
def add_photos(ticket_id: str, body: PhotosInput) -> Ticket:
    """Attach 1 to 12 photos to a ticket that is not written yet."""
    return tickets.add_photos(g.company_id, ticket_id, body.photos)
