"""The request-rate limiter shared by every authenticated /v1 route.

One bucket per API key, keyed by a digest of the key, counted across all /v1
routes together. Requests without a key are counted per client address.
"""
from __future__ import annotations

import math
import time

from flask import current_app
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

from services.keys import rate_limit_bucket


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


def api_rate_limit() -> str:
    """The configured /v1 limit, read per request so tests and deployments can change it."""
    return current_app.config["API_RATE_LIMIT"]


def retry_after_seconds() -> int:
    """Whole seconds until the breached limit lets this caller in again (at least 1)."""
    current = limiter.current_limit
    if current is None:
        return 1
    return max(1, math.ceil(current.reset_at - time.time()))


limiter = Limiter(key_func=rate_limit_key)
api_limit = limiter.shared_limit(api_rate_limit, scope="v1")
