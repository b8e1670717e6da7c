"""Logs: one JSON line per request on stdout, with nothing secret in it.

Routes are logged as their pattern (`/c/<token>`), never as the path a client sent,
so a link token, a ticket id in a URL or a query string never reaches the log.

Lines are written in batches (`BatchedLines`): a request only adds its record to a
list, and a writer thread formats and writes what gathered every 50 ms in one system
call. Under load a write per request cost more than the rest of a small answer, and
formatting in the request's thread several per cent more (bench/fixes.md, rounds 6
and 9). Warnings and errors are written at once, with every line before them.
"""
from __future__ import annotations

import json
import logging
import os
import random
import re
import sys
import threading
import time
import traceback
from typing import Any

from flask import Flask, Request, Response, g, request

REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")
_SECRET_SHAPES = [
    re.compile(r"ewt_[A-Za-z0-9_-]{43}"),            # API keys
    re.compile(r"(/c/)[A-Za-z0-9_-]{16,}"),          # capture-link tokens in paths
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(r"(?i)(client_secret[\"'=:\s]+)[^\s\"'&,]+"),
]


# What every shape above starts with: a text without any of these holds no secret, and
# most messages (the request line's among them) are let through after this one search.
_SECRET_STARTS = re.compile(r"ewt_|/c/|(?i:bearer|client_secret)")
_ENCODER = json.JSONEncoder(default=str)


def redact(text: str) -> str:
    """Blank out anything shaped like a key, a link token, a bearer token or a client secret."""
    if _SECRET_STARTS.search(text) is None:
        return text
    for shape in _SECRET_SHAPES:
        text = shape.sub(lambda m: (m.group(1) if m.groups() else "") + "[redacted]", text)
    return text


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


class BatchedLines(logging.Handler):
    """Writes records to a stream in order, batched: at most `interval_s` late.

    `emit` keeps the record; a daemon thread, woken by the first record of a batch, waits
    `interval_s`, then formats the batch and writes it with one write and one flush. A
    record at WARNING or above is written by the logging thread itself, after the records
    kept before it. Formatting and writing happen under the handler's lock, so lines keep
    their order. A kept record's message is resolved when it is kept, so later changes to
    its arguments do not show. `flush` (called by logging at exit) writes what is kept. A
    process killed outright loses at most the last `interval_s` of INFO lines.
    """

    def __init__(self, stream: Any, interval_s: float = 0.05) -> None:
        super().__init__()
        self.stream = stream
        self.interval_s = interval_s
        self._kept: list[logging.LogRecord] = []
        self._gathered = threading.Event()
        self._writer: threading.Thread | None = None
        os.register_at_fork(after_in_child=self._after_fork)

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the record (called with the handler's lock held)."""
        try:
            if record.args:
                record.msg, record.args = record.getMessage(), None
            self._kept.append(record)
            if record.levelno >= logging.WARNING:
                self._write_kept()
            elif not self._gathered.is_set():
                self._start_writer()
                self._gathered.set()
        except Exception:  # noqa: BLE001 - a log line must never fail its request
            self.handleError(record)

    def flush(self) -> None:
        """Write every kept record now."""
        with self.lock:
            self._write_kept()

    def _write_kept(self) -> None:
        """Format the kept records and write them in one go (the caller holds the lock)."""
        if self._kept:
            records, self._kept = self._kept, []
            lines = [line for line in map(self._line, records) if line is not None]
            if lines:
                self.stream.write("\n".join(lines) + "\n")
                self.stream.flush()

    def _line(self, record: logging.LogRecord) -> str | None:
        """One record's line; None, reported as logging reports it, if it cannot be formatted."""
        try:
            return self.format(record)
        except Exception:  # noqa: BLE001 - one bad record must not cost the batch its lines
            self.handleError(record)
            return None

    def _start_writer(self) -> None:
        """Start this process's writer thread the first time a line is kept."""
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_batches, name="log-writer",
                                            daemon=True)
            self._writer.start()

    def _write_batches(self) -> None:
        """Wait for a first line, let the batch gather, write it; forever."""
        while True:
            self._gathered.wait()
            time.sleep(self.interval_s)
            with self.lock:
                self._gathered.clear()
                try:
                    self._write_kept()
                except Exception:  # noqa: BLE001 - the writer must outlive one failed write
                    self._report_failed_write()

    @staticmethod
    def _report_failed_write() -> None:
        """Say on stderr that a batch was lost, as logging does for a failed record."""
        if logging.raiseExceptions:
            try:
                traceback.print_exc(file=sys.stderr)
            except OSError:
                pass

    def _after_fork(self) -> None:
        """A forked child has no writer thread yet, and keeps no line of its parent's."""
        self._writer = None
        self._kept = []
        self._gathered = threading.Event()


def configure_logging(app: Flask) -> None:
    """Send this app's logs, and the request log, to stdout as JSON lines."""
    root = logging.getLogger()
    # Under test, pytest collects records itself; elsewhere they go to stdout.
    if not app.testing and not any(isinstance(h.formatter, JsonLines) for h in root.handlers):
        handler = BatchedLines(sys.stdout)
        handler.setFormatter(JsonLines())
        root.addHandler(handler)
        if root.level > logging.INFO or root.level == logging.NOTSET:
            root.setLevel(logging.INFO)
        # The JSON lines name no source file or line, so records need not walk the caller's
        # stack to find them (the logging HOWTO's "Optimization" section). Not under test:
        # pytest's report of a failing test's records shows them.
        logging._srcfile = None
    # The JSON lines carry no process or thread fields; without these flags every record
    # would ask the OS for the process id (logging's documented switches for this).
    logging.logProcesses = False
    logging.logThreads = False
    logging.logMultiprocessing = False
    # The start time comes with the request object rather than from a before-request hook:
    # under load every hook a small answer runs shows (bench/fixes.md).
    app.request_class = TimedRequest
    app.after_request(_log_request)


class TimedRequest(Request):
    """A request that notes when the app began on it, for the log line's duration."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started = time.perf_counter()


def request_id_for(offered: str | None) -> str:
    """The caller's X-Request-Id if it is well-formed, else a new random one."""
    if offered and REQUEST_ID.match(offered):
        return offered
    # A request id only tells log lines apart and guards nothing, so it comes from the
    # random module (reseeded in each forked worker) rather than from the OS: getrandom
    # is a system call on every request, and system calls are dear under load here.
    return f"{random.getrandbits(64):016x}"


def _log_request(response: Response) -> Response:
    """Write the request's log line and hand the request id back to the caller."""
    # The request and g are fetched once: each use of Flask's proxies looks them up again,
    # and this runs on every answer.
    state = g._get_current_object()
    current = request._get_current_object()
    started = getattr(current, "started", None)
    # Straight from the WSGI environ: a missing header read through request.headers
    # raises and catches an exception, and most requests send none.
    request_id = request_id_for(current.environ.get("HTTP_X_REQUEST_ID"))
    api_key = getattr(state, "api_key", None)
    rule = current.url_rule
    _REQUEST_LOG.info("request", extra={"fields": {
        "request_id": request_id,
        "method": current.method,
        "route": rule.rule if rule is not None else "(no route)",
        "status": response.status_code,
        "duration_ms": round((time.perf_counter() - started) * 1000, 1) if started else None,
        "company_id": getattr(state, "company_id", None),
        "key_prefix": api_key.prefix if api_key is not None else None,
    }})
    response.headers["X-Request-Id"] = request_id
    return response


_REQUEST_LOG = logging.getLogger("ewt.requests")
