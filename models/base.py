"""Declarative base, shared column types and the Flask-SQLAlchemy handle."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import DateTime, MetaData, Numeric, String, TypeDecorator
from sqlalchemy.orm import DeclarativeBase, registry

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> dt.datetime:
    """Return the current time as an aware UTC datetime."""
    return dt.datetime.now(dt.timezone.utc)


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Stores naive UTC everywhere and always hands back aware UTC datetimes.

    SQLite has no time zone support, so normalising here keeps comparisons and
    JSON output identical on SQLite and PostgreSQL.
    """

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect) -> dt.datetime | None:
        """Convert an aware datetime to naive UTC before storing it."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; pass an aware UTC datetime")
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)

    def process_result_value(self, value: dt.datetime | None, dialect) -> dt.datetime | None:
        """Attach UTC to a stored naive datetime."""
        if value is None:
            return None
        return value.replace(tzinfo=dt.timezone.utc)


class Base(DeclarativeBase):
    """Base class of every table; constraint names are deterministic for batch migrations."""

    registry = registry(
        metadata=MetaData(naming_convention=NAMING_CONVENTION),
        type_annotation_map={dt.datetime: UTCDateTime()},
    )


db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False})


class Money(TypeDecorator[Decimal]):
    """Exact money: NUMERIC(14, 2) where the database has it, decimal text on SQLite.

    SQLite would store NUMERIC as a float; keeping the text keeps every cent.
    """

    impl = Numeric(14, 2)
    cache_ok = True

    def load_dialect_impl(self, dialect):
        """Pick the storage type for this database."""
        if dialect.name == "sqlite":
            return dialect.type_descriptor(String(24))
        return dialect.type_descriptor(Numeric(14, 2))

    def process_bind_param(self, value: Decimal | None, dialect) -> Any:
        """Store exact text on SQLite, the Decimal elsewhere."""
        if value is None:
            return None
        value = Decimal(value).quantize(Decimal("0.01"))
        return format(value, "f") if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect) -> Decimal | None:
        """Always hand back a Decimal."""
        return None if value is None else Decimal(str(value)).quantize(Decimal("0.01"))
