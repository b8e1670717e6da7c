"""Database engine tuning, the write-transaction helper, and driver reads and writes for the hottest statements.

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
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from flask import Flask, current_app
from sqlalchemy import bindparam, event, exc
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from sqlalchemy.sql import Insert, Select

from models import db
from services import keptrows

_write_intent: ContextVar[bool] = ContextVar("write_intent", default=False)


def normalise_database_url(url: str) -> str:
    """Map plain postgres URLs to the psycopg 3 driver that the project installs."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def configure_engine(app: Flask) -> None:
    """Attach the SQLite pragmas and the BEGIN hook to this app's engine, its driver reads
    and its kept rows."""
    with app.app_context():
        engine = db.engine
    app.extensions["ewt_driver_reads"] = DriverReads(engine)
    app.extensions["ewt_driver_writes"] = DriverWrites(engine)
    keptrows.init_app(app, engine)
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
    with _queued_writer(session.get_bind()), session.begin():
        yield session


@contextlib.contextmanager
def _queued_writer(engine: Engine) -> Iterator[None]:
    """Hold this process's place as the writer to a SQLite file (see _sqlite_writer_lock)
    and mark the context as writing, so that BEGIN takes the write lock at once."""
    lock = _sqlite_writer_lock(engine)
    # Bounded, so a writer can never hang here: past the busy timeout SQLite decides as before.
    held = lock is not None and lock.acquire(timeout=current_app.config["SQLITE_BUSY_TIMEOUT_MS"] / 1000)
    token = _write_intent.set(True)
    try:
        yield
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


def _sqlite_writer_lock(engine: Engine) -> FifoLock | None:
    """This process's lock for writers to one SQLite file (None for other databases).

    SQLite lets one writer in at a time; the others poll with growing sleeps (up to 100 ms
    each), so under load a few threads of the same process lose the race again and again
    and wait a second or more. Queueing this process's writers on a lock first hands the
    database to the next one as soon as it is free; other processes still meet SQLite's own
    lock and busy timeout.
    """
    if engine.dialect.name != "sqlite":
        return None
    key = str(engine.url)
    with _writer_locks_guard:
        return _writer_locks.setdefault(key, FifoLock())


class _OnTheDriver:
    """What driver reads and driver writes share: the engine, statements compiled once per
    dialect, and the driver's errors and broken connections handled as the ORM handles them."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._dialect = engine.dialect
        self._prepared: dict[Hashable, tuple[Any, Any]] = {}

    @property
    def dialect_name(self) -> str:
        """The engine's dialect: 'sqlite' or 'postgresql'."""
        return self._dialect.name

    def _compiled_once(self, statement: Any, key: Hashable, prepare: Callable[[], Any]) -> Any:
        """The plan kept under key, made by prepare() the first time."""
        known = self._prepared.get(key)
        if known is None:
            # The statement is kept beside its plan so that its id cannot be reused by another.
            known = self._prepared[key] = (statement, prepare())
        return known[1]

    def _driver_error(self, sql: str, error: Exception) -> exc.DBAPIError:
        """SQLAlchemy's exception for a driver error (IntegrityError, OperationalError, ...)."""
        return exc.DBAPIError.instance(sql, None, error, self._dialect.loaded_dbapi.Error,
                                       dialect=self._dialect)

    def _roll_back(self, pooled: Any) -> None:
        """End a pooled connection's transaction; one that cannot even do that leaves the pool."""
        try:
            pooled.rollback()
        except self._dialect.loaded_dbapi.Error as error:
            pooled.invalidate(error)


def _bindings(compiled: Any) -> tuple[tuple[str, ...] | None, dict[str, Any]]:
    """A compiled statement's parameter order (None for named parameters) and the values
    written into the statement itself (`status == "written"`), which travel with it."""
    positions = tuple(compiled.positiontup) if compiled.positional else None
    return positions, {name: bind.value for name, bind in compiled.binds.items() if not bind.required}


