"""GET /v1/openapi.json: the OpenAPI 3.1 document, generated from the route declarations;
GET /v1/docs: the same document rendered for people."""
from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, render_template
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from blueprints.api import OPERATIONS, Operation, api_route, error_codes, openapi_path
from blueprints.openapi_texts import (
    ACCEPTED_TEXT,
    API_DESCRIPTION,
    BINARY_BODY_TEXT,
    ERROR_TEXT,
    TAGS,
)
from models.schemas import (
    NO_NUL,
    DocumentSchema,
    ErrorBody,
    Link,
    NteStatus,
    ProjectList,
    RateSheet,
    ShareLinkCreated,
    SignatureRequestCreated,
    Ticket,
    WebhookEvent,
    WebhookEventType,
)

bp = Blueprint("openapi", __name__)

REF = "#/components/schemas/{model}"

def _schema_models() -> list[tuple[type[BaseModel], str]]:
    """Every model of a documented operation in the one mode it is used in: bodies as they are
    validated, responses (and the error body) as they are serialised.

    Each model is used one way only, so Pydantic gives each shape one component under its
    own name instead of an `-Input` and an `-Output` copy.
    """
    pairs: list[tuple[type[BaseModel], str]] = [(ErrorBody, "serialization"),
                                                 (WebhookEvent, "serialization")]
    for operation in OPERATIONS:
        for model, mode in ((operation.body, "validation"), (operation.response, "serialization"),
                            (operation.accepted, "serialization")):
            if model is not None and (model, mode) not in pairs:
                pairs.append((model, mode))
    return pairs


def _query_parameters(model: type[BaseModel], components: dict[str, Any]) -> list[dict[str, Any]]:
    """Expand a query model into OpenAPI parameters; a named type (such as TicketStatus) refers
    to its component, which a response shape has already put into the document."""
    schema = model.model_json_schema(ref_template=REF, schema_generator=DocumentSchema)
    missing = set(schema.get("$defs", {})) - set(components)
    if missing:
        raise RuntimeError(f"query types without a component: {sorted(missing)}")
    required = set(schema.get("required", []))
    parameters = []
    for name, prop in schema.get("properties", {}).items():
        prop = {k: v for k, v in prop.items() if k != "title"}
        description = prop.pop("description", None)
        parameter = {"name": name, "in": "query", "required": name in required, "schema": prop}
        if description:
            parameter["description"] = description
        parameters.append(parameter)
    return parameters


def _path_parameters(rule: str) -> list[dict[str, Any]]:
    """Document every path variable of a rule as a required number or string (a string holds no
    NUL character: every route refuses one, services/platform/web.py)."""
    return [{"name": name, "in": "path", "required": True,
             "schema": {"type": "integer", "minimum": 1} if converter == "int:"
             else {"type": "string", "pattern": NO_NUL}}
            for converter, name in re.findall(r"<([^:<>]+:)?([^<>]+)>", rule)]


def _path_names(rule: str) -> list[str]:
    """The names of a rule's path variables, in order."""
    return [name for _, name in re.findall(r"<([^:<>]+:)?([^<>]+)>", rule)]


# What an answer names that other operations take, for the document's links: a path parameter's
# name, and where the answer carries its value (a JSON pointer into the answer).
ANSWER_NAMES: dict[type[BaseModel], dict[str, str]] = {
    Ticket: {"ticket_id": "/id"},
    Link: {"token": "/token"},
    SignatureRequestCreated: {"ticket_id": "/ticket_id", "request_id": "/id"},
    RateSheet: {"sheet_id": "/id"},
    NteStatus: {"authorization_id": "/id"},
    ProjectList: {"project_id": "/data/0/id"},
    ShareLinkCreated: {"share_link_id": "/id"},
}


