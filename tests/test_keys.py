"""API keys: the CLI, both headers, every kind of refusal, last use, storage."""
from __future__ import annotations

import datetime as dt
import re

import time_machine

from services.accounts.keys import KEY_PATTERN, key_digest
from tests.conftest import make_tenant


def test_cli_creates_a_key_once_and_it_works(app, runner, client, tenant):
    result = runner.invoke(args=["keys", "create", "--company", str(tenant.company_id),
                                 "--name", "accounting sync"])
    assert result.exit_code == 0, result.output
    secret = result.stdout.strip().splitlines()[0]
    assert KEY_PATTERN.match(secret)
    response = client.get("/v1/me", headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 200
    assert response.json["key"]["name"] == "accounting sync"
    assert response.json["key"]["prefix"] == secret[:12]
    listing = runner.invoke(args=["keys", "list"])
    assert secret[:12] in listing.output
    assert secret not in listing.output


def test_cli_refuses_unknown_company(runner):
    result = runner.invoke(args=["keys", "create", "--company", "999", "--name", "x"])
    assert result.exit_code != 0
    assert "no company with id 999" in result.output


def test_only_digest_and_prefix_are_stored(app, tenant):
    from sqlalchemy import text

    from models import db

    with app.app_context():
        rows = [tuple(row) for row in db.session.execute(text("SELECT * FROM api_keys"))]
    assert len(rows) == 1
    stored = " ".join(str(value) for value in rows[0])
    assert tenant.key not in stored and tenant.key[12:] not in stored
    assert tenant.prefix in stored and key_digest(tenant.key) in stored


def test_bearer_and_x_api_key_both_accepted(client, tenant):
    for headers in ({"Authorization": f"Bearer {tenant.key}"}, {"X-API-Key": tenant.key},
                    {"Authorization": f"bearer   {tenant.key}"}):
        response = client.get("/v1/me", headers=headers)
        assert response.status_code == 200, headers
        assert response.json["company"]["id"] == tenant.company_id


def _assert_401(response, code):
    assert response.status_code == 401
    assert response.json["error"]["code"] == code
    assert response.json["error"]["message"]


def test_missing_malformed_unknown_revoked_keys_get_401(client, runner, tenant):
    _assert_401(client.get("/v1/me"), "api_key_missing")
    _assert_401(client.get("/v1/me", headers={"Authorization": "Basic dXNlcjpwYXNz"}), "api_key_malformed")
    _assert_401(client.get("/v1/me", headers={"Authorization": "Bearer"}), "api_key_malformed")
    _assert_401(client.get("/v1/me", headers={"X-API-Key": "not-a-key"}), "api_key_malformed")
    unknown = "ewt_" + "A" * 43
    _assert_401(client.get("/v1/me", headers={"X-API-Key": unknown}), "api_key_invalid")
    assert runner.invoke(args=["keys", "revoke", tenant.prefix]).exit_code == 0
    _assert_401(client.get("/v1/me", headers=tenant.headers), "api_key_revoked")
    again = runner.invoke(args=["keys", "revoke", tenant.prefix])
    assert again.exit_code == 0  # revoking twice is harmless
    assert "revoked" in runner.invoke(args=["keys", "list"]).output


def test_revoking_unknown_prefix_fails_cleanly(runner):
    result = runner.invoke(args=["keys", "revoke", "ewt_nothing"])
    assert result.exit_code != 0
    assert "no such key" in result.output


def test_last_used_at_recorded_and_throttled(app, client, tenant):
    from models import ApiKey, db

    def last_used():
        with app.app_context():
            return db.session.get(ApiKey, 1).last_used_at

    assert last_used() is None
    start = dt.datetime(2026, 5, 4, 7, 0, tzinfo=dt.timezone.utc)
    with time_machine.travel(start, tick=False) as clock:
        client.get("/v1/me", headers=tenant.headers)
        assert last_used() == start
        clock.shift(30)
        client.get("/v1/me", headers=tenant.headers)
        assert last_used() == start          # within the interval: no extra write
        clock.shift(31)
        client.get("/v1/me", headers=tenant.headers)
        assert last_used() == start + dt.timedelta(seconds=61)


def test_keys_list_filters_by_company(app, runner, tenant):
    other = make_tenant(app, "Second Co", "second")
    output = runner.invoke(args=["keys", "list", "--company", str(other.company_id)]).output
    assert other.prefix in output and tenant.prefix not in output
    assert re.search(r"last_used=never", output)


def test_reviewer_cli_create_and_reset_password(app, runner, tenant):
    from services.accounts.auth import check_login

    created = runner.invoke(args=["reviewers", "create", "--company", str(tenant.company_id),
                                  "--email", "PM@Example.com"], input="first password 1\nfirst password 1\n")
    assert created.exit_code == 0, created.output
    assert "created reviewer pm@example.com" in created.output
    with app.app_context():
        assert check_login("pm@example.com", "first password 1") is not None
    duplicate = runner.invoke(args=["reviewers", "create", "--company", str(tenant.company_id),
                                    "--email", "pm@example.com"], input="another one 22\nanother one 22\n")
    assert duplicate.exit_code != 0 and "already exists" in duplicate.output
    short = runner.invoke(args=["reviewers", "create", "--company", str(tenant.company_id),
                                "--email", "x@example.com"], input="short\nshort\n")
    assert short.exit_code != 0
    reset = runner.invoke(args=["reviewers", "reset-password", "--email", "pm@example.com"],
                          input="second password 2\nsecond password 2\n")
    assert reset.exit_code == 0, reset.output
    with app.app_context():
        assert check_login("pm@example.com", "first password 1") is None
        assert check_login("pm@example.com", "second password 2") is not None


def test_a_key_revoked_by_a_raw_sql_write_is_refused_on_the_next_request(app, client, tenant):
    """A revocation written outside the service (a SQL shell, a script) holds at once."""
    from sqlalchemy import create_engine, text

    for _ in range(2):  # the first request also records the key's last use
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200
    script = create_engine(app.config["SQLALCHEMY_DATABASE_URI"])  # another program's engine
    with script.begin() as connection:
        connection.execute(text("UPDATE api_keys SET revoked_at = CURRENT_TIMESTAMP "
                                "WHERE prefix = :prefix"), {"prefix": tenant.prefix})
    script.dispose()
    refused = client.get("/v1/me", headers=tenant.headers)
    assert refused.status_code == 401
    assert refused.json["error"]["code"] == "api_key_revoked"
