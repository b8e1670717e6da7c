"""Capture links: the no-account credential a crew uses to submit tickets for one project."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from models.base import db, utcnow


class CaptureLink(db.Model):
    """A link (QR code, SMS, plain URL) that lets its holder submit tickets for a project."""

    __tablename__ = "capture_links"

    id: Mapped[int] = mapped_column(primary_key=True)
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), index=True)
    project_id: Mapped[str] = mapped_column(String(40))
    project_name: Mapped[str] = mapped_column(String(200))
    label: Mapped[str | None] = mapped_column(String(120))
    token: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[dt.datetime | None]
