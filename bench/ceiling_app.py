"""The ceiling: a bare Flask app that answers each benchmarked request with a body of the same size.

It is served by waitress with the same settings as bin/serve (one process, eight threads),
so the ratio service ÷ ceiling shows what the service's own work costs.
The answers come from BENCH_CEILING_ANSWERS, a JSON object mapping "METHOD /path?query" to
the service's answer for it, such as {"GET /v1/me": {"status": 200, "type":
"application/json", "bytes": 98}}: JSON answers are serialised from a padded object on
every request, pages are sent as text of that many bytes.
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
    """Build the bare app: one catch-all route answering each known request with its padding."""
    app = Flask(__name__)
    app.json.compact = True
    app.json.sort_keys = False
    answers = json.loads(os.environ.get("BENCH_CEILING_ANSWERS") or "{}")
    bodies = {request_line: (answer["status"], answer["type"],
                             padded(answer["bytes"]) if "json" in answer["type"]
                             else "x" * answer["bytes"])
              for request_line, answer in answers.items()}

    @app.route("/<path:path>", methods=["GET", "POST"])
    def answer(path: str) -> Response | tuple[Response, int]:
        """Stands in for whichever benchmarked request this is; reads a body if one was sent."""
        request.get_data()
        query = request.query_string.decode()
        known = bodies.get(f"{request.method} {request.path}" + (f"?{query}" if query else ""))
        if known is None:
            return Response("not a benchmarked request", status=404)
        status, content_type, body = known
        if isinstance(body, dict):
            return jsonify(body), status
        return Response(body, status=status, content_type=content_type)

    @app.get("/minimal")
    def minimal_page() -> Response:
        """A static minimal page with one textarea: the capture page's ceiling."""
        return Response(MINIMAL_PAGE, mimetype="text/html")

    return app


app = create_ceiling_app()
