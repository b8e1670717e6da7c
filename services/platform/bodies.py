"""Request bodies: capped per route, refused from their headers, checked whole before the view.

Slow clients are the serving layer's to handle, not ours: `make run` serves with waitress
(services/platform/serving.py), which reads every request's headers and body in its I/O loop, under
deadlines, spilling large bodies to disk, before a thread runs the app; the deploy puts Caddy
in front (deploy/Caddyfile), which buffers bodies the same way. So a body is here at once,
and what is left is:

- each route has its own largest body (`BODY_LIMITS`; photos routes take MAX_CONTENT_LENGTH,
  every other route `SMALL_BODY_BYTES`), refused from Content-Length before a byte is read;
- a route's early checks (`view.before_body`: rate limits, an unknown capture link) answer
  before the body is parsed;
- a body that ends before its Content-Length is refused as 400 body_incomplete.
"""
from __future__ import annotations

import io

from flask import Flask, Response, current_app, request
from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge

from services.platform.errors import ServiceError

# Routes whose bodies carry photos: they may use the whole MAX_CONTENT_LENGTH.
UPLOAD_ENDPOINTS = frozenset({"links.capture_submit", "tickets.create_ticket", "tickets.add_photos",
                              "links.capture_photo", "links.capture_draft_photo",
                              "links.capture_signature", "tickets.put_photo"})


def body_limit(endpoint: str | None) -> int:
    """The largest body a route accepts."""
    config = current_app.config
    if endpoint in UPLOAD_ENDPOINTS:
        return int(config["MAX_CONTENT_LENGTH"])
    return min(int(config["SMALL_BODY_BYTES"]), int(config["MAX_CONTENT_LENGTH"]))


def _has_body() -> bool:
    """Whether the request announces a body."""
    return bool(request.content_length) or "chunked" in request.headers.get("Transfer-Encoding", "").lower()


def _too_large(limit: int) -> ServiceError:
    """413 for a body past its route's limit."""
    return ServiceError(f"the body is too large; the limit is {limit} bytes", status=413,
                        code="payload_too_large")


def check_body_first() -> Response | None:
    """Before the view: the route's early checks, its size from the headers, then the body whole."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return None
    view = current_app.view_functions.get(request.endpoint or "")
    early = getattr(view, "before_body", None)
    if early is not None:  # rate limits, and an unknown capture link, before reading the body
        answer = early()
        if answer is not None:
            return answer
    if not _has_body():
        return None
    limit = body_limit(request.endpoint)
    request.max_content_length = limit
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit)
    try:
        body = request.get_data(cache=True)
    except ClientDisconnected:
        raise ServiceError("the body ended early", code="body_incomplete") from None
    except RequestEntityTooLarge:
        raise _too_large(limit) from None
    request.environ["wsgi.input"] = io.BytesIO(body)
    request.environ["CONTENT_LENGTH"] = str(len(body))
    request.environ.pop("HTTP_TRANSFER_ENCODING", None)
    return None


def init_app(app: Flask) -> None:
    """Check bodies before any other hook or view touches them (after the rate limiter)."""
    app.before_request(check_body_first)


__all__ = ["body_limit", "check_body_first", "init_app"]
