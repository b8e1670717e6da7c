"""The per-key limit: one bucket per key across all /v1 routes, with the clock controlled."""
from __future__ import annotations

import datetime as dt
import functools
import random
import time

import pytest
import time_machine
from flask import request
from limits import parse
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from services.auth import login_manager
from services.ratelimit import LOCAL_WINDOW, LocalMovingWindow, limiter
from services.web import page_hooks, registered_by
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


def test_memory_storage_counts_v1_in_the_apps_own_window(app, client, tenant):
    """On memory:// (the default) the tests above exercise LocalMovingWindow; on Redis, limits."""
    window = app.extensions.get(LOCAL_WINDOW)
    if not str(app.config["RATELIMIT_STORAGE_URI"]).startswith("memory://"):
        assert window is None
        return
    assert isinstance(window, LocalMovingWindow)
    with time_machine.travel(START, tick=False):
        client.get("/v1/me", headers=tenant.headers)
    assert window.bucket_count() == 1


@pytest.mark.parametrize("seed", range(5))
def test_local_window_decides_exactly_as_limits_moving_window(seed):
    """Random bursts and pauses over several buckets and limits: every decision, and every
    wait, matches limits' own moving window on its memory storage."""
    rng = random.Random(seed)
    ours, theirs = LocalMovingWindow(), MovingWindowRateLimiter(MemoryStorage())
    items = [parse("5 per 10 seconds"), parse("3 per minute")]
    with time_machine.travel(START, tick=False) as clock:
        decisions = []
        for _ in range(600):
            clock.shift(rng.choice([0, 0, 0.5, 1, 2, 7, 30]) + rng.random() / 10)
            item, bucket = rng.choice(items), rng.choice(["key:a", "key:b", "ip:127.0.0.1"])
            wait_s = ours.hit(f"{item}/{bucket}", item.amount, item.get_expiry())
            allowed = theirs.hit(item, bucket)
            assert (wait_s is None) == allowed
            if not allowed:
                reset_at = theirs.get_window_stats(item, bucket).reset_time
                assert wait_s == pytest.approx(reset_at - time.time())
            decisions.append(allowed)
    assert True in decisions and False in decisions


def test_local_window_keeps_the_latest_times_when_the_limit_changes():
    window = LocalMovingWindow()
    with time_machine.travel(START, tick=False) as clock:
        for _ in range(4):
            assert window.hit("key:a", 10, 60) is None
            clock.shift(1)
        # Down to 3 per minute: the three latest requests fill it.
        assert window.hit("key:a", 3, 60) == pytest.approx(60 - 3)
        clock.shift(57.5)
        assert window.hit("key:a", 3, 60) is None


def test_local_window_keeps_only_the_times_inside_the_window():
    """A high limit does not make a bucket keep every request it ever counted."""
    window = LocalMovingWindow()
    with time_machine.travel(START, tick=False) as clock:
        for _ in range(300):
            assert window.hit("key:a", 1_000_000, 1) is None
            clock.shift(0.01)
        kept = window._times["key:a"]
        assert 99 <= len(kept) <= 101
        assert kept[0] >= kept[-1] - 1


def test_local_window_drops_idle_buckets_and_refuses_a_zero_limit():
    window = LocalMovingWindow()
    with time_machine.travel(START, tick=False) as clock:
        for index in range(50):
            assert window.hit(f"ip:10.0.0.{index}", 5, 60) is None
        assert window.bucket_count() == 50
        clock.shift(61)
        assert window.hit("key:a", 5, 60) is None
        assert window.bucket_count() == 1
        assert window.hit("key:b", 0, 60) == 60


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


def test_page_hooks_take_an_extensions_hooks_off_api_paths(app, client, tenant):
    """An extension's hooks, once adopted, skip /v1 and still run for pages, in Flask's order."""
    recorder = HookRecorder()
    pages = page_hooks(app)
    kept = (list(pages.before), list(pages.after), list(pages.teardown))

    def closure_hook():  # the shape Flask-WTF registers: a closure over the extension
        recorder.calls.append(("closure", request.path))

    # Bound methods, a partial and a closure: the ways the real extensions register theirs.
    added = [(app.before_request_funcs[None], recorder.before),
             (app.before_request_funcs[None], closure_hook),
             (app.after_request_funcs[None], functools.partial(HookRecorder.after, recorder)),
             (app.teardown_request_funcs[None], recorder.teardown)]
    for hooks, hook in added:
        hooks.append(hook)
    pages.adopt(app, recorder)
    try:
        for hooks, hook in added:
            assert hook not in hooks
        assert client.get("/v1/me", headers=tenant.headers).status_code == 200
        assert client.get("/login").status_code == 200
    finally:
        pages.before[:], pages.after[:], pages.teardown[:] = kept
    assert recorder.calls == [("before", "/login"), ("closure", "/login"), ("after", "/login"),
                              ("teardown", "/login")]


def test_extension_hooks_are_page_hooks_only(app):
    """Flask-Limiter's, Flask-WTF's and Flask-Login's request hooks are all in the page group
    (own rate check, no form and no cookie session under /v1); none is left on the app."""
    from app import csrf

    pages = page_hooks(app)
    app_hooks = [hook for kind in (app.before_request_funcs, app.after_request_funcs,
                                   app.teardown_request_funcs) for hook in kind.get(None, [])]
    page_group = pages.before + pages.after + pages.teardown
    for extension in (limiter, csrf, login_manager):
        assert not [hook for hook in app_hooks if registered_by(hook, extension)], extension
        assert [hook for hook in page_group if registered_by(hook, extension)], extension
    assert sum(registered_by(hook, limiter) for hook in page_group) == 3

