"""The /v1 route decorator: authentication, input parsing, output shaping, OpenAPI registry.

Every JSON route is declared with `api_route`, naming the Pydantic models of its
body, query and response. The same declaration drives request validation and
the OpenAPI document, so the two cannot drift apart.
"""
from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint, Response, g, jsonify, request
from pydantic import BaseModel

from services.accounts import keys
from services.accounts.ratelimit import api_limit, presented_api_key
from services.platform.errors import ServiceError
from services.platform.validation import validate

API_PREFIX = "/v1"


@dataclass
class Operation:
    """One documented /v1 operation."""

    rule: str
    method: str
    endpoint: str
    summary: str
    tag: str
    body: type[BaseModel] | None
    query: type[BaseModel] | None
    response: type[BaseModel] | None
    errors: dict[int, tuple[str, ...]]
    public: bool
    body_required: bool
    description: str | None = None
    extra_responses: dict[int, str] = field(default_factory=dict)
    media_type: str | None = None
    binary_body: tuple[str, ...] = ()
    headers: dict[str, str] = field(default_factory=dict)
    accepted: type[BaseModel] | None = None
    success: int = 200


OPERATIONS: list[Operation] = []

# Error codes of the project-system calls behind a route: not connected yet, or the project
# system refused, could not be reached, or refused our credentials.
PROJECT_SYSTEM_ERRORS: dict[int, tuple[str, ...]] = {
    409: ("project_system_not_connected",),
    502: ("project_system_error", "project_system_unavailable", "project_system_auth_failed"),
    503: ("project_system_busy",),
}


def error_codes(*groups: dict[int, tuple[str, ...]]) -> dict[int, tuple[str, ...]]:
    """Merge status-to-codes maps, keeping each code once and in order."""
    merged: dict[int, tuple[str, ...]] = {}
    for group in groups:
        for status, codes in group.items():
            merged[status] = tuple(dict.fromkeys((*merged.get(status, ()), *codes)))
    return merged


class BadBody(ServiceError):
    """The request body is not a JSON object we can read."""

    status = 400
    code = "invalid_json"


def _reject_constant(name: str) -> None:
    """Refuse NaN and Infinity, which JSON does not allow."""
    raise ValueError(f"{name} is not a valid JSON number")


# The most characters an integer of a body may have: far past any real quantity or id, and
# short of the interpreter's own limit, whose refusal names its internals.
MAX_INTEGER_CHARS = 100


def _parse_int(text: str) -> int:
    """An integer of the body; one too long to be a real number is refused in plain words."""
    if len(text) > MAX_INTEGER_CHARS:
        raise BadBody("number too large: the body has an integer of more than "
                      f"{MAX_INTEGER_CHARS} digits")
    return int(text)


# What a JSON body may hold before it is parsed: containers ({ and [) and values (containers
# plus commas), and how deep it may nest. Tens of megabytes of tiny values would take many times
# their size in memory once parsed. Each limit is above the most its routes' documented bodies
# can hold (a ticket: 200 lines and 12 photos, about 230 objects and lists; a rate sheet: 3,000
# items; tests/test_openapi.py checks it), so only a body the document refuses meets one.
JSON_LIMITS = {"upload": (1_000, 10_000), "other": (4_000, 20_000)}
MAX_JSON_DEPTH = 8
_UPLOAD_ENDPOINTS = frozenset({"links.capture_submit", "tickets.create_ticket", "tickets.add_photos"})
# A JSON string, escapes included, to leave out of the count: text may hold any commas and brackets.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def _element_counts(raw: bytes) -> tuple[int, int]:
    """Containers and values of a raw JSON body (values: containers plus commas)."""
    containers = raw.count(b"{") + raw.count(b"[")
    return containers, containers + raw.count(b",")


def _check_json_size(raw: bytes) -> None:
    """Refuse a body with too many elements before parsing it.

    The bytes are counted at C speed; only a body over a limit is counted again without its
    strings, whose commas and brackets are text, not elements."""
    max_containers, max_values = JSON_LIMITS["upload" if request.endpoint in _UPLOAD_ENDPOINTS else "other"]
    containers, values = _element_counts(raw)
    if containers > max_containers or values > max_values:
        containers, values = _element_counts(_JSON_STRING.sub(b'""', raw))
    if containers > max_containers or values > max_values:
        raise BadBody(f"the JSON body has too many elements (at most {max_containers} objects and lists "
                      f"and {max_values} values)")


