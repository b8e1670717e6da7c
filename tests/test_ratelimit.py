"""The per-key limit: one bucket per key across all /v1 routes, with the clock controlled."""
from __future__ import annotations

import datetime as dt

import time_machine

from app import create_app
from tests.conftest import make_tenant

START = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.timezone.utc)


def test_121st_request_in_a_minute_gets_429_with_retry_after(client, tenant):
    with time_machine.travel(START, tick=False) as clock:
        for _ in range(120):
            assert client.get("/v1/me", headers=tenant.headers).status_code == 200
            clock.shift(0.1)
        refused = client.get("/v1/me", headers=tenant.headers)
        assert refused.status_code == 429
        assert refused.json["error"]["code"] == "rate_limited"
        assert "120 per 1 minute" in refused.json["error"]["message"]
        retry_after = int(refused.headers["Retry-After"])
        assert 0 < retry_after <= 60
        # The first request leaves the window 60 s after it was made.
        clock.shift(60 - 12 + 0.05)
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200


def test_bucket_is_per_key_and_shared_across_routes(app, client, tenant):
    app.config["API_RATE_LIMIT"] = "3 per minute"
    second = make_tenant(app, "Second Co", "second")
    with time_machine.travel(START, tick=False):
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200
        assert client.get("/v1/me", headers={"X-API-Key": tenant.key}).status_code == 200
        assert client.get("/v1/nope", headers=tenant.headers).status_code == 404  # not a route
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200
        assert client.get("/v1/me", headers=tenant.headers).status_code == 429
        assert client.get("/v1/me", headers=second.headers).status_code == 200
        # The API description (and its page for people) needs no key and is not counted.
        assert client.get("/v1/openapi.json", headers=tenant.headers).status_code == 200
        assert client.get("/v1/docs", headers=tenant.headers).status_code == 200


def test_limit_applies_to_other_authenticated_routes(app, client, tenant):
    app.config["API_RATE_LIMIT"] = "2 per minute"
    other_routes = [rule.rule for rule in app.url_map.iter_rules()
                    if rule.rule.startswith("/v1/") and "GET" in rule.methods
                    and "<" not in rule.rule
                    and rule.rule not in ("/v1/me", "/v1/openapi.json", "/v1/docs")]
    with time_machine.travel(START, tick=False):
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200
        for path in other_routes:
            assert client.get(path, headers=tenant.headers).status_code == 429, path


def test_rate_limit_disabled_in_configuration_is_honoured(tmp_path, migrated_template):
    """An app built with RATELIMIT_ENABLED=False never answers 429 on /v1."""
    from tests.conftest import app_config

    app = create_app(app_config(tmp_path, migrated_template, RATELIMIT_ENABLED=False,
                                API_RATE_LIMIT="1 per minute"))
    tenant = make_tenant(app)
    client = app.test_client()
    with time_machine.travel(START, tick=False):
        for _ in range(3):
            assert client.get("/v1/me", headers=tenant.headers).status_code == 200
    with app.app_context():
        from models import db
        db.engine.dispose()


def test_every_keyed_answer_states_the_bucket(app, client, tenant):
    """Successes and refusals alike carry RateLimit-Limit, -Remaining and -Reset, as documented."""
    app.config["API_RATE_LIMIT"] = "3 per minute"
    with time_machine.travel(START, tick=False):
        first = client.get("/v1/me", headers=tenant.headers)
        assert first.status_code == 200
        assert first.headers["RateLimit-Limit"] == "3"
        assert first.headers["RateLimit-Remaining"] == "2"
        reset = int(first.headers["RateLimit-Reset"])
        assert int(START.timestamp()) + 60 <= reset <= int(START.timestamp()) + 61
        missing = client.get("/v1/tickets/nope", headers=tenant.headers)
        assert missing.status_code == 404
        assert missing.headers["RateLimit-Remaining"] == "1"
        unknown_key = client.get("/v1/me", headers={"X-API-Key": "ewt_" + "x" * 43})
        assert unknown_key.status_code == 401
        assert unknown_key.headers["RateLimit-Limit"] == "3"
        client.get("/v1/me", headers=tenant.headers)
        refused = client.get("/v1/me", headers=tenant.headers)
        assert refused.status_code == 429
        assert refused.headers["RateLimit-Remaining"] == "0"
        assert "Retry-After" in refused.headers
        assert "Retry-After" not in first.headers
    document = client.get("/v1/openapi.json").json
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if not operation["security"]:
                continue
            for status, response in operation["responses"].items():
                assert {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} <= \
                    set(response.get("headers", {})), (path, method, status)