def _links(source: Operation) -> dict[str, Any]:
    """OpenAPI links from an answer that names something new (the ticket a create made, the
    projects a list shows) to each operation that takes it: in its path (with the source's own
    path values for the rest), or, for an operation with no path values, as a field of its body.

    An image download is left out: a new ticket has no signature image yet, so following the
    link would end in a 404 for a ticket that is there."""
    names = ANSWER_NAMES.get(source.response, {}) if source.response is not None else {}
    own = _path_names(source.rule)
    new = {name for name in names if name not in own}
    links: dict[str, Any] = {}
    for target in OPERATIONS if new else ():
        if (target.media_type or "").startswith("image/"):
            continue
        wanted = _path_names(target.rule)
        link: dict[str, Any] = {"operationId": target.endpoint.replace(".", "_")}
        if wanted and new & set(wanted) and set(wanted) <= set(names) | set(own):
            link["parameters"] = {name: f"$response.body#{names[name]}" if name in names
                                  else f"$request.path.{name}" for name in wanted}
        elif not wanted and target.body is not None and new & set(target.body.model_fields):
            link["requestBody"] = {name: f"$response.body#{names[name]}"
                                   for name in sorted(new & set(target.body.model_fields))}
        else:
            continue
        links[link["operationId"]] = link
    return links


RATE_LIMIT_HEADERS = {
    "RateLimit-Limit": {"description": "Requests the key may make in the window.",
                        "schema": {"type": "integer", "minimum": 0}},
    "RateLimit-Remaining": {"description": "Requests left in the window after this one.",
                            "schema": {"type": "integer", "minimum": 0}},
    "RateLimit-Reset": {"description": "Unix time (seconds) at which the oldest counted request "
                                       "leaves the window.",
                        "schema": {"type": "integer", "minimum": 0}},
}


UPLOAD_OFFSET_HEADER = {"description": "Bytes of the photo the server holds, from byte 0 on: "
                                       "the next piece starts at this byte.",
                        "schema": {"type": "integer", "minimum": 0}}


def _header_parameters(operation: Operation) -> list[dict[str, Any]]:
    """The request headers a route reads, each optional and described."""
    return [{"name": name, "in": "header", "required": False, "description": text,
             "schema": {"type": "string", "pattern": r"^bytes \d{1,10}-\d{1,10}/\d{1,10}$"}
             if name == "Content-Range" else {"type": "string"}}
            for name, text in operation.headers.items()]


def _error_response(status: int, codes: tuple[str, ...], text: str | None = None, *,
                    limited: bool = False) -> dict[str, Any]:
    """An error response object pointing at the shared error schema, naming its codes."""
    listed = ", ".join(f"`{code}`" for code in codes)
    response: dict[str, Any] = {
        "description": f"{text or ERROR_TEXT.get(status, 'Error.')} Codes: {listed}.",
        "content": {"application/json": {"schema": {"$ref": REF.format(model="ErrorBody")}}},
        "x-error-codes": list(codes),
    }
    headers: dict[str, Any] = dict(RATE_LIMIT_HEADERS) if limited else {}
    if status == 429:
        headers["Retry-After"] = {"description": "Seconds until the key may call again.",
                                  "schema": {"type": "integer"}}
    if status == 503:
        headers["Retry-After"] = {"description": "Seconds to wait before sending again.",
                                  "schema": {"type": "integer"}}
    if "upload_offset_mismatch" in codes:
        headers["Upload-Offset"] = UPLOAD_OFFSET_HEADER
    if headers:
        response["headers"] = headers
    return response


# What checking any body can answer: cut short, or too large (a slow one never reaches the app:
# the serving layer reads bodies whole, services/platform/serving.py).
BODY_ERRORS: dict[int, tuple[str, ...]] = {
    400: ("body_incomplete",), 413: ("payload_too_large",),
}

KEY_ERRORS = ("api_key_missing", "api_key_malformed", "api_key_invalid", "api_key_revoked")


def _common_errors(operation: Operation) -> dict[int, tuple[str, ...]]:
    """The codes any route of this kind can answer, whatever its view does."""
    # Every route refuses a NUL character in the query string (services/platform/web.py, refuse_nul).
    codes: dict[int, tuple[str, ...]] = {400: ("validation_failed",)}
    if operation.body is not None:
        codes[400] = ("validation_failed", "invalid_json", "invalid_body") + \
            (("body_required",) if operation.body_required else ())
        codes[415] = ("unsupported_media_type",)
    if operation.body is not None or operation.binary_body:  # read first by services/platform/bodies.py
        codes = error_codes(codes, BODY_ERRORS)
    if not operation.public:
        codes[401] = KEY_ERRORS
        codes[429] = ("rate_limited",)
    if "<" in operation.rule:  # a path value no route takes (say, "a/b" or "x" for a number)
        codes[404] = ("not_found",)
    return codes


