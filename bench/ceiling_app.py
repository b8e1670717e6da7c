"""The ceiling: a bare Flask app that answers each benchmarked route with JSON of the same size.

It is served by gunicorn with the same settings as bin/serve (one worker, eight threads),
so the ratio service ÷ ceiling shows what the service's own work costs.
Body sizes come from BENCH_CEILING_SIZES, a JSON object such as {"me": 98, "list": 41000}.
It also serves the minimal capture page used as the browser ceiling.
"""
from __future__ import annotations

import json
import os

from flask import Flask, Response, jsonify, request

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


def create_ceiling_app() -> Flask:
    """Build the bare app: one route per benchmarked endpoint, each returning a padded object."""
    app = Flask(__name__)
    app.json.compact = True
    app.json.sort_keys = False
    sizes = json.loads(os.environ.get("BENCH_CEILING_SIZES") or "{}")
    bodies = {name: padded(int(size)) for name, size in sizes.items()}

    def answer(name: str, status: int = 200) -> tuple[Response, int]:
        """Serialise the padded body for one endpoint."""
        return jsonify(bodies.get(name, {})), status

    @app.get("/v1/me")
    def me() -> tuple[Response, int]:
        """Stands in for GET /v1/me."""
        return answer("me")

    @app.get("/v1/tickets")
    def list_tickets() -> tuple[Response, int]:
        """Stands in for GET /v1/tickets?limit=50."""
        return answer("list")

    @app.post("/v1/tickets")
    def create_ticket() -> tuple[Response, int]:
        """Stands in for POST /v1/tickets: reads the body, answers 201 the size of a ticket."""
        request.get_data()
        return answer("create", 201)

    @app.get("/v1/tickets/<ticket_id>")
    def get_ticket(ticket_id: str) -> tuple[Response, int]:
        """Stands in for GET /v1/tickets/{id}."""
        return answer("get")

    @app.get("/minimal")
    def minimal_page() -> Response:
        """A static minimal page with one textarea: the capture page's ceiling."""
        return Response(MINIMAL_PAGE, mimetype="text/html")

    return app


app = create_ceiling_app()