@dataclass(frozen=True)
class _Prepared:
    """A SELECT compiled once for one dialect, with its columns' result processors."""

    sql: str
    positions: tuple[str, ...] | None
    processors: tuple[Callable[[Any], Any] | None, ...]
    fixed: dict[str, Any]


class DriverReads(_OnTheDriver):
    """The hottest reads, run on the driver's connection instead of through a Session.

    Every /v1 request looks up its API key, and the commonest reads are one kept document
    or a page of them. Through a Session each such statement cost about 200 µs of
    bookkeeping (session, execution context, result objects, teardown) around a query the
    driver runs in about 12 µs (bench/fixes.md, round 5). A driver read checks a connection
    out of the engine's own pool (so pool size, pre-ping, fork safety and `dispose()` all
    apply as for the ORM), runs a SELECT compiled once for the engine's dialect, converts
    each column with its type's own result processor (the values the ORM would give) and
    returns the connection. Only SELECTs with plain bound values come here, built once
    (module constants or cached builders: each is compiled once and kept); writes go
    through `write_transaction`, or for a new ticket through `DriverWrites`.

    `first` and `rows` run one SELECT on its own, which needs no explicit transaction: on
    SQLite an autocommit SELECT reads one state of the file from its first row to its last,
    and PostgreSQL's driver opens the transaction itself. `snapshot` runs several SELECTs
    in one explicit read transaction. Leaving out BEGIN and ROLLBACK matters more than
    their microseconds suggest: Python's sqlite3 module lets go of the GIL around each of
    them (five times for the pair), and under load each let-go hands the interpreter to
    another thread and costs a context switch or two (bench/fixes.md, round 6).

    A driver read is its own transaction. Use one only where the request has no Session
    read open whose older view it could contradict: at the start of a request (the key),
    after a write committed, or for a whole answer. Found the hard way: a client_ref lookup
    done this way saw a ticket that the request's older Session view did not, and the
    request answered 404 for a ticket it had just found.
    """

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self._begin = "BEGIN" if engine.dialect.name == "sqlite" else None

    def _prepare(self, statement: Select) -> _Prepared:
        """Compile a statement for this dialect once, and check it suits a driver read."""
        return self._compiled_once(statement, id(statement), lambda: self._compile(statement))

    def _compile(self, statement: Select) -> _Prepared:
        """Compile a SELECT, refusing bound values that would need converting."""
        dialect = self._dialect
        compiled = statement.compile(dialect=dialect)
        for name, bind in compiled.binds.items():
            if bind.type.dialect_impl(dialect).bind_processor(dialect) is not None:
                raise TypeError(f"bound value {name!r} needs conversion; use the session")
        processors = tuple(column.type.dialect_impl(dialect).result_processor(dialect, None)
                           for column in statement.selected_columns)
        positions, fixed = _bindings(compiled)
        return _Prepared(sql=str(compiled), positions=positions, processors=processors,
                         fixed=fixed)

    def first(self, statement: Select, params: Mapping[str, Any]) -> tuple | None:
        """The first row of one SELECT read on its own, or None."""
        with self._pooled_reader(explicit_transaction=False) as reader:
            return reader.first(statement, params)

    def rows(self, statement: Select, params: Mapping[str, Any]) -> list[tuple]:
        """Every row of one SELECT read on its own."""
        with self._pooled_reader(explicit_transaction=False) as reader:
            return reader.rows(statement, params)

    def snapshot(self) -> contextlib.AbstractContextManager[DriverReader]:
        """Run the block's reads in one read transaction on one pooled connection."""
        return self._pooled_reader(explicit_transaction=True)

    @contextlib.contextmanager
    def _pooled_reader(self, *, explicit_transaction: bool) -> Iterator[DriverReader]:
        """A reader on a connection checked out of the engine's pool, returned after the block."""
        pooled = self._engine.raw_connection()
        try:
            yield DriverReader(self, pooled, explicit_transaction=explicit_transaction)
        except exc.DBAPIError as error:
            # A connection the server dropped must not go back to the pool for the next read.
            if self._dialect.is_disconnect(error.orig, pooled.dbapi_connection, None):
                pooled.invalidate(error.orig)
            raise
        finally:
            if pooled.dbapi_connection is not None:
                self._roll_back(pooled)
            pooled.close()

    def _execute(self, reader: DriverReader, statement: Select,
                 params: Mapping[str, Any]) -> list[tuple]:
        """Run one prepared SELECT in a reader's transaction and convert its rows."""
        prepared = self._prepare(statement)
        if prepared.fixed:
            params = {**prepared.fixed, **params}
        values: Any = params if prepared.positions is None else [
            params[name] for name in prepared.positions]
        cursor = None
        try:
            cursor = reader.connection.cursor()
            if reader.explicit_transaction and not reader.started and self._begin:
                cursor.execute(self._begin)
            reader.started = True
            cursor.execute(prepared.sql, values)
            rows = cursor.fetchall()
        except self._dialect.loaded_dbapi.Error as error:
            raise self._driver_error(prepared.sql, error) from error
        finally:
            if cursor is not None:
                cursor.close()
        processors = prepared.processors
        if any(processors):
            rows = [tuple(value if convert is None else convert(value)
                          for convert, value in zip(processors, row)) for row in rows]
        return rows


