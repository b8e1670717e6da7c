"""An embedded Procore-compatible HTTP API for development, demos and tests.

Run it as its own process, e.g. ``gunicorn 'sandbox:create_sandbox_app()'``, and seed
companies with ``sandbox.seed.create_demo_company`` or
``flask --app 'sandbox:create_sandbox_app()' seed-demo``.

Settings (all optional; environment variables with the same names are read too):

- ``SANDBOX_DB_PATH``: the SQLite file (default ``<instance>/sandbox.sqlite3``)
- ``SANDBOX_FILES_DIR``: attachment bytes (default ``<instance>/sandbox-files``)
- ``SANDBOX_TOKEN_TTL``: access-token lifetime in seconds (default 5400)
- ``SANDBOX_RATE_LIMIT_PER_HOUR``: calls per company per hour (default 3600)
- ``SANDBOX_SPIKE_LIMIT``: calls per company per 10-second window, Procore's spike limit
  (default 25, its documented example; 0 switches it off; a company's own setting wins)
- ``SANDBOX_MAX_UPLOAD_BYTES``: largest request body (default 50 MB)
- ``SANDBOX_CONTRACT_PATH``: the contract every /rest request is checked against (default
  ``tests/contract/procore.json`` beside the package, when present; "" switches it off)
"""
from __future__ import annotations

import json
import os
import uuid
from typing import Any

import click
from flask import Config, Flask, Response, current_app, g, request
from werkzeug.exceptions import HTTPException
from werkzeug.serving import WSGIRequestHandler
from werkzeug.wrappers import Response as BaseResponse

from sandbox import (
    auth,
    change_events,
    change_events_v10,
    commitments,
    contract,
    control,
    daily_log,
    rest,
    uploads,
    web,
)
from sandbox.common import ApiError, close_db
from sandbox.control import fault_response
from sandbox.seed import create_demo_company
from sandbox.store import connect, ensure_schema

__all__ = ["SandboxRequestHandler", "create_sandbox_app"]


class SandboxRequestHandler(WSGIRequestHandler):
    """Werkzeug's request handler, but the answer's Date is the app's when it sends one (a
    company's sandbox clock, frozen or set apart by a switch), else the server's."""

    def send_response(self, code: int, message: str | None = None) -> None:
        """The status line and Server header; Date waits for the app's headers."""
        self.log_request(code)
        self.send_response_only(code, message)
        self.send_header("Server", self.version_string())
        self._dated = False

    def send_header(self, keyword: str, value: str) -> None:
        """Send a header, noting a Date."""
        if keyword.lower() == "date":
            self._dated = True
        super().send_header(keyword, value)

    def end_headers(self) -> None:
        """Add the server's Date when the app sent none."""
        if not getattr(self, "_dated", True):
            super().send_header("Date", self.date_time_string())
        super().end_headers()


def create_sandbox_app(config: dict[str, Any] | None = None) -> Flask:
    """Build the sandbox app; ``config`` overrides environment settings and defaults."""
    app = Flask(__name__, instance_relative_config=True)
    app.config.from_mapping(
        SANDBOX_DB_PATH=os.path.join(app.instance_path, "sandbox.sqlite3"),
        SANDBOX_FILES_DIR=os.path.join(app.instance_path, "sandbox-files"),
        SANDBOX_TOKEN_TTL=5400,
        SANDBOX_RATE_LIMIT_PER_HOUR=3600,
        SANDBOX_SPIKE_LIMIT=25,
        SANDBOX_MAX_UPLOAD_BYTES=50 * 1024 * 1024,
    )
    # from_prefixed_env drops the prefix; load into a scratch Config and put it back, so the
    # environment variable SANDBOX_DB_PATH sets the setting SANDBOX_DB_PATH.
    environment = Config(app.root_path)
    environment.from_prefixed_env("SANDBOX")
    app.config.update({f"SANDBOX_{key}": value for key, value in environment.items()})
    app.config.update(config or {})
    app.config["MAX_CONTENT_LENGTH"] = int(app.config["SANDBOX_MAX_UPLOAD_BYTES"])

    os.makedirs(os.path.dirname(os.path.abspath(app.config["SANDBOX_DB_PATH"])), exist_ok=True)
    os.makedirs(app.config["SANDBOX_FILES_DIR"], exist_ok=True)
    db = connect(app.config["SANDBOX_DB_PATH"])
    try:
        ensure_schema(db)
    finally:
        db.close()

    for blueprint in (auth.bp, rest.bp, change_events.bp, change_events_v10.bp, commitments.bp,
                      daily_log.bp, uploads.bp, uploads.storage, control.bp, web.bp):
        app.register_blueprint(blueprint)
    contract.install(app)
    app.teardown_appcontext(close_db)
    app.after_request(_finish_request)
    app.register_error_handler(ApiError, lambda error: error.response())
    app.register_error_handler(HTTPException, _http_error)
    app.cli.add_command(_seed_demo_command)
    return app


def _finish_request(response: Response) -> Response:
    """Apply an after-commit fault, then add request-id and rate-limit headers."""
    fault = g.pop("fault", None)
    if fault is not None:
        response = fault_response(fault)
    response.headers["X-Request-Id"] = uuid.uuid4().hex
    response.headers.update(auth.rate_headers())
    return response


def _http_error(error: HTTPException) -> BaseResponse:
    """JSON bodies for API paths; Werkzeug's HTML error pages elsewhere."""
    if request.path.startswith(("/rest/", "/oauth/", "/_sandbox/")):
        return ApiError(error.code or 500, error.description or error.name).response()
    return error.get_response()


@click.command("seed-demo")
@click.option("--name", default="Summit Ridge Builders", help="Company name.")
def _seed_demo_command(name: str) -> None:
    """Create a demo company in the sandbox database and print its credentials as JSON."""
    click.echo(json.dumps(create_demo_company(current_app.config["SANDBOX_DB_PATH"], name),
                          indent=2))
