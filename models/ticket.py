"""Tickets, their photos and their decision history."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Date,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from models.base import Money, db, utcnow

STATUSES = ("submitted", "written", "rejected")


def short_reference(ticket_id: str) -> str:
    """The reference a crew reads out over the phone: T- and the id's first 8 characters."""
    return "T-" + ticket_id.replace("-", "")[:8].upper()


class Ticket(db.Model):
    """A claim of out-of-scope work, from a capture link or from the API.

    Cost lines are kept as one JSON list in capture order (labor, equipment,
    materials); amounts are stored as decimal strings so no float ever touches money.
    """

    __tablename__ = "tickets"
    __table_args__ = (
        # A list's count and its counts per status read this narrow index alone.
        Index("ix_tickets_company_status", "company_id", "status"),
        # The list's orders, each carrying the total last, so a queue's sums per age read an
        # index alone.
        Index("ix_tickets_company_captured", "company_id", "captured_at", "id", "total"),
        Index("ix_tickets_company_status_captured", "company_id", "status", "captured_at", "id",
              "total"),
        Index("ix_tickets_company_project_captured", "company_id", "project_id", "captured_at",
              "id", "total"),
        Index("ix_tickets_company_project_status_captured", "company_id", "project_id", "status",
              "captured_at", "id", "total"),
        Index("ix_tickets_link_token", "link_token"),
        Index("ix_tickets_company_sub", "company_id", "sub"),
        # Written change events not on a change order yet (the queue's view), carrying the
        # total last like the list's orders, so the view's count and dollars read an index alone.
        Index("ix_tickets_company_status_change_order", "company_id", "status",
              "on_change_order", "captured_at", "id", "total"),
        # Written tickets whose record in the project system was tried longest ago (the sync).
        Index("ix_tickets_status_record_tried", "status", "record_tried_at"),
        # A phone resending a queued ticket carries the same client reference: one ticket only.
        UniqueConstraint("company_id", "client_ref", name="uq_tickets_company_client_ref"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"))
    project_id: Mapped[str] = mapped_column(String(40))
    status: Mapped[str] = mapped_column(String(16), default="submitted")
    description: Mapped[str] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text)
    directed_by: Mapped[str] = mapped_column(String(200))
    captured_by: Mapped[str | None] = mapped_column(String(200))
    captured_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # The day the work was done (ISO date); defaults to the capture date on the jobsite's clock.
    worked_on: Mapped[dt.date | None] = mapped_column(Date)
    # The GC directive or change-order request the ticket counts against (not-to-exceed), as
    # the crew or caller named it, and the authorization it was matched to.
    authorization_ref: Mapped[str | None] = mapped_column(String(60))
    authorization_id: Mapped[int | None] = mapped_column(Integer, index=True)
    captured_via: Mapped[str] = mapped_column(String(8))
    # The language of the crew's capture page when it was sent ('en', 'es'); signing links for
    # the ticket default to it. None for a ticket a program sent.
    language: Mapped[str | None] = mapped_column(String(8))
    link_token: Mapped[str | None] = mapped_column(String(64))
    # The subcontractor or crew: the capture link's label, or as an API caller named it.
    sub: Mapped[str | None] = mapped_column(String(120))
    client_ref: Mapped[str | None] = mapped_column(String(64))
    total: Mapped[Decimal] = mapped_column(Money())
    lines: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    warnings: Mapped[list[str]] = mapped_column(JSON, default=list)
    signature: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Signatures that no longer count (the lines changed after signing), oldest first, each
    # with when and why it was voided.
    voided_signatures: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    photo_count: Mapped[int] = mapped_column(Integer, default=0)
    # Photos the phone said would follow the text one by one; None when sent with the ticket.
    photos_expected: Mapped[int | None] = mapped_column(Integer, nullable=True)
    approved_by: Mapped[str | None] = mapped_column(String(300))
    approved_at: Mapped[dt.datetime | None]
    external: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The routing the record was written with (RoutingLine shapes), overrides included.
    written_routing: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, deferred=True)
    # What the queue search reads beyond the columns above: the lines' words and the optional
    # fields declared for search, folded (services/routing/learned_words.ticket_words), kept up
    # to date whenever the lines or one of those fields change.
    search_words: Mapped[str | None] = mapped_column(Text, deferred=True)
    # An approval in progress: who holds the ticket and since when (expires after a TTL).
    approval_claim_id: Mapped[str | None] = mapped_column(String(36))
    approval_claimed_at: Mapped[dt.datetime | None]
    # Destinations earlier approval attempts wrote to, or may have: a retry looks there first.
    approval_destinations: Mapped[list[str] | None] = mapped_column(JSON, deferred=True)
    # The written record as last read back from the project system (services/approval/
    # record_status.py): its status name, whether it was deleted there, the change orders its
    # lines are on (ChangeOrder shapes) and when it was read; when a read was last tried, read
    # or not (the scheduled sync goes on from there). `on_change_order` is None for a daily log
    # entry or an unwritten ticket, else whether any line is on a change order.
    record_status: Mapped[str | None] = mapped_column(String(40))
    record_deleted: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    record_change_orders: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    record_read_at: Mapped[dt.datetime | None]
    record_tried_at: Mapped[dt.datetime | None]
    on_change_order: Mapped[bool | None] = mapped_column(Boolean)
    # Whether every change order its lines are on is approved (None while on none).
    change_orders_approved: Mapped[bool | None] = mapped_column(Boolean)

    @property
    def reference(self) -> str:
        """The ticket's short reference, T-1A2B3C4D."""
        return short_reference(self.id)

    @property
    def record_gone(self) -> str | None:
        """"deleted" or "void" when the written record was, as last read; else None."""
        if self.record_deleted:
            return "deleted"
        return "void" if self.record_status == "Void" else None

    # Loaded with the ticket where a whole ticket is read (find_ticket); lists leave them out.
    photos: Mapped[list[TicketPhoto]] = relationship(
        back_populates="ticket", order_by="TicketPhoto.position")
    decisions: Mapped[list[Decision]] = relationship(
        back_populates="ticket", order_by="Decision.id")