def _operation_object(operation: Operation, refs: dict, components: dict[str, Any]
                      ) -> dict[str, Any]:
    """Build the OpenAPI operation object for one route."""
    parameters = _path_parameters(operation.rule)
    if operation.query is not None:
        parameters += _query_parameters(operation.query, components)
    parameters += _header_parameters(operation)
    result: dict[str, Any] = {
        "operationId": operation.endpoint.replace(".", "_"),
        "summary": operation.summary,
        "tags": [operation.tag],
    }
    if operation.description:
        result["description"] = operation.description
    if parameters:
        result["parameters"] = parameters
    body = _request_body(operation, refs)
    if body is not None:
        result["requestBody"] = body
    ok = _success(operation, refs)
    responses: dict[str, Any] = {str(operation.success): ok}
    if operation.accepted is not None:
        responses["202"] = {
            "description": ACCEPTED_TEXT,
            "headers": {**ok.get("headers", {}), "Upload-Offset": UPLOAD_OFFSET_HEADER},
            "content": {"application/json": {"schema": refs[(operation.accepted, "serialization")]}}}
    codes = error_codes(_common_errors(operation), operation.errors)
    for status in sorted(codes):
        responses[str(status)] = _error_response(status, codes[status],
                                                 operation.extra_responses.get(status),
                                                 limited=not operation.public)
    result["responses"] = responses
    result["security"] = [] if operation.public else [{"bearerAuth": []}, {"apiKeyHeader": []}]
    return result


def _request_body(operation: Operation, refs: dict) -> dict[str, Any] | None:
    """The request body of an operation: its JSON model, or the binary types it takes."""
    if operation.body is not None:
        return {
            "required": operation.body_required,
            "content": {"application/json": {"schema": refs[(operation.body, "validation")]}},
        }
    if operation.binary_body:
        binary = {"schema": {"type": "string", "format": "binary"}}
        return {"required": True, "description": BINARY_BODY_TEXT,
                "content": dict.fromkeys(operation.binary_body, binary)}
    return None


def _success(operation: Operation, refs: dict) -> dict[str, Any]:
    """The success answer of an operation: its rate-limit headers, links and content."""
    ok: dict[str, Any] = {"description": "Success."}
    if not operation.public:
        ok["headers"] = dict(RATE_LIMIT_HEADERS)
    links = _links(operation)
    if links:
        ok["links"] = links
    if operation.response is not None:
        ok["content"] = {"application/json": {"schema": refs[(operation.response, "serialization")]}}
    elif operation.media_type == "application/json":  # free-form JSON (this very document)
        ok["content"] = {"application/json": {"schema": {"type": "object"}}}
    elif operation.media_type is not None:
        # A file: its own type by default, or plain bytes for a client that asks for them
        # (Accept: application/octet-stream), which is what generated clients take as a file.
        if not operation.media_type.startswith("text/"):  # images, PDF: bytes
            binary = {"schema": {"type": "string", "format": "binary"}}
            ok["content"] = {operation.media_type: binary, "application/octet-stream": binary}
        else:
            ok["content"] = {operation.media_type: {"schema": {"type": "string"}}}
    return ok


WEBHOOK_EVENTS: dict[WebhookEventType, str] = {
    WebhookEventType.SUBMITTED: "A ticket arrived, or a crew sent a correction of one sent back.",
    WebhookEventType.SIGNED: "A ticket was signed: from a signing link, or its signature was "
                             "sent after it.",
    WebhookEventType.SENT_BACK: "A ticket from a capture link was rejected and sent back to its "
                                "crew, who may send a correction.",
    WebhookEventType.WRITTEN: "A ticket was written into the project system; `data.external` "
                              "names the record.",
    WebhookEventType.REJECTED: "A ticket sent by a program was rejected.",
    WebhookEventType.RESTORED: "A rejected ticket was put back in the review queue.",
}

