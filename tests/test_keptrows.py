"""Rows kept between requests (services.keptrows): read once, forgotten when their table changes.

The generations they are kept under live beside a SQLite file, so these tests run on
SQLite; on PostgreSQL every request reads its rows (the last test holds that).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import update

from app import create_app
from models import ApiKey, db, utcnow
from services import companies, keys
from services import tickets as ticket_service
from services.database import driver_reads, write_transaction
from services.keptrows import KEYS, TICKETS, KeptRows, SharedGeneration, kept_rows
from tests.test_ticket_documents import ticket_body

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.live


def database_reads(app, monkeypatch, statement) -> list[dict]:
    """Record each read of one statement that reaches the database (its parameters, in order)."""
    reads = app.extensions["ewt_driver_reads"]
    seen: list[dict] = []
    read_first = reads.first

    def first(read_statement, params):
        if read_statement is statement:
            seen.append(dict(params))
        return read_first(read_statement, params)

    monkeypatch.setattr(reads, "first", first)
    return seen


def key_reads(app, monkeypatch) -> list[dict]:
    """Record each key lookup that reaches the database."""
    return database_reads(app, monkeypatch, keys._CALLER_QUERY)


def warm(client, tenant) -> None:
    """Use the key twice: the first request records its first use, which is a key write."""
    for _ in range(2):
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200


@pytest.mark.sqlite_only
def test_a_key_is_read_once_until_a_key_or_a_company_changes(app, client, tenant, monkeypatch):
    warm(client, tenant)
    seen = key_reads(app, monkeypatch)
    for _ in range(3):
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200
    assert seen == []

    with app.app_context():
        keys.issue_key(tenant.company_id, "a second key")
    assert client.get("/v1/me", headers=tenant.headers).status_code == 200
    assert client.get("/v1/me", headers=tenant.headers).status_code == 200
    assert len(seen) == 1

    with app.app_context():
        companies.create_company("Another company")
    assert client.get("/v1/me", headers=tenant.headers).status_code == 200
    assert len(seen) == 2

    with app.app_context(), pytest.raises(RuntimeError), write_transaction() as session:
        # a write that is rolled back
        session.execute(update(ApiKey).values(name="renamed, then rolled back"))
        raise RuntimeError("abandoned")
    assert client.get("/v1/me", headers=tenant.headers).status_code == 200
    assert len(seen) == 2


@pytest.mark.sqlite_only
def test_unknown_keys_are_read_every_time(app, client, monkeypatch):
    seen = key_reads(app, monkeypatch)
    unknown = {"Authorization": "Bearer ewt_" + "A" * 43}
    for _ in range(2):
        refused = client.get("/v1/me", headers=unknown)
        assert refused.status_code == 401
        assert refused.get_json()["error"]["code"] == "api_key_invalid"
    assert len(seen) == 2


@pytest.mark.sqlite_only
def test_a_key_revoked_by_another_process_is_refused_by_the_next_request(app, client, tenant):
    warm(client, tenant)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EWT_") and k != "DATABASE_URL"}
    env.update(EWT_INSTANCE_PATH=app.instance_path,
               EWT_SQLALCHEMY_DATABASE_URI=app.config["SQLALCHEMY_DATABASE_URI"],
               EWT_SECRET_KEY=app.config["SECRET_KEY"])
    revoked = subprocess.run([sys.executable, "-m", "flask", "--app", "app", "keys", "revoke",
                              tenant.prefix], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=120, check=False)
    assert revoked.returncode == 0, revoked.stderr
    refused = client.get("/v1/me", headers=tenant.headers)
    assert refused.status_code == 401
    assert refused.get_json()["error"]["code"] == "api_key_revoked"


@pytest.mark.sqlite_only
def test_the_generation_moves_after_the_commit_and_not_before(app, tenant):
    with app.app_context():
        generation = kept_rows(KEYS).generation
        before = generation.current()
        with write_transaction() as session:
            session.execute(update(ApiKey).where(ApiKey.prefix == tenant.prefix)
                            .values(revoked_at=utcnow()))
            session.flush()
            assert generation.current() == before
        assert generation.current() != before


@pytest.mark.sqlite_only
def test_a_key_revoked_while_it_was_being_read_is_not_kept_live(app, client, tenant):
    """The lookup notes the generation before it reads, so a revocation that commits between
    its read and its keeping leaves a row under a generation that no longer holds."""
    warm(client, tenant)
    with app.app_context():
        cache = kept_rows(KEYS)
        digest = db.session.scalar(db.select(ApiKey.digest).where(ApiKey.prefix == tenant.prefix))
        cache._kept.clear()

        def read_then_revoke():
            row = driver_reads().first(keys._CALLER_QUERY, {"digest": digest})
            keys.revoke_key(tenant.prefix)
            return row

        assert cache.lookup(digest, read_then_revoke)[5] is None  # read while still live
    refused = client.get("/v1/me", headers=tenant.headers)
    assert refused.status_code == 401
    assert refused.get_json()["error"]["code"] == "api_key_revoked"


@pytest.mark.sqlite_only
def test_a_ticket_is_read_once_until_a_ticket_changes(app, client, acme, monkeypatch):
    project = acme.project()["id"]
    ticket = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(project)).json
    seen = database_reads(app, monkeypatch, ticket_service._DOCUMENT_STATEMENT)
    answers = [client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers) for _ in range(3)]
    assert [a.get_data(as_text=True) for a in answers] == [answers[0].get_data(as_text=True)] * 3
    # The create answered from the row it wrote; the first read keeps the row, the rest use it.
    assert seen == [{"id": ticket["id"], "company_id": acme.company_id}]

    rejected = client.post(f"/v1/tickets/{ticket['id']}/reject", headers=acme.headers)
    assert rejected.status_code == 200 and rejected.json["status"] == "rejected"
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["status"] == "rejected"

    def mine() -> list[dict]:
        return [params for params in seen if params["id"] == ticket["id"]]

    read_after_reject = len(mine())
    assert read_after_reject >= 1

    client.post("/v1/tickets", headers=acme.headers, json=ticket_body(project))  # any ticket write
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).status_code == 200
    assert len(mine()) == read_after_reject + 1


@pytest.mark.sqlite_only
def test_a_ticket_changed_by_another_process_reads_fresh_at_once(app, client, acme):
    """A second app on the same files (as a second gunicorn worker is) maps its own view of
    the generation file; its commit reaches the first app's kept rows."""
    project = acme.project()["id"]
    ticket = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(project)).json
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["status"] == "submitted"
    other_worker = create_app(dict(app.config, INSTANCE_PATH=app.instance_path))
    rejected = other_worker.test_client().post(f"/v1/tickets/{ticket['id']}/reject",
                                               headers=acme.headers)
    assert rejected.status_code == 200, rejected.json
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["status"] == "rejected"


