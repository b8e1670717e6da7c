"""Logs: one JSON line per request on stdout, with nothing secret in it.

Routes are logged as their pattern (`/c/<token>`), never as the path a client sent,
so a link token, a ticket id in a URL or a query string never reaches the log.

The standard library's StreamHandler writes each line with the JsonLines formatter.
"""
from __future__ import annotations

import json
import logging
import re
import secrets
import sys
import time
from typing import Any

from flask import Flask, Response, g, request

REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")
_SECRET_SHAPES = [
    re.compile(r"ewt_[A-Za-z0-9_-]{43}"),            # API keys
    re.compile(r"(/c/)[A-Za-z0-9_-]{16,}"),          # capture-link tokens in paths
    re.compile(r"(/s/)[A-Za-z0-9_-]{16,}"),          # signing-link tokens in paths
    re.compile(r"(/login/link/)[A-Za-z0-9_.-]{16,}"),  # one-time sign-in links in paths
    re.compile(r"whsec_[A-Za-z0-9+/=]{16,}"),        # webhook signing secrets
    re.compile(r"(link:)[A-Za-z0-9_-]{16,}"),        # capture-link tokens as limit buckets
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(r"(?i)(client_secret[\"'=:\s]+)[^\s\"'&,]+"),
]


_ENCODER = json.JSONEncoder(default=str)


def redact(text: str) -> str:
    """Blank out anything shaped like a key, a link token, a bearer token or a client secret."""
    for shape in _SECRET_SHAPES:
        text = shape.sub(lambda m: (m.group(1) if m.groups() else "") + "[redacted]", text)
    return text


class RedactSecrets(logging.Filter):
    """Rewrites a record's message with its secrets blanked, before any handler sees it.

    Set on the loggers of libraries that put request data in their lines (Flask-Limiter
    names the limit bucket, werkzeug and gunicorn the path), so every handler, whatever
    its formatter, gets the redacted line.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact in place; never drops a record."""
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        return True


# Loggers that write lines made from request data.
REDACTED_LOGGERS = ("flask-limiter", "werkzeug", "waitress", "waitress.queue")
_REDACT_FILTER = RedactSecrets()


def redact_library_loggers() -> None:
    """Put the redacting filter on every library logger that writes request data (once)."""
    for name in REDACTED_LOGGERS:
        logger = logging.getLogger(name)
        if _REDACT_FILTER not in logger.filters:
            logger.addFilter(_REDACT_FILTER)


class JsonLines(logging.Formatter):
    """Formats a record as one JSON object on one line, secrets redacted."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record."""
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["error"] = redact(self.formatException(record.exc_info))
        return _ENCODER.encode(entry)


def configure_logging(app: Flask) -> None:
    """Send this app's logs, and the request log, to stdout as JSON lines."""
    redact_library_loggers()
    root = logging.getLogger()
    # Under test, pytest collects records itself; elsewhere they go to stdout.
    if not app.testing and not any(isinstance(h.formatter, JsonLines) for h in root.handlers):
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(JsonLines())
        root.addHandler(handler)
        if root.level > logging.INFO or root.level == logging.NOTSET:
            root.setLevel(logging.INFO)
    app.before_request(_note_start)
    app.after_request(_log_request)


def _note_start() -> None:
    """Note when the app began on this request, for the log line's duration."""
    g.request_started = time.perf_counter()


def request_id_for(offered: str | None) -> str:
    """The caller's X-Request-Id if it is well-formed, else a new random one."""
    if offered and REQUEST_ID.match(offered):
        return offered
    return secrets.token_hex(8)


def _log_request(response: Response) -> Response:
    """Write the request's log line and hand the request id back to the caller."""
    started = g.get("request_started")
    request_id = request_id_for(request.headers.get("X-Request-Id"))
    api_key = g.get("api_key")
    rule = request.url_rule
    _REQUEST_LOG.info("request", extra={"fields": {
        "request_id": request_id,
        "method": request.method,
        "route": rule.rule if rule is not None else "(no route)",
        "status": response.status_code,
        "duration_ms": round((time.perf_counter() - started) * 1000, 1) if started else None,
        "company_id": g.get("company_id"),
        "key_prefix": api_key.prefix if api_key is not None else None,
    }})
    response.headers["X-Request-Id"] = request_id
    return response


_REQUEST_LOG = logging.getLogger("ewt.requests")