WEBHOOK_HEADERS = {
    "webhook-id": "The delivery's id, the same on every retry: drop one already handled.",
    "webhook-timestamp": "Unix time (seconds) of this attempt.",
    "webhook-signature": "Space-separated `v1,<base64>` HMAC-SHA256 signatures of "
                         "`{webhook-id}.{webhook-timestamp}.{body}`, one per secret in use "
                         "(two for a day after a rotation).",
}


def _webhooks(refs: dict) -> dict[str, Any]:
    """The document's `webhooks` section: each event the service POSTs to an endpoint."""
    body = refs[(WebhookEvent, "serialization")]
    return {str(event): {"post": {
        "operationId": "webhook_" + str(event).replace(".", "_"),
        "summary": text.split(";")[0].rstrip("."),
        "description": f"`{event}`: {text} The body's `type` is `{event}`.",
        "tags": ["webhooks"],
        "parameters": [{"name": name, "in": "header", "required": True, "description": about,
                        "schema": {"type": "string"}} for name, about in WEBHOOK_HEADERS.items()],
        "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
        "responses": {"200": {"description": "Any 2xx answer counts as received; anything "
                                             "else, or none within 10 seconds, is retried."}},
        "security": [],
    }} for event, text in WEBHOOK_EVENTS.items()}


def build_openapi_document() -> dict[str, Any]:
    """Assemble the whole OpenAPI 3.1.0 document from the registered operations."""
    refs, definitions = models_json_schema(_schema_models(), ref_template=REF,
                                           schema_generator=DocumentSchema)
    components = definitions.get("$defs", {})
    paths: dict[str, dict[str, Any]] = {}
    for operation in OPERATIONS:
        if operation.tag not in TAGS:
            raise RuntimeError(f"{operation.endpoint}: tag {operation.tag!r} is not one of TAGS")
        paths.setdefault(openapi_path(operation.rule), {})[operation.method] = \
            _operation_object(operation, refs, components)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Extra-Work Ticket API", "version": "1.0.0",
                 "description": API_DESCRIPTION},
        "servers": [{"url": "/v1"}],
        "tags": [{"name": name, "x-displayName": heading, "description": text}
                 for name, (heading, text) in TAGS.items()],
        "paths": paths,
        "webhooks": _webhooks(refs),
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer",
                               "description": "The API key as a bearer token: "
                                              "`Authorization: Bearer <key>`."},
                "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key",
                                 "description": "The API key in its own header: "
                                                "`X-API-Key: <key>`."},
            },
        },
    }


@api_route(bp, "/openapi.json", tag="openapi", public=True, media_type="application/json")
def get_openapi_document():
    """Read the OpenAPI 3.1 description of this API; no key needed.

    Generated from the route declarations and the models that validate requests, so it
    describes the server that serves it. People read it rendered at /v1/docs.
    """
    document = current_app.extensions.get("openapi_document")
    if document is None:
        document = current_app.extensions["openapi_document"] = build_openapi_document()
    return jsonify(document)


# Redoc, vendored with its licence in static/vendor/ (no CDN), renders /v1/docs in the browser.
REDOC_SCRIPT = "vendor/redoc-2.5.4.standalone.js"

# The pages' policy (services/platform/web.py), widened for this page only by what Redoc needs: it
# injects its styles as inline <style> elements and runs its search index in a worker made
# from a blob: address. Scripts still come from this server alone, and nothing is fetched
# from anywhere else (the logo Redoc's menu would load from its maker's CDN is blocked).
DOCS_CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "worker-src blob:",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'none'",
    "frame-ancestors 'none'",
])


@bp.get("/v1/docs")
def api_docs() -> Response:
    """The API reference for people: /v1/openapi.json rendered by the vendored Redoc."""
    response = Response(render_template("api_docs.html", REDOC_SCRIPT=REDOC_SCRIPT),
                        mimetype="text/html")
    response.headers["Content-Security-Policy"] = DOCS_CONTENT_SECURITY_POLICY
    return response
