"""Request-rate limits, all counted by Flask-Limiter: the one shared by every /v1 route, and
the login and capture form limits.

/v1 counts one bucket per API key, keyed by a digest of the key, across all /v1 routes
together (one shared limit); requests without a key are counted per client address.
Storage is Flask-Limiter's: memory:// on one server, Redis when several share it.
"""
from __future__ import annotations

import logging
import math
import time

from flask import Flask, Response, current_app, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from limits import parse_many

from services.accounts.keys import rate_limit_bucket
from services.platform.errors import ServiceError
from services.platform.web import is_api_path

API_SCOPE = "v1"

# The headers a /v1 answer carries about the caller's bucket, with the values Flask-Limiter
# computes: the limit, what is left after this request, and the Unix time (seconds) at which
# the oldest counted request leaves the window.
LIMIT_HEADER = "RateLimit-Limit"
REMAINING_HEADER = "RateLimit-Remaining"
RESET_HEADER = "RateLimit-Reset"


def presented_api_key() -> tuple[str | None, bool]:
    """Return (key, malformed_header) from Authorization: Bearer or X-API-Key."""
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
    secret = presented_api_key()[0]
    if secret:
        return rate_limit_bucket(secret)
    return "ip:" + get_remote_address()


def _api_limit() -> str:
    """The configured /v1 limit, e.g. '120 per minute'."""
    return current_app.config["API_RATE_LIMIT"]


def init_app(app: Flask) -> None:
    """Bind Flask-Limiter to the app and state the caller's bucket on every limited /v1 answer."""
    limiter.init_app(app)
    app.after_request(rate_limit_headers)


def rate_limit_headers(response: Response) -> Response:
    """Add RateLimit-Limit, -Remaining and -Reset to a /v1 answer the shared limit counted.

    Flask-Limiter's own header writing is off because it would also put Retry-After on every
    answer (and on the page forms); Retry-After stays on 429 only.
    """
    if not is_api_path(request.path):
        return response
    current = limiter.current_limit
    if current is None:
        return response
    response.headers[LIMIT_HEADER] = str(current.limit.amount)
    response.headers[REMAINING_HEADER] = str(max(0, current.remaining))
    response.headers[RESET_HEADER] = str(current.reset_at)
    return response


def retry_after_seconds() -> int:
    """Whole seconds until the breached limit lets this caller in again (at least 1)."""
    current = limiter.current_limit
    if current is None:
        return 1
    return max(1, math.ceil(current.reset_at - time.time()))


_LOG = logging.getLogger("ewt.ratelimit")


def count_or_refuse(limits: str, scope: str, key: str, message: str, *,
                    counting: bool = True) -> None:
    """Count one request against `limits` in the limiter's storage, now; 429 past any of them
    (with `counting` False, only refuse a key that has already used one up).

    For routes whose limit must hold before the body is read (Flask-Limiter checks a
    decorated route's limits only when its view runs, after the body). `key` must not be a
    secret: it is stored as it is.
    """
    config = current_app.config
    if not config.get("RATELIMIT_ENABLED", True):
        return
    prefix = config["RATELIMIT_KEY_PREFIX"]
    take = limiter.limiter.hit if counting else limiter.limiter.test
    for item in parse_many(limits):
        if not take(item, prefix, scope, key):
            reset = limiter.limiter.get_window_stats(item, prefix, scope, key).reset_time
            _LOG.info("rate limit %s exceeded on %s", item, scope)
            raise ServiceError(message, status=429, code="rate_limited",
                               headers={"Retry-After": str(max(1, math.ceil(reset - time.time())))})


def count(limits: str, scope: str, key: str) -> None:
    """Count one event against `limits` (a later request is refused by count_or_refuse with
    counting False)."""
    config = current_app.config
    if not config.get("RATELIMIT_ENABLED", True):
        return
    for item in parse_many(limits):
        limiter.limiter.hit(item, config["RATELIMIT_KEY_PREFIX"], scope, key)


limiter = Limiter(key_func=rate_limit_key)
# Every authenticated /v1 route shares this one limit (blueprints.api.api_route applies it).
api_limit = limiter.shared_limit(_api_limit, scope=API_SCOPE)