class DriverReader:
    """The reads of one snapshot: every row, or the first, of prepared SELECTs."""

    def __init__(self, reads: DriverReads, connection: Any, *, explicit_transaction: bool) -> None:
        self._reads = reads
        self.connection = connection
        self.explicit_transaction = explicit_transaction
        self.started = False

    def rows(self, statement: Select, params: Mapping[str, Any]) -> list[tuple]:
        """Every row of a SELECT, as tuples of converted values."""
        return self._reads._execute(self, statement, params)

    def first(self, statement: Select, params: Mapping[str, Any]) -> tuple | None:
        """The first row of a SELECT, or None."""
        rows = self._reads._execute(self, statement, params)
        return rows[0] if rows else None


@dataclass(frozen=True)
class _PreparedWrite:
    """An INSERT compiled once for one dialect and one set of columns, with their bind processors."""

    sql: str
    positions: tuple[str, ...] | None
    processors: tuple[tuple[str, Callable[[Any], Any]], ...]
    fixed: dict[str, Any]


class DriverWrites(_OnTheDriver):
    """The hottest write, a new ticket, run on the driver's connection instead of a Session.

    Through the ORM's unit of work, and still through Core, most of a new ticket's write
    was bookkeeping around statements the driver runs in a fraction of the time, all of
    it inside the write lock that every other writer waits on (bench/fixes.md, round 7,
    items 23 and 24). A driver write queues on the same writer lock as
    `write_transaction`, checks a connection out of the engine's pool, and runs INSERTs
    compiled once for the engine's dialect (each column's value converted by its type's
    own bind processor, as Core would) between BEGIN IMMEDIATE and COMMIT. Errors come
    back as SQLAlchemy's exceptions (an IntegrityError stays an IntegrityError). No
    Session sees these statements, so the transaction moves the kept rows' generations
    itself (services.keptrows.note_committed_writes). `write` runs a caller's inserts and,
    on SQLite, commits them together with those of callers queued at the same time
    (GroupCommit); `transaction` gives a block a transaction of its own.

    A request's open Session transaction is ended first, as `write_transaction` does, so
    what the request reads after the write sees it.
    """

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        sqlite = engine.dialect.name == "sqlite"
        self._begin = "BEGIN IMMEDIATE" if sqlite else None
        # SQLite writes one transaction at a time anyway, so grouping costs no concurrency
        # there; PostgreSQL runs transactions side by side and groups its own commits.
        self._group = GroupCommit(self._locked_transaction) if sqlite else None

    def _prepare(self, statement: Insert, keys: tuple[str, ...]) -> _PreparedWrite:
        """Compile an INSERT (or upsert) for these columns once."""
        return self._compiled_once(statement, (id(statement), keys),
                                   lambda: self._compile(statement, keys))

    def _prepare_rows(self, statement: Insert, keys: tuple[str, ...], count: int) -> _PreparedWrite:
        """Compile an INSERT (or upsert) of `count` rows in one VALUES list, once; the values
        of row n are bound as `<column>__<n>`."""
        return self._compiled_once(statement, (id(statement), keys, count),
                                   lambda: self._compile_rows(statement, keys, count))

    def _compile(self, statement: Insert, keys: tuple[str, ...]) -> _PreparedWrite:
        """Compile an INSERT for these columns, with each value's bind processor."""
        compiled = statement.compile(dialect=self._dialect, column_keys=list(keys))
        missing = [name for name, bind in compiled.binds.items() if bind.required and name not in keys]
        if missing:
            raise TypeError(f"no value for {missing}")
        return self._prepared_write(compiled)

    def _compile_rows(self, statement: Insert, keys: tuple[str, ...], count: int) -> _PreparedWrite:
        """Compile an INSERT of several rows, each value a typed parameter of its own."""
        columns = statement.table.c
        rows = [{key: bindparam(f"{key}__{n}", type_=columns[key].type) for key in keys}
                for n in range(count)]
        return self._prepared_write(statement.values(rows).compile(dialect=self._dialect))

    def _prepared_write(self, compiled: Any) -> _PreparedWrite:
        """A compiled INSERT's text, parameter order, bind processors and fixed values."""
        dialect = self._dialect
        processors = tuple(
            (name, processor) for name, bind in compiled.binds.items()
            if (processor := bind.type.dialect_impl(dialect).bind_processor(dialect)) is not None)
        positions, fixed = _bindings(compiled)
        return _PreparedWrite(sql=str(compiled), positions=positions, processors=processors,
                              fixed=fixed)

    def write(self, inserts: Sequence[Inserts]) -> None:
        """Run these inserts in one transaction and return once it has committed.

        On SQLite the transaction may also hold other callers' inserts (GroupCommit);
        an error raised here is this caller's own, and none of its rows is stored.
        """
        self._leave_request_transaction()
        if self._group is not None:
            self._group.write(inserts)
            return
        with self._locked_transaction() as writer:
            writer.insert_each(inserts)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[DriverWriter]:
        """Run the block's inserts in one write transaction; commit on success, else roll back."""
        self._leave_request_transaction()
        with self._locked_transaction() as writer:
            yield writer

    @staticmethod
    def _leave_request_transaction() -> None:
        """End the request's Session transaction, so its later reads see the write; refuse
        to start inside a write transaction, whose writer's place this write would wait for."""
        if _write_intent.get():
            raise RuntimeError("a driver write cannot run inside another write transaction")
        # Only a Session the request already has can hold a transaction; making one here
        # just to ask would cost a Session and its teardown on every new ticket.
        if db.session.registry.has() and db.session().in_transaction():
            db.session().commit()

    @contextlib.contextmanager
    def _locked_transaction(self) -> Iterator[DriverWriter]:
        """One write transaction holding this process's writer's place, on a pooled connection."""
        # The writer's place first, then a connection, in the order write_transaction takes
        # them: writers waiting for the place while holding connections could leave the
        # writer that has it without a connection to write on.
        with _queued_writer(self._engine):
            pooled = self._engine.raw_connection()
            writer = DriverWriter(self, pooled.driver_connection)
            try:
                if self._begin:
                    writer.run(self._begin, ())
                yield writer
                writer.run_commit(pooled)
            except BaseException:
                self._roll_back(pooled)
                raise
            finally:
                pooled.close()
                if writer.statements:
                    # Also after a failure: a COMMIT that failed may still have landed, and
                    # moving a generation on only costs the next read.
                    keptrows.note_committed_writes(writer.statements)


