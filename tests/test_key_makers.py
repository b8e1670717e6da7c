"""Keys name the reviewer who made them and their last use; disabling the reviewer revokes them."""
from __future__ import annotations

import datetime as dt
import re

import time_machine

from services.accounts import reviewers
from tests.test_review_pages import PASSWORD, sign_in


def _make_key(browser, name: str) -> str:
    page = browser.post("/keys", data={"name": name}).get_data(as_text=True)
    return re.search(r'<code id="new-key">([^<]+)</code>', page).group(1)


def test_keys_name_their_maker_and_last_use_on_the_page_and_in_me(app, acme):
    with app.app_context():
        reviewers.create_reviewer(acme.company_id, "pm@acme.example", PASSWORD, is_admin=True)
    pm = sign_in(app, app.test_client(), acme, email="pm@acme.example")
    client = app.test_client()
    secret = _make_key(pm, "accounting sync")
    before = client.get("/v1/me", headers={"X-API-Key": secret})
    assert before.status_code == 200
    key = before.json["key"]
    assert key["name"] == "accounting sync" and key["created_by"] == "pm@acme.example"
    assert key["last_used_at"] is not None and key["created_at"] is not None
    # A key made on the command line names no one.
    assert client.get("/v1/me", headers=acme.headers).json["key"]["created_by"] is None
    row = next(r for r in pm.get("/keys").get_data(as_text=True).split("<tr")
               if secret[:12] in r)
    assert "pm@acme.example" in row and "never" not in row
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2)
    with time_machine.travel(later, tick=False):
        again = client.get("/v1/me", headers={"X-API-Key": secret}).json["key"]
    assert again["last_used_at"] > key["last_used_at"]


def test_disabling_a_reviewer_says_which_keys_then_revokes_them(app, acme):
    with app.app_context():
        reviewers.create_reviewer(acme.company_id, "boss@acme.example", PASSWORD, is_admin=True)
        worker_id = reviewers.create_reviewer(acme.company_id, "pm@acme.example", PASSWORD,
                                              is_admin=True).id
    pm = sign_in(app, app.test_client(), acme, email="pm@acme.example")
    boss = sign_in(app, app.test_client(), acme, email="boss@acme.example")
    made = _make_key(pm, "field sync")
    kept = _make_key(boss, "boss sync")
    client = app.test_client()
    assert client.get("/v1/me", headers={"X-API-Key": made}).status_code == 200
    page = boss.get("/reviewers").get_data(as_text=True)
    row = next(r for r in page.split("<tr") if "pm@acme.example" in r)
    assert f"field sync (<code>{made[:12]}</code>)" in row  # the page says which, before
    assert f"these keys stop working: field sync ({made[:12]})" in row
    done = boss.post(f"/reviewers/{worker_id}/disable").get_data(as_text=True)
    assert f"the keys they made no longer work: field sync ({made[:12]})" in done
    refused = client.get("/v1/me", headers={"X-API-Key": made})
    assert refused.status_code == 401 and refused.json["error"]["code"] == "api_key_revoked"
    assert client.get("/v1/me", headers={"X-API-Key": kept}).status_code == 200
    assert client.get("/v1/me", headers=acme.headers).status_code == 200
    # Enabling the reviewer again does not bring the key back.
    assert boss.post(f"/reviewers/{worker_id}/enable").status_code == 200
    assert client.get("/v1/me", headers={"X-API-Key": made}).status_code == 401


def test_disabling_on_the_command_line_revokes_the_keys_too(app, acme, runner):
    with app.app_context():
        reviewers.create_reviewer(acme.company_id, "pm@acme.example", PASSWORD, is_admin=True)
    pm = sign_in(app, app.test_client(), acme, email="pm@acme.example")
    made = _make_key(pm, "field sync")
    assert runner.invoke(args=["reviewers", "disable", "--email", "pm@acme.example"]).exit_code == 0
    assert app.test_client().get("/v1/me", headers={"X-API-Key": made}).status_code == 401


def test_only_a_company_admin_makes_keys(app, acme):
    """A key acts for the whole company: a reviewer who is not an admin is refused, and the
    page offers them no form."""
    with app.app_context():
        reviewers.create_reviewer(acme.company_id, "pm@acme.example", PASSWORD)
    pm = sign_in(app, app.test_client(), acme, email="pm@acme.example")
    page = pm.get("/keys").get_data(as_text=True)
    assert 'name="name"' not in page and "only a company admin can make one" in page
    refused = pm.post("/keys", data={"name": "mine"})
    assert refused.status_code == 403 and '<code id="new-key">' not in refused.get_data(as_text=True)
    with app.app_context():
        from models import ApiKey, db
        assert db.session.query(ApiKey).filter_by(name="mine").count() == 0