def test_a_kept_ticket_is_still_missing_for_another_company(app, client, acme, rival):
    """Written, so its document needs no project lookup that another company would fail."""
    ticket = client.post("/v1/tickets", headers=acme.headers,
                         json=ticket_body(acme.project()["id"])).json
    approved = client.post(f"/v1/tickets/{ticket['id']}/approve", headers=acme.headers)
    assert approved.status_code == 200 and approved.json["status"] == "written", approved.json
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).status_code == 200
    foreign = client.get(f"/v1/tickets/{ticket['id']}", headers=rival.headers)
    assert foreign.status_code == 404 and foreign.json["error"]["code"] == "ticket_not_found"


def test_a_generation_is_shared_through_its_file_and_the_cache_stays_bounded(tmp_path):
    mine, theirs = (SharedGeneration(str(tmp_path / "db-keys")),
                    SharedGeneration(str(tmp_path / "db-keys")))
    assert mine.current() == theirs.current()
    before = mine.current()
    theirs.change()
    assert mine.current() == theirs.current() != before

    cache = KeptRows(mine, most_kept=4096)
    for n in range(5000):
        assert cache.lookup(f"digest-{n}", lambda n=n: (n,)) == (n,)
    assert len(cache._kept) <= 4096
    assert cache.lookup("digest-4999", lambda: pytest.fail("kept rows are not read again")) == (4999,)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file away")
def test_a_generation_file_made_by_root_belongs_to_the_databases_owner(tmp_path):
    database = tmp_path / "tickets.sqlite3"
    database.write_bytes(b"")
    os.chown(database, 4321, 4321)
    SharedGeneration(str(tmp_path / "tickets.sqlite3-keys"), owned_like=str(database))
    made = (tmp_path / "tickets.sqlite3-keys").stat()
    assert (made.st_uid, made.st_gid) == (4321, 4321)


def test_only_a_sqlite_file_gets_kept_rows(app):
    with app.app_context():
        on_sqlite = db.engine.dialect.name == "sqlite"
        assert (kept_rows(KEYS) is not None) == (kept_rows(TICKETS) is not None) == on_sqlite
