"""Hot rows kept in memory between requests, forgotten the moment their table changes.

Two reads run on most /v1 requests: the API key's row (every request) and a ticket's
document row (GET /v1/tickets/{id}). On SQLite each read cost more under load than the
rest of a small answer (bench/fixes.md, round 6): Python's
sqlite3 module lets go of the GIL around every step and every column, and each let-go
hands the interpreter to another busy thread.

Each kind of row is kept under a *generation*: eight bytes in a file beside the database
(`<database>-keys`, `<database>-tickets`), mapped into memory by every process that opens
that database (the server's threads, any other worker, the CLI). Reading it is a memory
read, with no system call. A kept row is used only while its generation is the one it was
read under. After every commit that wrote to a watched table, from any of those
processes, the generation changes; a restore changes them all. So a key revoked anywhere
is refused by the very next request, and a ticket approved anywhere reads as approved by
the very next request. The change comes after the commit, never before: a request that
read a row just before the commit kept it under the old generation, which no longer
matches.

Only a SQLite file gets generations, because every process that opens one runs on the
same machine. App servers sharing PostgreSQL cannot share a mapped file, so there each
request reads its rows; PostgreSQL's driver takes a row in one go, so a read costs less
there. Writes must go through a SQLAlchemy Session, whose `after_commit` moves the
generations, or through services.database.DriverWrites, which moves them itself; any
other connection would leave other processes with what they kept.
"""
from __future__ import annotations

import functools
import mmap
import os
import random
import re
from collections.abc import Callable, Hashable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from flask import Flask, current_app
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

GENERATION_BYTES = 8


@dataclass(frozen=True)
class RowKind:
    """A kind of kept row: its name, the tables whose writes make it stale, how many to keep."""

    name: str
    tables: re.Pattern[str]
    most_kept: int


KEYS = RowKind("keys", re.compile(r"\b(api_keys|companies)\b", re.IGNORECASE), 4096)
TICKETS = RowKind("tickets", re.compile(r"\btickets\b", re.IGNORECASE), 2048)
KINDS = (KEYS, TICKETS)

# Generations that this context's open transaction will change once it commits.
_changes_after_commit: ContextVar[tuple[SharedGeneration, ...]] = ContextVar(
    "kept_row_generation_changes", default=())


class SharedGeneration:
    """Eight bytes shared through a mapped file by every process that uses one database."""

    def __init__(self, path: str, owned_like: str | None = None) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < GENERATION_BYTES:
                os.ftruncate(fd, GENERATION_BYTES)
                _match_owner(fd, owned_like)
            self._shared = mmap.mmap(fd, GENERATION_BYTES)
        finally:
            os.close(fd)
        self.path = path

    def current(self) -> bytes:
        """The generation now."""
        return self._shared[:GENERATION_BYTES]

    def change(self) -> None:
        """Move to a new generation.

        A random value rather than a count: two processes changing it at once need no lock,
        since either value differs from every one a kept row holds. Only a repeat of a value
        would matter, and at 64 bits the random module (reseeded in each forked worker) makes
        one as unlikely as the OS would, without a system call on every write.
        """
        self._shared[:GENERATION_BYTES] = random.getrandbits(8 * GENERATION_BYTES).to_bytes(
            GENERATION_BYTES, "little")


def _match_owner(fd: int, owned_like: str | None) -> None:
    """Give a file root just made the owner of the database, as SQLite does with its -wal.

    Otherwise a command run as root before the service's first start would leave a file
    the service's own user could not open.
    """
    if owned_like is None or os.geteuid() != 0:
        return
    try:
        owner = os.stat(owned_like)
    except FileNotFoundError:
        return
    os.fchown(fd, owner.st_uid, owner.st_gid)


