"""Driver reads (services.database.DriverReads): the hot /v1 reads outside the ORM session.

They must give the values the session gives, see every commit at once (a revoked key is
refused on the next request), and never hand out a connection that was dropped.
"""
from __future__ import annotations

import datetime as dt
import os

import pytest
from sqlalchemy import bindparam, event, exc, select, text, update

from models import ApiKey, Ticket, db
from services import keys
from services.database import driver_reads, write_transaction
from services.tickets import _DOCUMENT_STATEMENT, _page_statement, _total_statement
from tests.databases import POSTGRES_URL
from tests.test_ticket_documents import ticket_body

pytestmark = pytest.mark.live


def _session_rows(statement, params) -> list[tuple]:
    """The same statement run through the ORM session, as tuples."""
    return [tuple(row) for row in db.session.execute(statement, params).all()]


def test_hot_statements_give_the_values_the_session_gives(app, client, acme):
    """Key (with its datetimes), one ticket (with JSON columns), a count and a page agree."""
    project = acme.project()["id"]
    created = client.post("/v1/tickets", json=ticket_body(project), headers=acme.headers)
    assert created.status_code == 200, created.get_json()
    ticket_id = created.get_json()["id"]
    with app.app_context():
        with write_transaction() as session:
            session.execute(update(ApiKey).values(
                last_used_at=dt.datetime(2026, 11, 21, 19, 5, 7, 250000, tzinfo=dt.UTC),
                revoked_at=dt.datetime(2026, 11, 22, 1, 2, 3, tzinfo=dt.UTC)))
        digest = db.session.scalar(select(ApiKey.digest).where(ApiKey.prefix == acme.prefix))
        values = {"digest": digest, "id": ticket_id, "company_id": acme.company_id,
                  "status": "submitted", "project_id": project, "limit": 50, "offset": 0}
        statements = [keys._CALLER_QUERY, _DOCUMENT_STATEMENT,
                      _total_statement(True, True), _page_statement(True, True),
                      _page_statement(False, False)]
        with driver_reads().snapshot() as reader:
            driver = [reader.rows(statement, values) for statement in statements]
        session = [_session_rows(statement, values) for statement in statements]
    assert driver == session
    key_row = driver[0][0]
    assert key_row[-2] == dt.datetime(2026, 11, 22, 1, 2, 3, tzinfo=dt.UTC)
    assert key_row[-1].tzinfo is not None and key_row[-1].microsecond == 250000
    document = driver[1][0]
    assert isinstance(document[3], list) and document[3][0]["kind"] == "labor"
    assert [row[0] for row in driver[3]] == [ticket_id]


def test_a_revoked_key_is_refused_on_the_very_next_request(client, runner, tenant):
    """A revocation needs no wait, whether the key's caller was kept (services.keycache) or not."""
    for _ in range(3):
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200
    assert runner.invoke(args=["keys", "revoke", tenant.prefix]).exit_code == 0
    refused = client.get("/v1/me", headers=tenant.headers)
    assert refused.status_code == 401
    assert refused.get_json()["error"]["code"] == "api_key_revoked"


def test_a_new_ticket_is_listed_by_the_next_request(client, acme):
    """Each read starts a new transaction on its connection, so it sees the latest commit."""
    project = acme.project()["id"]
    assert client.get("/v1/tickets", headers=acme.headers).get_json()["total"] == 0
    for expected in (1, 2):
        body = ticket_body(project, client_ref=f"next-ticket-{expected}")
        assert client.post("/v1/tickets", json=body, headers=acme.headers).status_code == 200
        listed = client.get("/v1/tickets", headers=acme.headers).get_json()
        assert listed["total"] == expected and len(listed["data"]) == expected


@pytest.mark.sqlite_only
def test_a_snapshot_reads_one_state_of_the_database(app, tenant):
    """A count and a page read in one snapshot agree even if a write lands between them."""
    with app.app_context():
        reads = driver_reads()
        count = select(ApiKey.id).where(ApiKey.company_id == bindparam("company_id"))
        with reads.snapshot() as reader:
            before = reader.rows(count, {"company_id": tenant.company_id})
            keys.issue_key(tenant.company_id, "issued between the two reads")
            during = reader.rows(count, {"company_id": tenant.company_id})
        with reads.snapshot() as reader:
            after = reader.rows(count, {"company_id": tenant.company_id})
    assert before == during and len(after) == len(before) + 1