# Bound variables per statement that every SQLite build accepts (newer ones take 32,766).
_SQLITE_OLDEST_VARIABLE_LIMIT = 999


class DriverWriter:
    """The statements of one driver write transaction."""

    def __init__(self, writes: DriverWrites, connection: Any) -> None:
        self._writes = writes
        self.connection = connection
        self.statements: list[str] = []

    def insert(self, statement: Insert, rows: list[Mapping[str, Any]]) -> None:
        """Run an INSERT (or upsert) for rows that all name the same columns."""
        if not rows:
            return
        prepared = self._writes._prepare(statement, tuple(rows[0]))
        values = [self._values(prepared, row) for row in rows]
        if len(values) == 1:
            self.run(prepared.sql, values[0])
        else:
            self.run(prepared.sql, values, many=True)

    def insert_each(self, inserts: Sequence[Inserts]) -> None:
        """Run one caller's inserts in order."""
        for statement, rows in inserts:
            self.insert(statement, rows)

    def insert_together(self, statement: Insert, rows: list[Mapping[str, Any]]) -> None:
        """Run an INSERT (or upsert) for rows that all name the same columns as one statement
        with many VALUES rows (in chunks SQLite's oldest variable limit allows).

        Python's sqlite3 module lets go of the GIL several times per statement it runs, as
        many for a statement of many rows as for one row. SQLite applies the rows of one
        statement in order, so an upsert whose rows share a key adds them up; PostgreSQL
        refuses that, which is one reason only SQLite's GroupCommit comes here.
        """
        keys = tuple(rows[0]) if rows else ()
        if len(rows) < 2 or self._writes._prepare(statement, keys).fixed:
            self.insert(statement, rows)
            return
        per_statement = max(1, _SQLITE_OLDEST_VARIABLE_LIMIT // max(1, len(keys)))
        for start in range(0, len(rows), per_statement):
            chunk = rows[start:start + per_statement]
            prepared = self._writes._prepare_rows(statement, keys, len(chunk))
            numbered = {f"{key}__{n}": row[key] for n, row in enumerate(chunk) for key in keys}
            self.run(prepared.sql, self._values(prepared, numbered))

    @staticmethod
    def _values(prepared: _PreparedWrite, row: Mapping[str, Any]) -> Any:
        """A row's values converted for the driver, in the statement's order."""
        converted = {**prepared.fixed, **row}
        for name, processor in prepared.processors:
            converted[name] = processor(converted[name])
        if prepared.positions is None:
            return converted
        return [converted[name] for name in prepared.positions]

    def run(self, sql: str, values: Any, *, many: bool = False) -> None:
        """Run one statement on the driver's connection."""
        self.statements.append(sql)
        cursor = None
        try:
            cursor = self.connection.cursor()
            if many:
                cursor.executemany(sql, values)
            else:
                cursor.execute(sql, values)
        except self._writes._dialect.loaded_dbapi.Error as error:
            raise self._writes._driver_error(sql, error) from error
        finally:
            if cursor is not None:
                cursor.close()

    def run_commit(self, pooled: Any) -> None:
        """Commit the transaction."""
        try:
            pooled.commit()
        except self._writes._dialect.loaded_dbapi.Error as error:
            raise self._writes._driver_error("COMMIT", error) from error


# What one caller writes: (INSERT or upsert, rows that all name the same columns), in order.
Inserts = tuple[Insert, list[Mapping[str, Any]]]


class _QueuedWrite:
    """One caller's inserts waiting for a batch, and what became of them."""

    __slots__ = ("error", "inserts", "leads", "turn", "written")

    def __init__(self, inserts: Sequence[Inserts]) -> None:
        self.inserts = inserts
        self.turn = threading.Lock()  # released when the caller may go on: to lead, or done
        self.turn.acquire()
        self.leads = False
        self.written = False
        self.error: BaseException | None = None

    def outcome(self) -> None:
        """Return if the rows were committed, else raise what stopped them."""
        if self.error is not None:
            raise self.error
        if not self.written:
            raise RuntimeError("the transaction holding these rows was interrupted")


class GroupCommit:
    """Inserts from several threads written in one SQLite transaction, behind one COMMIT.

    SQLite lets one writer in at a time. Creates arriving while another is being written
    used to wait for the writer's place one by one, and each then paid its own BEGIN, its
    own COMMIT with its fsync, and a pooled connection of its own. Here the first caller
    leads: it writes its rows in a transaction of their own. Callers arriving meanwhile
    queue; when the leader's COMMIT is done, the first of them leads the next batch, made of
    everything queued by then, and the others wait for that batch. No caller returns before
    the COMMIT that holds its rows. A batch runs one statement per kind of row, with every
    caller's rows in its VALUES list (DriverWriter.insert_together). Under a load of creates
    this took the worker CPU per create down by about a tenth (bench/fixes.md, round 11).

    A caller's error stays its own. If a statement fails, the batch is rolled back and each
    caller's rows are written again in a transaction of their own, in the order they came,
    so one caller's refused row (a client_ref already taken) refuses nobody else. A BEGIN or
    a COMMIT that fails fails everyone in the batch, as it would have failed each of them.
    """

    def __init__(self, transaction: Callable[[], contextlib.AbstractContextManager[DriverWriter]]
                 ) -> None:
        self._transaction = transaction
        self._guard = threading.Lock()
        self._queue: list[_QueuedWrite] = []
        self._leading = False

    def queued(self) -> int:
        """How many callers wait for the next batch."""
        with self._guard:
            return len(self._queue)

    def write(self, inserts: Sequence[Inserts]) -> None:
        """Write these inserts in the next batch; return once it has committed."""
        mine = _QueuedWrite(inserts)
        with self._guard:
            self._queue.append(mine)
            mine.leads = not self._leading
            self._leading = True
        if not mine.leads:
            mine.turn.acquire()
            if not mine.leads:
                mine.outcome()
                return
        with self._guard:
            batch, self._queue = self._queue, []
        try:
            self._write_batch(batch)
        finally:
            with self._guard:
                if self._queue:
                    self._queue[0].leads = True
                    self._queue[0].turn.release()
                else:
                    self._leading = False
            for other in batch:
                if other is not mine:
                    other.turn.release()
        mine.outcome()

    def _write_batch(self, batch: list[_QueuedWrite]) -> None:
        """Write a batch in one transaction, or each caller's rows alone if a statement fails."""
        in_statements = False
        try:
            with self._transaction() as writer:
                in_statements = True
                for statement, rows in self._rows_by_statement(batch):
                    writer.insert_together(statement, rows)
                in_statements = False
        except Exception as error:  # noqa: BLE001 - raised again in each caller it belongs to
            if not in_statements or len(batch) == 1:
                for queued in batch:
                    queued.error = error
                return
        else:
            for queued in batch:
                queued.written = True
            return
        for queued in batch:
            try:
                with self._transaction() as writer:
                    writer.insert_each(queued.inserts)
            except Exception as error:  # noqa: BLE001 - raised again in its caller
                queued.error = error
            else:
                queued.written = True

    @staticmethod
    def _rows_by_statement(batch: list[_QueuedWrite]) -> list[Inserts]:
        """The batch's rows gathered per statement and set of columns, in the order first
        met: every caller's tickets in one INSERT, then every caller's counts in one upsert."""
        gathered: dict[tuple[int, tuple[str, ...]], Inserts] = {}
        for queued in batch:
            for statement, rows in queued.inserts:
                if rows:
                    gathered.setdefault((id(statement), tuple(rows[0])), (statement, []))[1].extend(rows)
        return list(gathered.values())


def driver_writes() -> DriverWrites:
    """This app's driver writes (see DriverWrites)."""
    return current_app.extensions["ewt_driver_writes"]


def driver_reads() -> DriverReads:
    """This app's driver reads (see DriverReads)."""
    return current_app.extensions["ewt_driver_reads"]
