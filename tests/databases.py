"""Where test databases live: a SQLite file per test by default, or a PostgreSQL database per
test (cloned from a migrated template) when TEST_DATABASE_URL is set, as `make test-scale` does.

Under pytest-xdist each worker has a template of its own and a Redis database of its own (the
worker's number), so one worker's set-up never drops or empties what another is using.
"""
from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

# "gw0", "gw1", … in a pytest-xdist worker (set before this is imported); empty otherwise.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
REDIS_DATABASES = 16  # Redis's default number of numbered databases


def worker_redis_url(url: str | None, worker: str = WORKER) -> str | None:
    """The Redis URL with the worker's own numbered database (unchanged outside xdist)."""
    if not url or not worker:
        return url
    number = int(worker.removeprefix("gw"))
    if number >= REDIS_DATABASES:
        raise RuntimeError(f"Redis has {REDIS_DATABASES} databases: run at most that many workers")
    base, _, _database = url.rpartition("/")
    return f"{base}/{number}"


POSTGRES_URL = os.environ.get("TEST_DATABASE_URL")
REDIS_URL = worker_redis_url(os.environ.get("TEST_REDIS_URL"))
TEMPLATE_NAME = f"ewt_test_template_{WORKER}" if WORKER else "ewt_test_template"
created_databases: list[str] = []


def admin_connection():
    """An autocommit connection to the PostgreSQL server's maintenance database."""
    import psycopg

    return psycopg.connect(POSTGRES_URL, autocommit=True)


def url_for(name: str) -> str:
    """The SQLAlchemy URL of a database on the test server."""
    from sqlalchemy.engine import make_url

    return make_url(POSTGRES_URL).set(drivername="postgresql+psycopg", database=name) \
        .render_as_string(hide_password=False)


def migrate(url: str, instance: Path) -> None:
    """Apply every migration to the database at url."""
    from flask_migrate import upgrade

    from app import create_app
    from models import db

    app = create_app({"TESTING": True, "INSTANCE_PATH": str(instance), "SQLALCHEMY_DATABASE_URI": url,
                      "SECRET_KEY": "t"})
    with app.app_context():
        upgrade()
        db.engine.dispose()


def private_database(tmp_path: Path, template) -> str:
    """A fresh migrated database for one test, as a SQLAlchemy URL."""
    if POSTGRES_URL:
        name = f"ewt_t_{uuid.uuid4().hex[:16]}"
        with admin_connection() as connection:
            connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        created_databases.append(name)
        return url_for(name)
    database = tmp_path / "tickets.sqlite3"
    if not database.exists():
        shutil.copyfile(template, database)
    return f"sqlite:///{database}"


def limiter_settings() -> dict:
    """Rate-limit storage for a test: under test-scale a Redis emptied for each test."""
    if REDIS_URL:
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        client.flushdb()  # this worker's database: its tests run one at a time
        client.close()
        return {"RATELIMIT_STORAGE_URI": REDIS_URL}
    return {}
