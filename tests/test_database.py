"""SQLite tuning, write transactions and migrations."""
from __future__ import annotations

import threading

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from models import Company, db
from services.platform.database import write_transaction


@pytest.mark.sqlite_only
def test_sqlite_runs_with_wal_foreign_keys_and_busy_timeout(app):
    with app.app_context():
        assert db.session.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert db.session.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert db.session.execute(text("PRAGMA busy_timeout")).scalar() == 30_000
        assert db.session.execute(text("PRAGMA soft_heap_limit")).scalar() == 8 * 1024 * 1024


def test_the_pool_hands_out_the_connection_put_back_last(app):
    # At a steady load one connection then serves request after request with its cache warm.
    with app.app_context():
        held = [db.engine.connect() for _ in range(3)]
        put_back_last = held[-1].connection.dbapi_connection
        for connection in held:
            connection.close()
        served = set()
        for _ in range(4):
            with db.engine.connect() as connection:
                served.add(id(connection.connection.dbapi_connection))
    assert served == {id(put_back_last)}


@pytest.mark.sqlite_only
def test_write_transaction_takes_the_write_lock_at_begin(app):
    # BEGIN goes straight to the driver, so the statements are traced by SQLite itself.
    statements: list[str] = []
    traced = []
    with app.app_context():
        from sqlalchemy import event

        def trace(dbapi_connection, _record, _proxy) -> None:
            dbapi_connection.set_trace_callback(statements.append)
            traced.append(dbapi_connection)

        event.listen(db.engine, "checkout", trace)
        try:
            db.session.execute(text("SELECT 1"))
            with write_transaction() as session:
                session.add(Company(name="Lock Test"))
        finally:
            event.remove(db.engine, "checkout", trace)
            db.session.remove()
            for dbapi_connection in traced:
                dbapi_connection.set_trace_callback(None)
    assert statements.index("BEGIN") < statements.index("SELECT 1")
    assert "BEGIN IMMEDIATE" in statements
    assert statements.index("BEGIN IMMEDIATE") < next(
        i for i, s in enumerate(statements) if s.startswith("INSERT INTO companies"))


def test_concurrent_writers_never_see_database_locked(app):
    errors: list[Exception] = []

    def writer(n: int) -> None:
        with app.app_context():
            try:
                for i in range(15):
                    with write_transaction() as session:
                        # A read before the write inside one transaction is the
                        # pattern that fails with deferred transactions.
                        session.execute(text("SELECT count(*) FROM companies")).scalar()
                        session.add(Company(name=f"writer {n}-{i}"))
            except Exception as error:  # noqa: BLE001 - collected for the assertion
                errors.append(error)
            finally:
                db.session.remove()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with app.app_context():
        assert db.session.query(Company).count() == 8 * 15


# SQLite's reflection cannot read an index on an expression (lower(reference) of authorizations),
# so the comparison skips it there, saying so; the next test checks that index on every database.
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
def test_migrations_match_the_models(app):
    with app.app_context(), db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, db.metadata)
    assert differences == []


def test_the_database_keeps_authorization_references_unique_whatever_their_case(app, acme):
    """The migrated database itself refuses a second reference differing in case alone, and takes
    the same reference on another project."""
    from sqlalchemy.exc import IntegrityError

    insert = text("INSERT INTO authorizations (company_id, project_id, reference, kind, amount, "
                  "created_at) VALUES (:company, :project, :reference, 'directive', '1', "
                  "CURRENT_TIMESTAMP)")
    with app.app_context(), db.engine.connect() as connection:
        row = {"company": acme.company_id, "project": "1"}
        connection.execute(insert, dict(row, reference="CD-040"))
        connection.execute(insert, dict(row, project="2", reference="cd-040"))
        with pytest.raises(IntegrityError):
            connection.execute(insert, dict(row, reference="cd-040"))


def test_the_tickets_table_carries_no_triggers(app):
    """Nothing is kept beside a ticket by the database itself: a list counts its rows, so a
    table rebuilt by a migration cannot leave a count behind."""
    with app.app_context(), db.engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            query = ("SELECT tgname FROM pg_trigger "
                     "WHERE tgrelid = 'tickets'::regclass AND NOT tgisinternal")
        else:
            query = "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'tickets'"
        assert list(connection.execute(text(query))) == []
        assert "ticket_counts" not in inspect(connection).get_table_names()
