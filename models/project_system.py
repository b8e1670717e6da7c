"""How a company reaches its project system."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import BigInteger, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from models.base import db, utcnow


class ProjectSystemConnection(db.Model):
    """A company's connection: the embedded sandbox, or a Procore company.

    For the sandbox the addresses come from configuration at run time, so moving
    the sandbox to another port needs no data change. The client secret is kept
    here and never leaves the service through the API, pages or logs.
    """

    __tablename__ = "project_system_connections"

    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), primary_key=True)
    environment: Mapped[str] = mapped_column(String(32))
    api_base: Mapped[str | None] = mapped_column(String(300))
    oauth_base: Mapped[str | None] = mapped_column(String(300))
    web_base: Mapped[str | None] = mapped_column(String(300))
    client_id: Mapped[str] = mapped_column(String(300))
    client_secret: Mapped[str] = mapped_column(String(300))
    remote_company_id: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    last_status: Mapped[str | None] = mapped_column(String(40))
    last_checked_at: Mapped[dt.datetime | None]


class KnownProject(db.Model):
    """A project a company made a capture link or a ticket on, with its name at the time.

    Tickets are accepted for these while the project system cannot be reached: creating a
    ticket only records a claim, so it never waits on the project system.
    """

    __tablename__ = "known_projects"

    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), primary_key=True)
    project_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(300))
    seen_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class ProjectSettings(db.Model):
    """How a project's change events are written: Procore's event type and change reason."""

    __tablename__ = "project_settings"

    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), primary_key=True)
    project_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    # tbd, allowance, contingency, owner_change or transfer.
    event_type: Mapped[str] = mapped_column(String(32), default="tbd")
    change_reason_id: Mapped[int | None] = mapped_column(BigInteger)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str | None] = mapped_column(String(300))


class SubCommitment(db.Model):
    """The commitment a PM confirmed for a sub on a project, for the sub's next tickets there."""

    # sub_key: the sub's name as matched (services/project_system/commitments.py); a null
    # contract_id is the PM's word that the sub's lines carry no commitment on the project.

    __tablename__ = "sub_commitments"

    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), primary_key=True)
    project_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    sub_key: Mapped[str] = mapped_column(String(120), primary_key=True)
    sub: Mapped[str] = mapped_column(String(120))
    contract_id: Mapped[int | None] = mapped_column(BigInteger)
    confirmed_by: Mapped[str | None] = mapped_column(String(300))
    confirmed_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