class TicketPhoto(db.Model):
    """One photo of a ticket: the stored image, its thumbnail and what the phone said about it."""

    __tablename__ = "ticket_photos"
    __table_args__ = (Index("ux_ticket_photos_client_key", "ticket_id", "client_key", unique=True),)

    id: Mapped[int] = mapped_column(primary_key=True)
    ticket_id: Mapped[str] = mapped_column(ForeignKey("tickets.id"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(200))
    taken_at: Mapped[str | None] = mapped_column(String(40))
    coords: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    image_key: Mapped[str] = mapped_column(String(80))
    thumb_key: Mapped[str] = mapped_column(String(80))
    width: Mapped[int] = mapped_column(Integer)
    height: Mapped[int] = mapped_column(Integer)
    # The phone's own key for a photo sent on its own: the same key twice is one photo.
    client_key: Mapped[str | None] = mapped_column(String(64), nullable=True)

    ticket: Mapped[Ticket] = relationship(back_populates="photos")


class Decision(db.Model):
    """One approve, reject or restore; rows are only ever appended."""

    __tablename__ = "ticket_decisions"

    id: Mapped[int] = mapped_column(primary_key=True)
    ticket_id: Mapped[str] = mapped_column(ForeignKey("tickets.id"), index=True)
    action: Mapped[str] = mapped_column(String(16))
    by: Mapped[str | None] = mapped_column(String(300))
    at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # Why, in the reviewer's words (a rejection's reason, shown to the crew).
    reason: Mapped[str | None] = mapped_column(Text)

    ticket: Mapped[Ticket] = relationship(back_populates="decisions")


class StagedPhoto(db.Model):
    """A photo uploaded while its ticket is still being written on the phone.

    Kept under the link and the phone's reference for the ticket; moved onto the ticket
    when its text arrives, if the phone still lists it.
    """

    __tablename__ = "staged_photos"
    __table_args__ = (UniqueConstraint("link_token", "client_ref", "client_key",
                                       name="uq_staged_photos_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), index=True)
    link_token: Mapped[str] = mapped_column(String(64))
    client_ref: Mapped[str] = mapped_column(String(64))
    client_key: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200))
    taken_at: Mapped[str | None] = mapped_column(String(40))
    coords: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    image_key: Mapped[str] = mapped_column(String(80))
    thumb_key: Mapped[str] = mapped_column(String(80))
    width: Mapped[int] = mapped_column(Integer)
    height: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
