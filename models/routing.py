"""Routing decisions: where a PM put each written line, kept as evidence for the next lines."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from models.base import db, utcnow

DecisionId = BigInteger().with_variant(Integer(), "sqlite")


class RoutingDecision(db.Model):
    """One written line's final budget code, with what the line said.

    Kept at the company's cost code and cost type, so it can route a line of another project
    to that project's own budget code for the same pair; the budget code's id routes lines of
    its own project even where its cost code could not be read back.
    """

    __tablename__ = "routing_decisions"
    __table_args__ = (Index("ix_routing_decisions_company_id", "company_id", "id"),)

    id: Mapped[int] = mapped_column(DecisionId, primary_key=True, autoincrement=True)
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"))
    project_id: Mapped[str] = mapped_column(String(40))
    ticket_id: Mapped[str] = mapped_column(String(36))
    line: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))
    # What the line said (labor: trade and classification; else its description), the
    # ticket's description, the sub it came from and the cost code the crew typed.
    text: Mapped[str] = mapped_column(String(300))
    description: Mapped[str] = mapped_column(Text)
    sub: Mapped[str | None] = mapped_column(String(120))
    crew_cost_code: Mapped[str | None] = mapped_column(String(60))
    cost_code: Mapped[str] = mapped_column(String(60))
    cost_type: Mapped[str] = mapped_column(String(32))
    budget_code_id: Mapped[int | None] = mapped_column(BigInteger)
    budget_code: Mapped[str] = mapped_column(String(100))
    # crew_code: the crew's own cost code, kept; chosen: a person picked or confirmed it.
    how: Mapped[str] = mapped_column(String(16))
    decided_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
