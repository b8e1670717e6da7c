"""Webhook endpoints of a company, the outbox of their deliveries, and each delivery attempt."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import JSON, Boolean, ForeignKey, Integer, String, Text, true
from sqlalchemy.orm import Mapped, mapped_column, relationship

from models.base import db, utcnow


class WebhookEndpoint(db.Model):
    """A program's address that is sent the company's ticket events, signed with its secret."""

    __tablename__ = "webhook_endpoints"

    id: Mapped[int] = mapped_column(primary_key=True)
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), index=True)
    url: Mapped[str] = mapped_column(String(2000))
    description: Mapped[str | None] = mapped_column(String(200))
    events: Mapped[list[str]] = mapped_column(JSON)
    secret: Mapped[str] = mapped_column(String(100))
    # After a rotation the old secret signs beside the new one until it expires.
    previous_secret: Mapped[str | None] = mapped_column(String(100))
    previous_secret_expires_at: Mapped[dt.datetime | None]
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    disabled_reason: Mapped[str | None] = mapped_column(String(200))
    # The first failed attempt since the last answered one: failing this long disables it.
    failing_since: Mapped[dt.datetime | None]
    # A worker sends this endpoint's deliveries one at a time while it holds this claim.
    claim_id: Mapped[str | None] = mapped_column(String(36))
    claimed_until: Mapped[dt.datetime | None] = mapped_column(index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class WebhookDelivery(db.Model):
    """One event for one endpoint, stored with the change that caused it (the outbox); its id
    is the `webhook-id` every attempt sends."""

    __tablename__ = "webhook_deliveries"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), index=True)
    endpoint_id: Mapped[int] = mapped_column(
        ForeignKey("webhook_endpoints.id", ondelete="CASCADE"), index=True)
    event_type: Mapped[str] = mapped_column(String(40))
    ticket_id: Mapped[str | None] = mapped_column(String(36))
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, index=True)
    # pending (to send at next_attempt_at), delivered, or failed (given up after three days).
    status: Mapped[str] = mapped_column(String(16), default="pending")
    next_attempt_at: Mapped[dt.datetime | None] = mapped_column(index=True)
    attempt_count: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # The retry schedule counts from here (the event, or its replay).
    first_tried_at: Mapped[dt.datetime | None]

    attempts: Mapped[list[WebhookAttempt]] = relationship(
        order_by="WebhookAttempt.id", cascade="all, delete-orphan", passive_deletes=True)


class WebhookAttempt(db.Model):
    """One try at sending a delivery: when, the answer's status (none when there was none),
    how long it took, and why it failed."""

    __tablename__ = "webhook_attempts"

    id: Mapped[int] = mapped_column(primary_key=True)
    delivery_id: Mapped[str] = mapped_column(
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), index=True)
    attempted_at: Mapped[dt.datetime] = mapped_column(default=utcnow, index=True)
    status_code: Mapped[int | None]
    duration_ms: Mapped[int] = mapped_column(Integer)
    ok: Mapped[bool] = mapped_column(Boolean)
    error: Mapped[str | None] = mapped_column(String(300))