@pytest.mark.sqlite_only
def test_one_statement_reads_without_an_explicit_transaction(app, tenant):
    """BEGIN and ROLLBACK are left out of a lone SELECT (each lets go of the GIL on SQLite);
    a snapshot of several statements still reads them in one transaction."""
    statements: list[str] = []

    def trace(dbapi_connection, _record) -> None:
        dbapi_connection.set_trace_callback(statements.append)

    with app.app_context():
        reads = driver_reads()
        db.engine.dispose()  # every connection from here on is a new one, traced
        event.listen(db.engine, "connect", trace)
        count = select(ApiKey.id).where(ApiKey.company_id == bindparam("company_id"))
        assert len(reads.rows(count, {"company_id": tenant.company_id})) == 1
        assert reads.first(count, {"company_id": tenant.company_id}) is not None
        lone = list(statements)
        with reads.snapshot() as reader:
            reader.rows(count, {"company_id": tenant.company_id})
            reader.rows(count, {"company_id": tenant.company_id})
        event.remove(db.engine, "connect", trace)
    statements = [s for s in statements if not s.startswith("PRAGMA")]
    lone = [s for s in lone if not s.startswith("PRAGMA")]
    assert len(lone) == 2 and all(s.lstrip().upper().startswith("SELECT") for s in lone), lone
    assert [s.split()[0].upper() for s in statements[2:]] == ["BEGIN", "SELECT", "SELECT", "ROLLBACK"]


@pytest.mark.skipif(not POSTGRES_URL, reason="a server ending a connection; runs in make test-scale")
def test_a_connection_the_server_ended_is_not_used_again(app, client, tenant):
    """PostgreSQL ending pooled connections (a restart, an idle timeout) costs no request."""
    import psycopg

    assert client.get("/v1/me", headers=tenant.headers).status_code == 200
    with app.app_context():
        database = db.engine.url.database
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        ended = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = %s AND pid <> pg_backend_pid()", (database,)).fetchall()
    assert ended and all(row[0] for row in ended)
    for _ in range(3):
        answer = client.get("/v1/me", headers=tenant.headers)
        assert answer.status_code == 200, answer.get_json()
        assert answer.get_json()["key"]["prefix"] == tenant.prefix


def test_a_dropped_connection_is_not_handed_out_again(app):
    """A read that finds its connection gone invalidates it, and the next read gets a new one."""
    probe = select(ApiKey.id).where(ApiKey.id == bindparam("id"))
    with app.app_context():
        reads = driver_reads()
        with pytest.raises(exc.DBAPIError) as raised:
            with reads.snapshot() as reader:
                dropped = reader.connection.dbapi_connection
                dropped.close()
                reader.rows(probe, {"id": 1})
        assert raised.value.orig is not None
        with reads.snapshot() as reader:
            assert reader.connection.dbapi_connection is not dropped
            assert reader.rows(probe, {"id": 1}) == []


def test_a_failed_statement_raises_sqlalchemys_error_and_keeps_the_connection(app):
    """Driver errors arrive as SQLAlchemy's exceptions, like every other database error."""
    missing = select(text("id")).select_from(text("no_such_table")).where(
        text("id = :id").bindparams(bindparam("id")))
    with app.app_context():
        reads = driver_reads()
        with pytest.raises(exc.DBAPIError) as raised:
            with reads.snapshot() as reader:
                kept = reader.connection.dbapi_connection
                reader.rows(missing, {"id": 1})
        assert "no_such_table" in str(raised.value)
        # Not a dropped connection: it went back to the pool open.
        cursor = kept.cursor()
        cursor.execute("SELECT 1")
        assert cursor.fetchall() == [(1,)]
        kept.rollback()
        with reads.snapshot() as reader:
            assert reader.first(select(ApiKey.id).where(ApiKey.id == bindparam("id")),
                                {"id": 1}) is None


def test_statements_whose_values_need_conversion_are_refused(app):
    """A bound datetime needs the type's conversion, which only the session applies."""
    needs_conversion = select(Ticket.id).where(Ticket.captured_at > bindparam(
        "since", type_=Ticket.__table__.c.captured_at.type))
    with app.app_context():
        with pytest.raises(TypeError, match="since"):
            with driver_reads().snapshot() as reader:
                reader.rows(needs_conversion, {"since": dt.datetime.now(dt.UTC)})


def test_reads_go_on_after_the_engine_is_disposed(app, client, tenant):
    """A restore disposes the engine; the next reads open connections to the file now there."""
    assert client.get("/v1/me", headers=tenant.headers).status_code == 200
    with app.app_context():
        db.engine.dispose()
    assert client.get("/v1/me", headers=tenant.headers).status_code == 200


def test_a_forked_process_reads_on_its_own_connections(app, client, tenant):
    """After a fork (gunicorn's workers) the child reads, and the parent's reads still work."""
    assert client.get("/v1/me", headers=tenant.headers).status_code == 200
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status
        status = 1
        try:
            answer = client.get("/v1/me", headers=tenant.headers)
            status = 0 if answer.status_code == 200 else 3
        finally:
            os._exit(status)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    for _ in range(3):
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200
