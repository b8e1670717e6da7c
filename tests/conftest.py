"""Shared fixtures: an app with a fresh migrated database per test, clients and helpers."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app import create_app
from tests.databases import limiter_settings, private_database

pytest_plugins = ["tests.plugins.parallel", "tests.plugins.databases", "tests.plugins.sandbox",
                  "tests.plugins.browser", "tests.plugins.network", "tests.plugins.storage",
                  "tests.plugins.holding"]


def app_config(tmp_path: Path, template, **overrides) -> dict:
    """Test configuration on a private copy of the migrated database."""
    config = {
        "TESTING": True,
        "INSTANCE_PATH": str(tmp_path / "instance"),
        "SQLALCHEMY_DATABASE_URI": private_database(tmp_path, template),
        "SECRET_KEY": "test-secret-not-used-outside-tests",
        "PASSWORD_HASH_PROFILE": "cheapest",
        "SQLITE_SYNCHRONOUS": "NORMAL",
        **limiter_settings(),
    }
    config.update(overrides)
    return config


@pytest.fixture
def client(app) -> FlaskClient:
    """A test client for the app."""
    return app.test_client()


@pytest.fixture
def runner(app):
    """A CLI runner for the app's commands."""
    return app.test_cli_runner()


@dataclass
class Tenant:
    """A company with one working API key, as tests use it."""

    company_id: int
    key: str
    prefix: str

    @property
    def headers(self) -> dict[str, str]:
        """Authorization headers for this tenant's key."""
        return {"Authorization": f"Bearer {self.key}"}


def make_tenant(app: Flask, name: str = "Acme Mechanical", key_name: str = "tests") -> Tenant:
    """Create a company and a key for it."""
    from services.accounts import companies, keys

    with app.app_context():
        company = companies.create_company(name)
        issued = keys.issue_key(company.id, key_name)
        return Tenant(company_id=company.id, key=issued.secret, prefix=issued.record.prefix)


@pytest.fixture
def tenant(app) -> Tenant:
    """A company with an API key."""
    return make_tenant(app)


@pytest.fixture
def other_tenant(app) -> Tenant:
    """A second, unrelated company with its own key."""
    return make_tenant(app, name="Other Electric", key_name="other")



@dataclass
class ConnectedTenant(Tenant):
    """A tenant connected to its own fresh company in the live sandbox."""

    projects: list[dict]
    remote_company_id: int
    client_id: str
    client_secret: str

    def project(self, change_events: bool = True) -> dict:
        """A seeded project with or without the change-event tool."""
        found = next(p for p in self.projects if p["change_events"] is change_events)
        return dict(found, id=str(found["id"]))


@pytest.fixture
def app(tmp_path, migrated_template, sandbox_server, store_config, monkeypatch) -> Flask:
    """A fresh app on its own migrated database and file store, pointed at the live sandbox,
    whose Procore clients wait for Procore's rate limit by moving the sandbox company's clock
    on instead of sleeping."""
    from services.project_system import ProcoreClient, connections
    from tests.plugins.sandbox import SkippingClock

    def paced_on_the_sandbox(*args, **kwargs) -> ProcoreClient:
        client = ProcoreClient(*args, **kwargs)
        clock = SkippingClock(str(sandbox_server.db_path), client.company_id)
        client.clock, client.sleep = clock, clock.sleep
        return client

    monkeypatch.setattr(connections, "ProcoreClient", paced_on_the_sandbox)
    application = create_app(app_config(
        tmp_path, migrated_template, SANDBOX_URL=sandbox_server.url,
        SANDBOX_DB_PATH=str(sandbox_server.db_path), PHOTO_DIR=str(tmp_path / "photos"),
        **store_config))
    yield application
    with application.app_context():
        from models import db
        from services.project_system import projects

        # a page's read still under way would hand its connection back to a let-go pool
        projects.wait_for_background_reads(30)
        db.engine.dispose()


def connect_tenant(app: Flask, name: str = "Acme Mechanical", key_name: str = "tests") -> ConnectedTenant:
    """Create a company with a key and connect it to a fresh sandbox company."""
    from services import demo

    tenant = make_tenant(app, name, key_name)
    with app.app_context():
        seeded = demo.connect_embedded_sandbox(tenant.company_id, name=name)
    return ConnectedTenant(company_id=tenant.company_id, key=tenant.key, prefix=tenant.prefix,
                           projects=seeded["projects"], remote_company_id=seeded["company_id"],
                           client_id=seeded["client_id"], client_secret=seeded["client_secret"])


@pytest.fixture
def acme(app) -> ConnectedTenant:
    """A connected company."""
    return connect_tenant(app)


@pytest.fixture
def rival(app) -> ConnectedTenant:
    """A second connected company, to prove tenancy."""
    return connect_tenant(app, "Rival Drywall", "rival")
