"""Companies, their API keys and their reviewers."""
from __future__ import annotations

import datetime as dt

from flask_login import UserMixin
from sqlalchemy import Boolean, ForeignKey, String, false, true
from sqlalchemy.orm import Mapped, mapped_column, relationship

from models.base import db, utcnow


class Company(db.Model):
    """A subcontractor firm: the unit of tenancy. Every other record belongs to one."""

    __tablename__ = "companies"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # Whether the capture form asks crews for rates, unit costs and cost codes (else the office does).
    crew_enters_prices: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # The zone (IANA) most of its projects name, as last read: the clock its morning digest keeps.
    time_zone: Mapped[str | None] = mapped_column(String(64))

    api_keys: Mapped[list[ApiKey]] = relationship(back_populates="company")


class ApiKey(db.Model):
    """A program's credential. Only a SHA-256 digest and a short display prefix are kept."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    prefix: Mapped[str] = mapped_column(String(16), unique=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[dt.datetime | None]
    revoked_at: Mapped[dt.datetime | None]
    # The reviewer who made it on /keys (disabling them revokes it); None: the command line.
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("reviewers.id"), index=True)

    company: Mapped[Company] = relationship(back_populates="api_keys")
    created_by: Mapped[Reviewer | None] = relationship(lazy="joined")


class Reviewer(UserMixin, db.Model):
    """A project manager who works the review queue in the browser."""

    __tablename__ = "reviewers"

    id: Mapped[int] = mapped_column(primary_key=True)
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), index=True)
    email: Mapped[str] = mapped_column(String(254), unique=True)
    password_hash: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # Every session carries the epoch it was opened under; raising it ends them all.
    session_epoch: Mapped[int] = mapped_column(default=0, server_default="0")
    # Every sign-in link e-mailed carries this epoch; using one raises it (each link works once).
    sign_in_link_epoch: Mapped[int] = mapped_column(default=0, server_default="0")
    disabled_at: Mapped[dt.datetime | None]
    # A company admin may disable and re-enable the company's other reviewers.
    is_admin: Mapped[bool] = mapped_column(default=False, server_default=false())
    # The reviewer turned the morning digest off; the company's date it was last sent on.
    digest_off: Mapped[bool] = mapped_column(default=False, server_default=false())
    digest_sent_on: Mapped[dt.date | None]

    def get_id(self) -> str:
        """The session's user id: the reviewer and the epoch the session was opened under."""
        return f"{self.id}:{self.session_epoch}"

    @property
    def is_active(self) -> bool:
        """A disabled reviewer cannot sign in or keep a session."""
        return self.disabled_at is None
