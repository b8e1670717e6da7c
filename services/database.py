"""Database engine tuning and the write-transaction helper.

SQLite: WAL so readers never block the writer, foreign keys enforced, a busy
timeout, and BEGIN IMMEDIATE for write transactions so that two writers queue
on the lock at BEGIN instead of failing with "database is locked" when a read
transaction tries to upgrade. Read-only requests keep using deferred BEGIN, so
they run concurrently under WAL.
"""
from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator
from contextvars import ContextVar

from flask import Flask, current_app
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

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
    synchronous = app.config["SQLITE_SYNCHRONOUS"]
    busy_ms = int(app.config["SQLITE_BUSY_TIMEOUT_MS"])
    _install_sqlite_hooks(engine, synchronous, busy_ms)


def _install_sqlite_hooks(engine: Engine, synchronous: str, busy_ms: int) -> None:
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
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:
        # Straight on the driver's connection: through exec_driver_sql this one statement
        # cost as much as the query it opens the transaction for.
        connection.connection.driver_connection.execute(
            "BEGIN IMMEDIATE" if _write_intent.get() else "BEGIN")


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
    lock = _sqlite_writer_lock(session)
    # Bounded, so a writer can never hang here: past the busy timeout SQLite decides as before.
    held = lock is not None and lock.acquire(timeout=current_app.config["SQLITE_BUSY_TIMEOUT_MS"] / 1000)
    token = _write_intent.set(True)
    try:
        with session.begin():
            yield session
    finally:
        _write_intent.reset(token)
        if held:
            lock.release()


class FifoLock:
    """A lock handed to its waiters in the order they asked for it.

    threading.Lock lets whichever thread runs next take a freed lock, so under load one
    writer can lose to later arrivals several times over, which is what a p99 shows.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiters: collections.deque[threading.Lock] = collections.deque()
        self._held = False

    def acquire(self, timeout: float = -1) -> bool:
        """Take the lock, waiting behind earlier callers; False if `timeout` s pass first."""
        with self._guard:
            if not self._held:
                self._held = True
                return True
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        if turn.acquire(timeout=timeout):
            return True
        with self._guard:
            try:
                self._waiters.remove(turn)
            except ValueError:
                return True  # handed over between the timeout and here: it is ours
            return False

    def release(self) -> None:
        """Hand the lock to the longest waiter, or free it."""
        with self._guard:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._held = False


_writer_locks: dict[str, FifoLock] = {}
_writer_locks_guard = threading.Lock()


def _sqlite_writer_lock(session: Session) -> FifoLock | None:
    """This process's lock for writers to one SQLite file (None for other databases).

    SQLite lets one writer in at a time; the others poll with growing sleeps (up to 100 ms
    each), so under load a few threads of the same process lose the race again and again
    and wait a second or more. Queueing this process's writers on a lock first hands the
    database to the next one as soon as it is free; other processes still meet SQLite's own
    lock and busy timeout.
    """
    bind = session.get_bind()
    if bind.dialect.name != "sqlite":
        return None
    key = str(bind.url)
    with _writer_locks_guard:
        return _writer_locks.setdefault(key, FifoLock())
