"""Where test databases live: a SQLite file per test by default, or a PostgreSQL database per
test (cloned from a migrated template) when TEST_DATABASE_URL is set, as `make test-scale` does.
"""
from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path


POSTGRES_URL = os.environ.get("TEST_DATABASE_URL")
REDIS_URL = os.environ.get("TEST_REDIS_URL")
TEMPLATE_NAME = "ewt_test_template"
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
        client.flushdb()  # tests run one at a time, so each starts with no counts
        client.close()
        return {"RATELIMIT_STORAGE_URI": REDIS_URL}
    return {}
