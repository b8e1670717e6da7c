"""Database engine tuning and the write-transaction helper.

SQLite: WAL so readers never block the writer, foreign keys enforced, a busy
timeout, a bound on the memory it keeps, and BEGIN IMMEDIATE for write transactions so that two writers queue
on the lock at BEGIN instead of failing with "database is locked" when a read
transaction tries to upgrade. Read-only requests keep using deferred BEGIN, so
they run concurrently under WAL.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from flask import Flask
from sqlalchemy import Table, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import Insert

from models import db

_write_intent: ContextVar[bool] = ContextVar("write_intent", default=False)


def normalise_database_url(url: str) -> str:
    """Map plain postgres URLs to the psycopg 3 driver that the project installs."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def configure_engine(app: Flask) -> None:
    """Attach the SQLite pragmas and the BEGIN hook to this app's engine."""
    with app.app_context():
        engine = db.engine
    if engine.dialect.name != "sqlite":
        return
    _install_sqlite_hooks(engine, app.config["SQLITE_SYNCHRONOUS"],
                          int(app.config["SQLITE_BUSY_TIMEOUT_MS"]),
                          int(app.config["SQLITE_HEAP_LIMIT_BYTES"]))


def _install_sqlite_hooks(engine: Engine, synchronous: str, busy_ms: int,
                          heap_limit: int) -> None:
    """Register connect and begin listeners on a SQLite engine."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        # Take transaction control away from the sqlite3 module so BEGIN is ours.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute(f"PRAGMA soft_heap_limit={heap_limit}")  # the process's, all connections
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE" if _write_intent.get() else "BEGIN")


@contextlib.contextmanager
def write_transaction() -> Iterator[Session]:
    """Run the block in one write transaction that holds the write lock from its start.

    Any read transaction the request already has is ended first, so the lock is
    taken at BEGIN. Nested use joins the outer transaction. Commits on success,
    rolls back on any exception.
    """
    session = db.session()
    if _write_intent.get() and session.in_transaction():
        yield session
        return
    if session.in_transaction():
        session.commit()
    token = _write_intent.set(True)
    try:
        with session.begin():
            yield session
    finally:
        _write_intent.reset(token)


def insert_or_merge(session: Session, table: Table) -> Insert:
    """An INSERT on this session's database that can take ON CONFLICT (SQLite or PostgreSQL)."""
    insert = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}[session.get_bind().dialect.name]
    return insert(table)
