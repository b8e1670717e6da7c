"""Callers kept between requests (services.keycache): read once, forgotten when any key changes.

The generation they are kept under lives beside a SQLite file, so these tests run on SQLite;
on PostgreSQL every request reads its key (the last test holds that).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import update

from models import ApiKey, db, utcnow
from services import companies, keys
from services.database import driver_reads, write_transaction
from services.keycache import CallerCache, KeyGeneration, caller_cache

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.live


def key_reads(app, monkeypatch) -> list[str]:
    """Record each key lookup that reaches the database (the digests, in order)."""
    reads = app.extensions["ewt_driver_reads"]
    seen: list[str] = []
    read_first = reads.first

    def first(statement, params):
        if statement is keys._CALLER_QUERY:
            seen.append(params["digest"])
        return read_first(statement, params)

    monkeypatch.setattr(reads, "first", first)
    return seen


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

    with app.app_context(), pytest.raises(RuntimeError):  # a write that is rolled back
        with write_transaction() as session:
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
                             timeout=120)
    assert revoked.returncode == 0, revoked.stderr
    refused = client.get("/v1/me", headers=tenant.headers)
    assert refused.status_code == 401
    assert refused.get_json()["error"]["code"] == "api_key_revoked"


@pytest.mark.sqlite_only
def test_the_generation_moves_after_the_commit_and_not_before(app, tenant):
    with app.app_context():
        generation = caller_cache().generation
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
        cache = caller_cache()
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


def test_a_generation_is_shared_through_its_file_and_the_cache_stays_bounded(tmp_path):
    mine, theirs = KeyGeneration(str(tmp_path / "db-keys")), KeyGeneration(str(tmp_path / "db-keys"))
    assert mine.current() == theirs.current()
    before = mine.current()
    theirs.change()
    assert mine.current() == theirs.current() != before

    cache = CallerCache(mine)
    for n in range(5000):
        assert cache.lookup(f"digest-{n}", lambda n=n: (n,)) == (n,)
    assert len(cache._kept) <= 4096
    assert cache.lookup("digest-4999", lambda: pytest.fail("kept rows are not read again")) == (4999,)


def test_only_a_sqlite_file_gets_a_caller_cache(app):
    with app.app_context():
        on_sqlite = db.engine.dialect.name == "sqlite"
        assert (caller_cache() is not None) == on_sqlite