def _json_depth(value: Any) -> int:
    """How deeply objects and lists nest in a parsed value (iteratively)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def read_json_object(required: bool = True, *, refuse_nul: bool = True) -> dict[str, Any]:
    """Read the request body as a JSON object, refusing anything else with a clear 4xx (and a
    NUL character in any text, unless the caller checks the fields it reads: `refuse_nul`)."""
    raw = request.get_data(cache=True)
    if not raw.strip():
        if required:
            raise BadBody("a JSON object body is required", code="body_required")
        return {}
    if request.mimetype != "application/json":
        raise ServiceError("send the body as application/json", status=415,
                           code="unsupported_media_type")
    _check_json_size(raw)
    try:
        data = json.loads(raw, parse_constant=_reject_constant, parse_int=_parse_int)
    except RecursionError:
        raise BadBody("the JSON body is nested too deeply") from None
    except ValueError as error:
        raise BadBody(f"the body is not valid JSON: {error}") from error
    if not isinstance(data, dict):
        raise BadBody("the body must be a JSON object", code="invalid_body")
    if _json_depth(data) > MAX_JSON_DEPTH:
        raise BadBody(f"the JSON body is nested too deeply (at most {MAX_JSON_DEPTH} levels)")
    if refuse_nul:
        refuse_nul_in(data)
    return data


def refuse_nul_in(value: Any) -> None:
    """400 invalid_body when any text of a body holds a NUL character."""
    if _holds_nul(value):
        raise BadBody("the body holds a NUL character (\\u0000), which no text may contain",
                      code="invalid_body")


def _holds_nul(value: Any) -> bool:
    """Whether any text of a parsed JSON value holds a NUL character (keys are names: one
    that holds a NUL names nothing and is ignored like any other unknown one)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False


def authenticate_request(secret: str | None, malformed: bool) -> None:
    """Resolve the presented API key and remember the caller on flask.g."""
    record = keys.authenticate(secret, malformed_header=malformed)
    g.api_key = record
    g.company_id = record.company_id
    g.actor = record.actor


def to_json(result: Any) -> Response:
    """Serialise a view's return value: a model, a dict, or a ready Response."""
    if isinstance(result, Response):
        return result
    if isinstance(result, BaseModel):
        return Response(result.model_dump_json(exclude_none=False), mimetype="application/json")
    return jsonify(result)


def api_route(bp: Blueprint, rule: str, *, method: str = "GET", tag: str,
              body: type[BaseModel] | None = None, query: type[BaseModel] | None = None,
              response: type[BaseModel] | None = None,
              errors: dict[int, tuple[str, ...]] | None = None,
              public: bool = False, body_required: bool = True,
              extra_responses: dict[int, str] | None = None,
              validator: Callable[[Any], BaseModel] | None = None,
              media_type: str | None = None, binary_body: tuple[str, ...] = (),
              headers: dict[str, str] | None = None,
              accepted: type[BaseModel] | None = None, success: int = 200) -> Callable:
    """Register a /v1 route and document it; the view receives parsed `body` and `query`.

    `errors` maps each status the view itself can answer to the codes it answers with; the
    codes every route of its kind can answer (400 for bodies and queries; 413 and 415
    for bodies; 401, 429) are added by the document. `validator` replaces the plain model check of
    the body when the input has one validator of its own (it must raise the same 400). `media_type` names
    the content of a route that answers a file (such as image/jpeg) instead of JSON;
    `binary_body` the media types of a body the view reads as raw bytes (a photo). `headers`
    documents the request headers the view reads (name: description), and `accepted` the
    body of a 202 the view may answer instead of `response` (a piece of a photo kept).
    `success` is the status of a success: 201 for a create, 204 (no body) for a removal.
    """

    def decorator(view: Callable) -> Callable:
        @functools.wraps(view)
        def handler(**path_args: Any) -> Response:
            if not public:
                authenticate_request(*presented_api_key())
            kwargs: dict[str, Any] = dict(path_args)
            if query is not None:
                kwargs["query"] = validate(query, request.args.to_dict(flat=True))
            if body is not None:
                # A NUL is refused in the fields the body is read for; unknown ones are ignored.
                data = read_json_object(required=body_required, refuse_nul=False)
                kwargs["body"] = validator(data) if validator else validate(body, data)
                refuse_nul_in(kwargs["body"].model_dump())
            result = view(**kwargs)
            if success == 204:
                return Response(status=204)
            answer = to_json(result)
            if success != 200:
                answer.status_code = success
            return answer

        bp.add_url_rule(API_PREFIX + rule, endpoint=view.__name__,
                        view_func=handler if public else api_limit(handler), methods=[method])
        doc = (view.__doc__ or "").strip().splitlines()
        OPERATIONS.append(Operation(
            rule=rule, method=method.lower(), endpoint=f"{bp.name}.{view.__name__}",
            summary=doc[0] if doc else view.__name__, tag=tag, body=body, query=query,
            response=response, errors=errors or {}, public=public, body_required=body_required,
            description="\n".join(doc[1:]).strip() or None,
            extra_responses=extra_responses or {}, media_type=media_type, binary_body=binary_body,
            headers=headers or {}, accepted=accepted, success=success,
        ))
        return handler

    return decorator


def openapi_path(rule: str) -> str:
    """Convert a Flask rule such as '/tickets/<ticket_id>' to '/tickets/{ticket_id}'."""
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)
