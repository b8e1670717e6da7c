"""Request helpers shared by the sandbox blueprints: database handle, errors, paging, parsing."""
from __future__ import annotations

from decimal import Decimal, InvalidOperation
from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode

import sqlite_utils
from flask import Response, current_app, g, jsonify, request

from sandbox.store import connect

_STATUSES = {status.value for status in HTTPStatus}
DEFAULT_PER_PAGE = 100
MAX_PER_PAGE = 1000


class ApiError(Exception):
    """An error answer in Procore's usual body shape: {"message": ..., "errors": ...}."""

    def __init__(self, status: int, message: str, errors: Any = None,
                 headers: dict[str, str] | None = None) -> None:
        """Keep the status, message, optional field errors and extra headers."""
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = headers or {}

    def response(self) -> Response:
        """Render the error as a JSON response, in the company's error shape."""
        body: dict[str, Any] = {"message": self.message}
        if self.errors is not None:
            body["errors"] = self.errors
        if g.get("error_shape") == "v2":
            body = v2_error(self.status, self.message, self.errors)
        response = jsonify(body)
        response.status_code = self.status
        response.headers.update(self.headers)
        return response


def v2_error(status: int, message: str, errors: Any = None) -> dict[str, Any]:
    """An error as Procore's v2.0 endpoints write it: {"error": {code, message, details}}."""
    details = [{"reason_code": "INVALID_PROPERTY", "message": f"{field} {text}"}
               for field, texts in (errors.items() if isinstance(errors, dict) else ())
               for text in (texts if isinstance(texts, list) else [texts])]
    code = HTTPStatus(status).phrase.upper().replace(" ", "_") if status in _STATUSES else "ERROR"
    return {"error": {"code": code, "message": message, "details": details}}


def get_db() -> sqlite_utils.Database:
    """The sandbox database for this request, opened on first use and closed at teardown."""
    if "sandbox_db" not in g:
        g.sandbox_db = connect(current_app.config["SANDBOX_DB_PATH"])
    db: sqlite_utils.Database = g.sandbox_db
    return db


def close_db(_exc: BaseException | None = None) -> None:
    """Close this request's database connection, if one was opened."""
    db = g.pop("sandbox_db", None)
    if db is not None:
        db.close()


def json_body() -> dict[str, Any]:
    """The request's JSON object, or a 400 when the body is not a JSON object."""
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object")
    return body


def int_arg(name: str, *, required: bool = False) -> int | None:
    """An integer query parameter; 400 when it is malformed or missing but required."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        if required:
            raise ApiError(400, f"{name} is required", {name: ["can't be blank"]})
        return None
    try:
        return int(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer", {name: ["is not a number"]}) from None


def paged(items: list[dict[str, Any]]) -> Response:
    """Answer one page of ``items`` with Procore's Total, Per-Page and Link headers."""
    page = max(int_arg("page") or 1, 1)
    per_page = min(max(int_arg("per_page") or DEFAULT_PER_PAGE, 1), MAX_PER_PAGE)
    total = len(items)
    last = max((total + per_page - 1) // per_page, 1)
    response = jsonify(items[(page - 1) * per_page:page * per_page])
    response.headers["Total"] = str(total)
    response.headers["Per-Page"] = str(per_page)
    links = []
    if page > 1:
        links += [f'<{_page_url(1, per_page)}>; rel="first"',
                  f'<{_page_url(min(page - 1, last), per_page)}>; rel="prev"']
    if page < last:
        links += [f'<{_page_url(page + 1, per_page)}>; rel="next"',
                  f'<{_page_url(last, per_page)}>; rel="last"']
    if links:
        response.headers["Link"] = ", ".join(links)
    return response


def _page_url(page: int, per_page: int) -> str:
    """This request's URL with page and per_page replaced."""
    args = [(key, value) for key, value in request.args.items(multi=True)
            if key not in ("page", "per_page")]
    args += [("page", str(page)), ("per_page", str(per_page))]
    return f"{request.base_url}?{urlencode(args)}"


def parse_decimal(value: Any, field: str, errors: dict[str, list[str]]) -> Decimal | None:
    """Parse a number sent as a JSON number or string; record a field error when invalid."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        errors.setdefault(field, []).append("is not a number")
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        errors.setdefault(field, []).append("is not a number")
        return None
    if not number.is_finite():
        errors.setdefault(field, []).append("is not a number")
        return None
    return number


def as_number(text: str | None) -> float | None:
    """A stored decimal as a JSON number, the way Procore returns cost estimate values."""
    return None if text is None else float(Decimal(text))


def decimal_text(number: Decimal | None) -> str | None:
    """A decimal as stored text without exponent notation."""
    return None if number is None else format(number, "f")


def form_object(name: str) -> dict[str, str]:
    """Collect ``name[key]`` fields of a multipart or urlencoded form into a dict."""
    prefix = f"{name}["
    return {key[len(prefix):-1]: value for key, value in request.form.items()
            if key.startswith(prefix) and key.endswith("]")}
