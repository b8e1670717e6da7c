"""Request-rate limits: the one shared by every /v1 route, and the form limits.

/v1 counts one bucket per API key, keyed by a digest of the key, across all /v1
routes together; requests without a key are counted per client address. That
limit is checked once per request by `check_api_limit`, straight against
Flask-Limiter's strategy and storage (memory, or Redis when several servers
share it). Flask-Limiter's per-route machinery resolves every limit of a route
twice per request, which cost a third of a small /v1 answer (bench/fixes.md);
it still guards the login and capture forms, and its per-request hook is kept off
/v1 paths altogether (`init_app`).
"""
from __future__ import annotations

import functools
import math
import time

from flask import Flask, current_app
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from limits import RateLimitItem, parse

from services.errors import ServiceError
from services.keys import rate_limit_bucket
from services.web import is_api_path, keep_hooks_off_api_paths

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
    secret, _ = presented_api_key()
    if secret:
        return rate_limit_bucket(secret)
    return "ip:" + get_remote_address()


@functools.lru_cache(maxsize=16)
def _parsed_limit(text: str) -> RateLimitItem:
    """The limit item for a configured limit text such as '120 per minute' (parsed once)."""
    return parse(text)


def check_api_limit() -> None:
    """Count this /v1 request against its caller's bucket; 429 with Retry-After when spent."""
    item = _parsed_limit(current_app.config["API_RATE_LIMIT"])
    identifiers = (current_app.config["RATELIMIT_KEY_PREFIX"], rate_limit_key(), API_SCOPE)
    strategy = limiter.limiter
    if strategy.hit(item, *identifiers):
        return
    wait_s = _seconds_until(strategy.get_window_stats(item, *identifiers).reset_time)
    raise RateLimited(f"rate limit exceeded ({item}); retry after the time in Retry-After",
                      headers={"Retry-After": str(wait_s)})


def init_app(app: Flask) -> None:
    """Bind Flask-Limiter to the app, with its request hooks skipping /v1 paths.

    A request filter is only consulted after the hook has looked up the route's limits
    (~50 µs of every /v1 answer), so the hooks it registers are wrapped instead.
    """
    limiter.init_app(app)
    keep_hooks_off_api_paths(app, limiter)


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
