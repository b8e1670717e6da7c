"""The per-key limit: one bucket per key across all /v1 routes, with the clock controlled."""
from __future__ import annotations

import datetime as dt
import functools

import time_machine
from flask import request

from services.auth import login_manager
from services.ratelimit import limiter
from services.web import keep_hooks_off_api_paths

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
        # The API description needs no key and is not counted.
        assert client.get("/v1/openapi.json", headers=tenant.headers).status_code == 200


def test_limit_applies_to_other_authenticated_routes(app, client, tenant):
    app.config["API_RATE_LIMIT"] = "2 per minute"
    other_routes = [rule.rule for rule in app.url_map.iter_rules()
                    if rule.rule.startswith("/v1/") and "GET" in rule.methods
                    and "<" not in rule.rule and rule.rule not in ("/v1/me", "/v1/openapi.json")]
    with time_machine.travel(START, tick=False):
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200
        for path in other_routes:
            assert client.get(path, headers=tenant.headers).status_code == 429, path


class HookRecorder:
    """Request hooks of a stand-in extension that note which paths reach them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def before(self) -> None:
        self.calls.append(("before", request.path))

    def after(self, response):
        self.calls.append(("after", request.path))
        return response

    def teardown(self, _error) -> None:
        self.calls.append(("teardown", request.path))


def test_extension_hooks_stay_off_api_paths(app, client, tenant):
    """Flask-Limiter's and Flask-Login's hooks skip /v1 (its own rate check and no cookie
    session there) and still run for pages."""
    recorder = HookRecorder()
    before, after = app.before_request_funcs[None], app.after_request_funcs[None]
    teardown = app.teardown_request_funcs[None]
    # Bound methods and a partial, the two ways the real extensions register theirs.
    added = [(before, recorder.before), (after, functools.partial(HookRecorder.after, recorder)),
             (teardown, recorder.teardown)]
    for hooks, hook in added:
        hooks.append(hook)
    keep_hooks_off_api_paths(app, recorder)
    try:
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200
        assert client.get("/login").status_code == 200
    finally:
        for hooks, _hook in added:
            hooks.pop()
    assert recorder.calls == [("before", "/login"), ("after", "/login"), ("teardown", "/login")]

    def owner(hook):
        inner = hook.__wrapped__
        return inner.args[0] if isinstance(inner, functools.partial) else inner.__self__

    wrapped = [(kind, owner(hook)) for kind, hooks in (("before", before), ("after", after),
                                                       ("teardown", teardown))
               for hook in hooks if hasattr(hook, "__wrapped__")]
    assert sorted(wrapped, key=repr) == sorted(
        [("before", limiter), ("after", limiter), ("teardown", limiter), ("after", login_manager)],
        key=repr)
