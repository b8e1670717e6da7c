"""Test-database fixtures and the PostgreSQL switch of `make test-scale` (see tests/databases.py)."""
from __future__ import annotations

import pytest

from tests.databases import (
    POSTGRES_URL,
    REDIS_URL,
    TEMPLATE_NAME,
    admin_connection,
    created_databases,
    migrate,
    url_for,
)
from tests.plugins.parallel import hold_apart


def pytest_collection_modifyitems(config, items) -> None:
    """On PostgreSQL, leave out the checks of SQLite's own files and pragmas (make test runs them)."""
    if not POSTGRES_URL:
        return
    marker = pytest.mark.skip(reason="checks SQLite files or pragmas; runs in make test")
    for item in items:
        if item.get_closest_marker("sqlite_only"):
            item.add_marker(marker)


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory):
    """A migrated database that each test copies: a SQLite file, or a PostgreSQL template."""
    folder = tmp_path_factory.mktemp("template")
    hold_apart("the temporary folder", tmp_path_factory.getbasetemp())
    if REDIS_URL:
        hold_apart("the Redis database", REDIS_URL)
    if POSTGRES_URL:
        hold_apart("the PostgreSQL template", TEMPLATE_NAME)
        with admin_connection() as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE_NAME}" WITH (FORCE)')
            connection.execute(f'CREATE DATABASE "{TEMPLATE_NAME}"')
        migrate(url_for(TEMPLATE_NAME), folder / "instance")
        yield TEMPLATE_NAME
        with admin_connection() as connection:
            for name in created_databases + [TEMPLATE_NAME]:
                connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        return
    path = folder / "template.sqlite3"
    hold_apart("the SQLite template", path)
    migrate(f"sqlite:///{path}", folder / "instance")
    yield path


