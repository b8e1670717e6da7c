"""Request bodies: capped per route, read under deadlines, and never by too many threads at once.

Anyone can send a body to the sign-in form and to a capture link. A body sent one byte at
a time, or a huge one, must not hold the server's threads or memory:

- each route has its own largest body (`BODY_LIMITS`; photos routes take MAX_CONTENT_LENGTH,
  every other route `SMALL_BODY_BYTES`), refused from Content-Length before a byte is read;
- a body is read in full here, before the view: at most `BODY_IDLE_S` between two chunks
  and `BODY_DEADLINE_S` (`BODY_UPLOAD_DEADLINE_S` for photo routes) in all, else 408;
- at most `BODY_READ_SLOTS` anonymous requests (capture and signing links, sign-in, no
  valid API key) and `BODY_READ_SLOTS_SIGNED_IN` requests with a valid API key or a
  signed-in session read a body at the same time, each from its own slots; the next one is
  told 503 at once, so threads are always left for pages, the API and /healthz, and
  anonymous clients cannot take the slots of signed-in ones.

Behind Caddy (deploy/Caddyfile) the proxy has already buffered the body, so here it
arrives at once; under `make run` these deadlines are what cut a slow client off.
Registered after the rate limiter, so a refused or rate-limited request is answered
without its body ever being read.
"""
from __future__ import annotations

import io
import socket
import threading
import time

from flask import Flask, Response, current_app, g, request, session

from services import keys
from services.errors import ServiceError
from services.ratelimit import presented_api_key

# Routes whose bodies carry photos: they may use the whole MAX_CONTENT_LENGTH.
UPLOAD_ENDPOINTS = frozenset({"links.capture_submit", "tickets.create_ticket", "tickets.add_photos",
                              "links.capture_photo", "links.capture_draft_photo",
                              "links.capture_signature", "tickets.put_photo"})
CHUNK = 64 * 1024

_slots_lock = threading.Lock()
_slots: dict[tuple[str, int], threading.BoundedSemaphore] = {}


class BodyRefused(ServiceError):
    """A body the server will not read (too slow, too large, or no room to read it now)."""

    status = 400
    code = "bad_request"


def body_limit(endpoint: str | None) -> int:
    """The largest body a route accepts."""
    config = current_app.config
    if endpoint in UPLOAD_ENDPOINTS:
        return int(config["MAX_CONTENT_LENGTH"])
    return min(int(config["SMALL_BODY_BYTES"]), int(config["MAX_CONTENT_LENGTH"]))


def _slot_semaphore(pool: str, count: int) -> threading.BoundedSemaphore:
    """The process-wide semaphore of one pool of body-reading slots."""
    with _slots_lock:
        if (pool, count) not in _slots:
            _slots[pool, count] = threading.BoundedSemaphore(count)
        return _slots[pool, count]


def _signed_in() -> bool:
    """Whether the request carries a live API key or a signed-in reviewer's session cookie
    (read as it is: loading the reviewer here would run the session checks too early)."""
    secret, _ = presented_api_key()
    if secret and keys.is_live(secret):
        return True
    return "_user_id" in session


def _has_body() -> bool:
    """Whether the request announces a body."""
    return bool(request.content_length) or "chunked" in request.headers.get("Transfer-Encoding", "").lower()


def read_body_first() -> Response | None:
    """Before the view: check the size from the headers, then read the body under deadlines."""
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
    config = current_app.config
    signed_in = _signed_in()
    slots = _slot_semaphore("signed-in" if signed_in else "anonymous",
                            int(config["BODY_READ_SLOTS_SIGNED_IN" if signed_in
                                       else "BODY_READ_SLOTS"]))
    if not slots.acquire(blocking=False):
        raise BodyRefused("the server is busy; send again in a moment", status=503, code="busy",
                          headers={"Retry-After": "5"})
    try:
        deadline = time.monotonic() + float(config["BODY_UPLOAD_DEADLINE_S"]
                                            if request.endpoint in UPLOAD_ENDPOINTS
                                            else config["BODY_DEADLINE_S"])
        body = _read(request.environ, limit, deadline, float(config["BODY_IDLE_S"]))
    finally:
        slots.release()
    request.environ["wsgi.input"] = io.BytesIO(body)
    request.environ["CONTENT_LENGTH"] = str(len(body))
    request.environ.pop("HTTP_TRANSFER_ENCODING", None)
    g.body_read = True
    return None


def _too_large(limit: int) -> ServiceError:
    """413 for a body past its route's limit."""
    return ServiceError(f"the body is too large; the limit is {limit} bytes", status=413,
                        code="payload_too_large")


def _read(environ: dict, limit: int, deadline: float, idle: float) -> bytes:
    """Read the whole body: at most `limit` bytes, `idle` seconds a chunk, done by `deadline`."""
    stream = environ["wsgi.input"]
    sock = environ.get("gunicorn.socket")
    length = environ.get("CONTENT_LENGTH")
    expected = int(length) if length and length.isdigit() else None
    prior = sock.gettimeout() if sock is not None else None
    parts: list[bytes] = []
    received = 0
    try:
        while expected is None or received < expected:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _too_slow()
            if sock is not None:
                sock.settimeout(min(idle, remaining))
            want = CHUNK if expected is None else min(CHUNK, expected - received)
            try:
                chunk = stream.read(want)
            except (socket.timeout, TimeoutError):
                raise _too_slow() from None
            if not chunk:
                break
            received += len(chunk)
            if received > limit:
                raise _too_large(limit)
            parts.append(chunk)
    finally:
        if sock is not None:
            try:
                sock.settimeout(prior)
            except OSError:
                pass
    if expected is not None and received < expected:
        raise BodyRefused("the body ended early", code="body_incomplete")
    return b"".join(parts)


def _too_slow() -> ServiceError:
    """408 for a body that did not arrive in time."""
    return ServiceError("the body was sent too slowly; send it again", status=408,
                        code="request_timeout")


def hang_up_on_unread_body(response: Response) -> Response:
    """After answering a request whose body was not (fully) read, stop reading from its client.

    Otherwise the server would go on draining the rest of the body in this thread, at the
    client's pace, before it could close the connection.
    """
    if request.method not in ("GET", "HEAD", "OPTIONS") and _has_body() and not g.get("body_read"):
        sock = request.environ.get("gunicorn.socket")
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RD)
            except OSError:
                pass
    return response


def init_app(app: Flask) -> None:
    """Read bodies before any other hook or view touches them (after the rate limiter)."""
    app.before_request(read_body_first)
    app.after_request(hang_up_on_unread_body)


__all__ = ["BodyRefused", "body_limit", "init_app", "read_body_first"]
