"""One error dispatcher: JSON error bodies under /v1 and to capture scripts, HTML pages elsewhere."""
from __future__ import annotations

import errno

from flask import Flask, Response, jsonify, render_template, request
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import HTTPException

from models import db
from services.accounts.ratelimit import retry_after_seconds
from services.files.quotas import FULL_MESSAGE
from services.platform.errors import ServiceError
from services.platform.web import is_api_path, is_capture_script_request

HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    500: "internal_error",
    502: "project_system_error",
    507: "storage_full",
}


def wants_api_error() -> bool:
    """Answer with JSON for anything under /v1 and for the capture page's script."""
    return is_api_path(request.path) or is_capture_script_request()


def error_response(status: int, code: str, message: str, details=None,
                   headers: dict[str, str] | None = None) -> Response:
    """Render an error as JSON for /v1 and capture scripts, or as an HTML page elsewhere."""
    if wants_api_error():
        error = {"code": code, "message": message}
        if details is not None:
            error["details"] = details
        response = jsonify({"error": error})
    else:
        response = Response(render_template("errors/error.html", status=status, message=message),
                            mimetype="text/html")
    response.status_code = status
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def register_error_handlers(app: Flask) -> None:
    """Install the handlers for service errors, HTTP errors and unexpected exceptions."""

    @app.errorhandler(ServiceError)
    def handle_service_error(error: ServiceError) -> Response:
        """Render a refusal raised by a service."""
        return error_response(error.status, error.code, error.message, error.details, error.headers)

    @app.errorhandler(HTTPException)
    def handle_http_error(error: HTTPException) -> Response:
        """Render werkzeug's HTTP errors (404, 405, 413, 429, ...) in our shape."""
        status = error.code or 500
        headers = {k: v for k, v in error.get_headers() if k.lower() in ("allow", "retry-after")}
        if status == 429:
            headers["Retry-After"] = str(retry_after_seconds())
        message = _http_message(error)
        return error_response(status, HTTP_CODES.get(status, f"http_{status}"), message,
                              headers=headers)

    @app.errorhandler(Exception)
    def handle_unexpected(error: Exception) -> Response:
        """Log a bug, roll back, and answer 500 without leaking internals (507 for a full disk)."""
        db.session.rollback()
        if _disk_is_full(error):
            app.logger.error("disk full on %s", request.method)
            return error_response(507, "storage_full", FULL_MESSAGE)
        app.logger.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal_error", "an unexpected error occurred")


def _disk_is_full(error: BaseException) -> bool:
    """Whether an error is the disk (or the database file's disk) being full."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    original = getattr(error, "orig", None)
    return isinstance(error, OperationalError) and "full" in str(original or error).lower()


def _http_message(error: HTTPException) -> str:
    """A short message for an HTTP error, specific where the status alone is vague."""
    status = error.code
    if status == 404:
        return "no such resource"
    if status == 405:
        return f"{request.method} is not allowed on this path"
    if status == 413:
        limit = request.max_content_length
        return f"the body is too large; the limit is {limit} bytes" if limit else "the body is too large"
    if status == 429:
        return f"rate limit exceeded ({error.description}); retry after the time in Retry-After"
    return error.description or (error.name or "error")