class KeptRows:
    """Rows by key, each kept with the generation it was read under.

    A kept row is handed to every request that asks for it: callers must not change it
    (or the lists and dicts in it).
    """

    def __init__(self, generation: SharedGeneration, most_kept: int) -> None:
        self.generation = generation
        self._most_kept = most_kept
        self._kept: dict[Hashable, tuple[bytes, tuple]] = {}

    def lookup(self, key: Hashable, read: Callable[[], tuple | None]) -> tuple | None:
        """The row for a key: the kept one while its generation holds, else `read()`."""
        generation = self.generation.current()  # before the read: see the module's docstring
        kept = self._kept.get(key)
        if kept is not None and kept[0] == generation:
            return kept[1]
        row = read()
        if row is not None:  # misses are not kept, so guessing cannot fill the memory
            if len(self._kept) >= self._most_kept:
                self._kept.clear()
            self._kept[key] = (generation, row)
        return row


def generation_path(engine: Engine, kind: RowKind) -> str | None:
    """Where a database's generation for a kind of row lives: beside its SQLite file."""
    if engine.dialect.name != "sqlite":
        return None
    database = engine.url.database
    if not database or database == ":memory:" or engine.url.query.get("mode") == "memory":
        return None
    return f"{os.path.abspath(database)}-{kind.name}"


def init_app(app: Flask, engine: Engine) -> None:
    """Give the app its kept rows if its database can share generations, and keep them current."""
    kept: dict[str, KeptRows | None] = {kind.name: None for kind in KINDS}
    app.extensions["ewt_kept_rows"] = kept
    watched: list[tuple[re.Pattern[str], SharedGeneration]] = []
    app.extensions["ewt_kept_rows_watched"] = watched
    for kind in KINDS:
        path = generation_path(engine, kind)
        if path is None:
            return
        generation = SharedGeneration(path, owned_like=engine.url.database)
        kept[kind.name] = KeptRows(generation, kind.most_kept)
        watched.append((kind.tables, generation))

    @event.listens_for(engine, "after_cursor_execute")
    def _note_writes(_conn, _cursor, statement: str, *_args: Any) -> None:
        for tables, generation in watched:
            if _writes_to(tables, statement):
                pending = _changes_after_commit.get()
                if generation not in pending:
                    _changes_after_commit.set(pending + (generation,))


@event.listens_for(Session, "after_commit")
def _change_generations(_session: Session) -> None:
    """After a commit that wrote a watched table, move that table's generation on."""
    pending = _changes_after_commit.get()
    if pending:
        _changes_after_commit.set(())
        for generation in pending:
            generation.change()


@event.listens_for(Session, "after_rollback")
def _forget_rolled_back_writes(_session: Session) -> None:
    """A rolled-back write changed nothing."""
    _changes_after_commit.set(())


@functools.lru_cache(maxsize=1024)
def _writes_to(tables: re.Pattern[str], statement: str) -> bool:
    """Whether a statement may write one of these tables (any statement but a SELECT naming one).

    Kept per statement: the same few compiled statements come back on every request, and
    searching a long INSERT for table names took longer than running it.
    """
    return statement.lstrip()[:6].upper() != "SELECT" and tables.search(statement) is not None


def note_committed_writes(statements: list[str]) -> None:
    """Move on the generations of the tables that statements run outside any Session wrote
    (services.database.DriverWrites), once their transaction has ended."""
    for tables, generation in current_app.extensions["ewt_kept_rows_watched"]:
        if any(_writes_to(tables, statement) for statement in statements):
            generation.change()


def kept_rows(kind: RowKind) -> KeptRows | None:
    """This app's kept rows of a kind, or None where every request reads its rows."""
    return current_app.extensions["ewt_kept_rows"][kind.name]


def kept_or_read(kind: RowKind, key: Hashable, read: Callable[[], tuple | None]) -> tuple | None:
    """The row for a key: kept between requests where the database allows, else `read()`."""
    kept = kept_rows(kind)
    return read() if kept is None else kept.lookup(key, read)


def forget_everything() -> None:
    """Move every generation on (the database file was replaced, as by a restore)."""
    for rows in current_app.extensions["ewt_kept_rows"].values():
        if rows is not None:
            rows.generation.change()
