"""Callers of API keys kept in memory between requests, forgotten the moment any key changes.

Every /v1 request looks up its key. On SQLite that lookup cost a third of a small answer
under load (bench/fixes.md, round 6): Python's sqlite3 module lets go of the GIL around
every step and every column, and each let-go hands the interpreter to another busy thread.

A kept caller is used only while the *key generation* is still the one it was read under.
The generation is eight bytes in a file beside the database (`<database>-keys`), mapped
into memory by every process that opens that database: the server's threads, any other
worker, the CLI. Reading it is a memory read, with no system call. After every commit that
wrote to the api_keys or companies table, from any of those processes, the generation
changes, so a key revoked anywhere is refused by the very next request. It changes after
the commit, never before: a request that read the key just before the commit kept it under
the old generation, which no longer matches.

Only a SQLite file gets a generation, because every process that opens one runs on the same
machine. App servers sharing PostgreSQL cannot share a mapped file, so there each request
reads its key; PostgreSQL's driver takes a row in one go, so that read costs less there.
"""
from __future__ import annotations

import mmap
import os
import re
import secrets
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from flask import Flask, current_app
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

# A statement other than a SELECT that names either table may change what a kept caller says.
_KEY_TABLES = re.compile(r"\b(api_keys|companies)\b", re.IGNORECASE)
_MAX_KEPT = 4096
GENERATION_BYTES = 8

# Generations that this context's open transaction will change once it commits.
_changes_after_commit: ContextVar[tuple[KeyGeneration, ...]] = ContextVar(
    "key_generation_changes", default=())


class KeyGeneration:
    """Eight bytes shared through a mapped file by every process that uses one database."""

    def __init__(self, path: str) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < GENERATION_BYTES:
                os.ftruncate(fd, GENERATION_BYTES)
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
        since either value differs from every one a kept caller holds.
        """
        self._shared[:GENERATION_BYTES] = secrets.token_bytes(GENERATION_BYTES)


class CallerCache:
    """Key lookups by digest, each kept with the generation it was read under."""

    def __init__(self, generation: KeyGeneration) -> None:
        self.generation = generation
        self._kept: dict[str, tuple[bytes, tuple]] = {}

    def lookup(self, digest: str, read: Callable[[], tuple | None]) -> tuple | None:
        """The row for a key digest: the kept one while its generation holds, else `read()`."""
        generation = self.generation.current()  # before the read: see the module's docstring
        kept = self._kept.get(digest)
        if kept is not None and kept[0] == generation:
            return kept[1]
        row = read()
        if row is not None:  # unknown keys are not kept, so guessing cannot fill the memory
            if len(self._kept) >= _MAX_KEPT:
                self._kept.clear()
            self._kept[digest] = (generation, row)
        return row


def generation_path(engine: Engine) -> str | None:
    """Where a database's key generation lives: beside its SQLite file (None otherwise)."""
    if engine.dialect.name != "sqlite":
        return None
    database = engine.url.database
    if not database or database == ":memory:" or engine.url.query.get("mode") == "memory":
        return None
    return os.path.abspath(database) + "-keys"


def init_app(app: Flask, engine: Engine) -> None:
    """Give the app a caller cache if its database can share a key generation, and keep it current."""
    path = generation_path(engine)
    app.extensions["ewt_caller_cache"] = None
    if path is None:
        return
    generation = KeyGeneration(path)
    app.extensions["ewt_caller_cache"] = CallerCache(generation)

    @event.listens_for(engine, "after_cursor_execute")
    def _note_key_writes(_conn, _cursor, statement: str, *_args: Any) -> None:
        if _KEY_TABLES.search(statement) and statement.lstrip()[:6].upper() != "SELECT":
            pending = _changes_after_commit.get()
            if generation not in pending:
                _changes_after_commit.set(pending + (generation,))


@event.listens_for(Session, "after_commit")
def _change_generations(_session: Session) -> None:
    """After a commit that wrote keys or companies, move their databases' generations on."""
    pending = _changes_after_commit.get()
    if pending:
        _changes_after_commit.set(())
        for generation in pending:
            generation.change()


@event.listens_for(Session, "after_rollback")
def _forget_rolled_back_writes(_session: Session) -> None:
    """A rolled-back write changed nothing."""
    _changes_after_commit.set(())


def caller_cache() -> CallerCache | None:
    """This app's caller cache, or None where every request reads its key."""
    return current_app.extensions["ewt_caller_cache"]
