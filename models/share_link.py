"""Share links: the no-account credential a sub's office uses to follow its crews' tickets."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from models.base import db, utcnow


class ShareLink(db.Model):
    """A link that shows one sub's tickets of a company (of one project, when it names one).

    The token itself is never stored, only its SHA-256 `token_digest`: it is shown once, when
    the link is made.
    """

    __tablename__ = "share_links"

    id: Mapped[int] = mapped_column(primary_key=True)
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), index=True)
    sub: Mapped[str] = mapped_column(String(120))
    project_id: Mapped[str | None] = mapped_column(String(40))
    token_digest: Mapped[str] = mapped_column(String(64), unique=True)
    expires_at: Mapped[dt.datetime | None]
    # A reviewer's e-mail or an API key's actor.
    created_by: Mapped[str | None] = mapped_column(String(300))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    ended_at: Mapped[dt.datetime | None]
