"""Demo companies from the CLI."""
from __future__ import annotations

import json

from models import Company, Reviewer, db


def test_demo_json_creates_independent_companies(app, runner, client):
    first = json.loads(runner.invoke(args=["demo", "--json"]).stdout)
    second = json.loads(runner.invoke(args=["demo", "--json"]).stdout)
    assert {"company_id", "api_key", "reviewer", "projects", "project_system", "capture_url"} <= set(first)
    assert client.get(first["capture_url"].removeprefix("http://127.0.0.1:5000")).status_code == 200
    assert {p["change_events"] for p in first["projects"]} == {True, False}
    assert set(first["project_system"]) == {"api_base", "oauth_base", "client_id", "client_secret",
                                            "company_id"}
    assert first["project_system"]["company_id"] != second["project_system"]["company_id"]
    assert first["company_id"] != second["company_id"]
    assert first["api_key"] != second["api_key"]
    assert first["reviewer"]["email"] != second["reviewer"]["email"]
    for info in (first, second):
        headers = {"Authorization": f"Bearer {info['api_key']}"}
        me = client.get("/v1/me", headers=headers).json
        assert me["company"]["id"] == info["company_id"]
        projects = client.get("/v1/projects", headers=headers).json["data"]
        assert {p["id"] for p in projects} == {p["id"] for p in info["projects"]}
    with app.app_context():
        assert db.session.query(Company).count() == 2
        reviewer = db.session.query(Reviewer).filter_by(email=first["reviewer"]["email"]).one()
        assert reviewer.password_hash.startswith("$argon2id$")
        assert first["reviewer"]["password"] not in reviewer.password_hash


def test_demo_only_if_empty_creates_one_company(app, runner):
    text = runner.invoke(args=["demo", "--only-if-empty"]).stdout
    assert "API key" in text and "Reviewer login" in text and "Capture link" in text
    again = runner.invoke(args=["demo", "--only-if-empty"]).stdout
    assert "existing data" in again
    with app.app_context():
        assert db.session.query(Company).count() == 1
