"""Signature requests: a signing link sent to the general contractor's person for one ticket."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from models.base import db, utcnow

# PostgreSQL ids may pass 32 bits; SQLite numbers a row only through an INTEGER primary key.
RequestId = BigInteger().with_variant(Integer(), "sqlite")


class SignatureRequest(db.Model):
    """A link that lets one person sign one ticket once, with no account.

    The token itself is never stored: it is an HMAC of `token_salt` under the app's secret key
    (so a reminder can carry it again), and the token is found by its SHA-256 `token_digest`.
    """

    __tablename__ = "signature_requests"
    __table_args__ = (
        Index("ix_signature_requests_ticket", "ticket_id", "created_at"),
        Index("ix_signature_requests_reminder", "next_reminder_at"),
    )

    id: Mapped[int] = mapped_column(RequestId, primary_key=True, autoincrement=True)
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), index=True)
    ticket_id: Mapped[str] = mapped_column(ForeignKey("tickets.id"))
    token_digest: Mapped[str] = mapped_column(String(64), unique=True)
    token_salt: Mapped[str] = mapped_column(String(64))
    signer_name: Mapped[str] = mapped_column(String(200))
    signer_role: Mapped[str | None] = mapped_column(String(200))
    email: Mapped[str | None] = mapped_column(String(254))
    phone: Mapped[str | None] = mapped_column(String(40))
    # Who asked: a reviewer's e-mail, an API key, or "crew" (a capture link's phone).
    created_by: Mapped[str | None] = mapped_column(String(300))
    # The capture link whose phone asked for it, when a crew did.
    link_token: Mapped[str | None] = mapped_column(String(64))
    # The address the link was built on, so a reminder sent later carries the same one.
    base_url: Mapped[str] = mapped_column(String(300))
    # The jobsite's zone (IANA) when the request was made: reminders go out on its mornings.
    time_zone: Mapped[str] = mapped_column(String(64), default="UTC")
    language: Mapped[str] = mapped_column(String(8), default="en")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[dt.datetime]
    revoked_at: Mapped[dt.datetime | None]
    signed_at: Mapped[dt.datetime | None]
    emailed_at: Mapped[dt.datetime | None]
    reminders_sent: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # When the next reminder is due; None when none will be sent.
    next_reminder_at: Mapped[dt.datetime | None]
