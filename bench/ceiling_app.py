"""The ceiling: a bare Flask app that answers each benchmarked route with JSON of the same size.

It is served by gunicorn with the same settings as bin/serve (one worker, eight threads),
so the ratio service ÷ ceiling shows what the service's own work costs.
Body sizes come from BENCH_CEILING_SIZES, a JSON object such as {"me": 98, "list": 41000}.
It also serves the minimal capture page used as the browser ceiling, and a second,
informative ceiling for POST /v1/tickets: the same bare route plus one durable write, an
INSERT of the request body and a COMMIT into a SQLite file with the service's settings (WAL,
synchronous=FULL), one writer at a time as in the service. The file is BENCH_CEILING_DB.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid

from flask import Flask, Response, jsonify, request

DURABLE_PATH = "/durable/v1/tickets"

MINIMAL_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Extra work</title></head>
<body><form><label>What was done<textarea name="description"></textarea></label></form>
<script>document.documentElement.classList.add('js')</script></body></html>
"""


def padded(size: int) -> dict[str, str]:
    """A JSON object that serialises (compactly) to exactly `size` bytes, or as near as possible."""
    overhead = len(json.dumps({"pad": ""}, separators=(",", ":")))
    return {"pad": "x" * max(0, size - overhead)}


class DurableRows:
    """One table in a SQLite file, written as the service writes: WAL, synchronous=FULL,
    one connection per thread, writers queued on one lock."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._local = threading.local()
        self._lock = threading.Lock()
        with self._connection() as connection:
            connection.execute("CREATE TABLE IF NOT EXISTS rows (id TEXT PRIMARY KEY, body BLOB)")

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection, opened with the service's pragmas."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self._path, isolation_level="IMMEDIATE")
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            connection.execute("PRAGMA busy_timeout=30000")
            self._local.connection = connection
        return connection

    def insert(self, body: bytes) -> None:
        """Store one row and commit it."""
        connection = self._connection()
        with self._lock:
            connection.execute("INSERT INTO rows (id, body) VALUES (?, ?)", (str(uuid.uuid4()), body))
            connection.commit()


def create_ceiling_app() -> Flask:
    """Build the bare app: one route per benchmarked endpoint, each returning a padded object."""
    app = Flask(__name__)
    app.json.compact = True
    app.json.sort_keys = False
    sizes = json.loads(os.environ.get("BENCH_CEILING_SIZES") or "{}")
    bodies = {name: padded(int(size)) for name, size in sizes.items()}
    durable_path = os.environ.get("BENCH_CEILING_DB")
    durable = DurableRows(durable_path) if durable_path else None

    def answer(name: str) -> Response:
        """Serialise the padded body for one endpoint."""
        return jsonify(bodies.get(name, {}))

    @app.get("/v1/me")
    def me() -> Response:
        """Stands in for GET /v1/me."""
        return answer("me")

    @app.get("/v1/tickets")
    def list_tickets() -> Response:
        """Stands in for GET /v1/tickets?limit=50."""
        return answer("list")

    @app.post("/v1/tickets")
    def create_ticket() -> Response:
        """Stands in for POST /v1/tickets: reads the body, answers a created ticket's size."""
        request.get_data()
        return answer("create")

    @app.post(DURABLE_PATH)
    def create_ticket_durably() -> Response:
        """POST /v1/tickets's second ceiling: the bare route plus one durable INSERT."""
        if durable is None:
            return Response(status=404)
        durable.insert(request.get_data())
        return answer("create")

    @app.get("/v1/tickets/<ticket_id>")
    def get_ticket(ticket_id: str) -> Response:
        """Stands in for GET /v1/tickets/{id}."""
        return answer("get")

    @app.get("/minimal")
    def minimal_page() -> Response:
        """A static minimal page with one textarea: the capture page's ceiling."""
        return Response(MINIMAL_PAGE, mimetype="text/html")

    return app


app = create_ceiling_app()
