"""Pricing the office agrees with the general contractor: rate sheets per project or company."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from sqlalchemy import JSON, Date, ForeignKey, Index, String, func
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Money, db, utcnow


class RateSheet(db.Model):
    """Agreed rates in force from a date: for one project, or the company's default (no project).

    Items are kept as JSON lists with decimal strings (labor classifications with straight,
    overtime and double-time rates; equipment with hourly and optional daily rates; materials
    at cost), plus one markup percentage on the cost of materials. A ticket keeps the prices
    it was given, so a sheet added or replaced later never changes a ticket already priced.
    """

    __tablename__ = "rate_sheets"
    __table_args__ = (
        Index("ix_rate_sheets_company_project_effective", "company_id", "project_id",
              "effective_from"),
        # A deleted sheet's id never names another sheet (SQLite would reuse the highest id).
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"))
    # Null: the company's default sheet, used where a project has none in force.
    project_id: Mapped[str | None] = mapped_column(String(40))
    name: Mapped[str] = mapped_column(String(120))
    effective_from: Mapped[dt.date] = mapped_column(Date)
    material_markup: Mapped[str] = mapped_column(String(24), default="0")
    labor: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    equipment: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    materials: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class ProjectMarkups(db.Model):
    """A project's markups (overhead, profit, bond, insurance, tax) in the order they apply.

    Each is a percentage on chosen line kinds, compounding on the markups before it or not,
    landing on a budget code the PM picked for it. Kept as one JSON list per project.
    """

    __tablename__ = "project_markups"

    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), primary_key=True)
    project_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    markups: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str | None] = mapped_column(String(300))


class Authorization(db.Model):
    """A GC directive or change-order request with an authorised (not-to-exceed) amount.

    Tickets that reference it count against it while submitted or written. Its reference is
    unique in its project whatever its case, as it is looked up (the index below).
    """

    __tablename__ = "authorizations"

    id: Mapped[int] = mapped_column(primary_key=True)
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"))
    project_id: Mapped[str] = mapped_column(String(40))
    reference: Mapped[str] = mapped_column(String(60))
    kind: Mapped[str] = mapped_column(String(32))
    title: Mapped[str | None] = mapped_column(String(300))
    amount: Mapped[Decimal] = mapped_column(Money())
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


# One reference per project, compared as it is looked up (services/pricing/authorizations.py): without case.
# SQLite's reflection cannot read an index on an expression, so a batch migration that rebuilds
# this table must create it again (migrations/versions/0024).
Index("uq_authorizations_company_project_lower_reference", Authorization.company_id,
      Authorization.project_id, func.lower(Authorization.reference), unique=True)
