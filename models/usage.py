"""What has been stored per day: bytes and tickets, per link, per company and for everyone."""
from __future__ import annotations

from sqlalchemy import BigInteger, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from models.base import db


class StorageUsage(db.Model):
    """Bytes of images and tickets stored on one UTC day by one scope and key.

    Scopes: "link" (key: a digest of the link token), "company" (key: the company id) and
    "all" (key: ""). Kept in the database, so the daily quotas hold across restarts and
    across every process that shares the database.
    """

    __tablename__ = "storage_usage"

    scope: Mapped[str] = mapped_column(String(16), primary_key=True)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    day: Mapped[str] = mapped_column(String(10), primary_key=True)
    bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    tickets: Mapped[int] = mapped_column(Integer, default=0)
