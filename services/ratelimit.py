"""Request-rate limits: the one shared by every /v1 route, and the form limits.

/v1 counts one bucket per API key, keyed by a digest of the key, across all /v1
routes together; requests without a key are counted per client address. That
limit is checked once per request by `check_api_limit`: on the default memory://
storage by `LocalMovingWindow` in this process, otherwise (Redis, when several
servers share it) straight against Flask-Limiter's strategy and storage.
Flask-Limiter's per-route machinery resolves every limit of a route twice per
request, which cost a third of a small /v1 answer (bench/fixes.md); it still
guards the login and capture forms, and its request hooks are page-only
(`init_app`).
"""
from __future__ import annotations

import functools
import math
import threading
import time
from collections import deque

from flask import Flask, current_app
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from limits import RateLimitItem, parse

from services.errors import ServiceError
from services.keys import rate_limit_bucket
from services.web import page_hooks

API_SCOPE = "v1"


class RateLimited(ServiceError):
    """The caller spent its /v1 request budget for now."""

    status = 429
    code = "rate_limited"


def presented_api_key() -> tuple[str | None, bool]:
    """Return (key, malformed_header) from Authorization: Bearer or X-API-Key."""
    from flask import request

    authorization = request.headers.get("Authorization")
    if authorization is not None:
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None, True
        return token, False
    api_key = request.headers.get("X-API-Key")
    if api_key is not None:
        return api_key.strip(), False
    return None, False


def rate_limit_key() -> str:
    """Bucket id for the current request: the key's digest, else the client address."""
    return bucket_for(presented_api_key()[0])


def bucket_for(secret: str | None) -> str:
    """Bucket id for a presented key (its digest), or for the client address without one."""
    if secret:
        return rate_limit_bucket(secret)
    return "ip:" + get_remote_address()


@functools.lru_cache(maxsize=16)
def _parsed_limit(text: str) -> RateLimitItem:
    """The limit item for a configured limit text such as '120 per minute' (parsed once)."""
    return parse(text)


def check_api_limit(secret: str | None) -> None:
    """Count this /v1 request against its caller's bucket; 429 with Retry-After when spent."""
    app = current_app._get_current_object()
    item = _parsed_limit(app.config["API_RATE_LIMIT"])
    bucket = bucket_for(secret)
    local = app.extensions.get(LOCAL_WINDOW)
    if local is not None:
        wait_s = local.hit(bucket, item.amount, item.get_expiry())
        if wait_s is None:
            return
    else:
        identifiers = (app.config["RATELIMIT_KEY_PREFIX"], bucket, API_SCOPE)
        strategy = limiter.limiter
        if strategy.hit(item, *identifiers):
            return
        wait_s = strategy.get_window_stats(item, *identifiers).reset_time - time.time()
    raise RateLimited(f"rate limit exceeded ({item}); retry after the time in Retry-After",
                      headers={"Retry-After": str(max(1, math.ceil(wait_s)))})


class LocalMovingWindow:
    """Moving-window request counts kept in this process, for /v1 on memory:// storage.

    The rule is limits' moving window: a request is refused while the limit-th most recent
    one counted is younger than the window. Each bucket keeps the times of its last `limit`
    requests still within the window in a bounded deque, all under one lock. limits' memory
    storage keeps a lock and an object per request and starts a timer thread every 10 ms to
    expire them, which under load cost a /v1 answer several per cent (bench/fixes.md).
    Buckets idle for a whole window are dropped, at most once per window.
    """

    def __init__(self) -> None:
        self._times: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self._longest_s = 0.0
        self._next_sweep = 0.0

    def hit(self, bucket: str, limit: int, window_s: float) -> float | None:
        """Count one request: None when it is let in, else the seconds until one would be."""
        if limit <= 0:
            return float(window_s)
        now = time.time()
        with self._lock:
            times = self._times.get(bucket)
            if times is None or times.maxlen != limit:  # a new bucket, or the limit changed
                times = self._times[bucket] = deque(times or (), maxlen=limit)
            # Times that left the window go, so a high limit keeps only what it counts.
            while times and times[0] < now - window_s:
                times.popleft()
            if len(times) == limit:
                return times[0] + window_s - now
            times.append(now)
            self._longest_s = max(self._longest_s, window_s)
            if now >= self._next_sweep:
                # Against the longest window ever asked for: a bucket counted under another
                # limit is only dropped once no limit could still refuse by it.
                self._next_sweep = now + self._longest_s
                cutoff = now - self._longest_s
                for idle in [name for name, kept in self._times.items() if kept[-1] < cutoff]:
                    del self._times[idle]
        return None

    def bucket_count(self) -> int:
        """How many buckets are kept now."""
        return len(self._times)


LOCAL_WINDOW = "ewt_api_rate_window"


def init_app(app: Flask) -> None:
    """Bind Flask-Limiter to the app, its request hooks among the page-only ones.

    A request filter is only consulted after the hook has looked up the route's limits
    (~50 µs of every /v1 answer), so the hooks themselves are kept off /v1 (PageHooks).
    On memory:// storage the /v1 limit is counted by a LocalMovingWindow of the app's own.
    """
    limiter.init_app(app)
    page_hooks(app).adopt(app, limiter)
    if (str(app.config["RATELIMIT_STORAGE_URI"]).startswith("memory://")
            and app.config["RATELIMIT_STRATEGY"] == "moving-window"):
        app.extensions[LOCAL_WINDOW] = LocalMovingWindow()


def retry_after_seconds() -> int:
    """Whole seconds until the breached limit lets this caller in again (at least 1)."""
    current = limiter.current_limit
    if current is None:
        return 1
    return _seconds_until(current.reset_at)


def _seconds_until(reset_at: float) -> int:
    """Whole seconds from now until a window's reset time, at least 1."""
    return max(1, math.ceil(reset_at - time.time()))


limiter = Limiter(key_func=rate_limit_key)
