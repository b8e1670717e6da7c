"""Procore's published contract for the calls the service makes, and checks against it.

The contract is a JSON file (``tests/contract/procore.json``): one entry per operation with
its method, path, query parameters, required headers, request body, and the statuses and
bodies it may answer, each field citing where Procore documents it. The sandbox checks every
``/rest`` request against it and answers the way Procore does when a request is wrong; tests
check recorded exchanges (request and answer) against the same file.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from flask import Flask, current_app, request

from sandbox.common import ApiError

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "tests" / "contract" / "procore.json"


@dataclass(frozen=True)
class Operation:
    """One operation of the contract, with its path as a pattern."""

    id: str
    method: str
    path: str
    pattern: re.Pattern[str]
    spec: dict[str, Any]


@lru_cache(maxsize=4)
def load(path: str) -> tuple[Operation, ...]:
    """The operations of a contract file."""
    document = json.loads(Path(path).read_text())
    operations = []
    for op_id, spec in document["operations"].items():
        pattern = re.escape(spec["path"])
        pattern = re.sub(r"\\\{[a-z_]+\\\}", r"[0-9]+", pattern)
        operations.append(Operation(op_id, spec["method"], spec["path"],
                                    re.compile(f"^{pattern}$"), spec))
    return tuple(operations)


def find(operations: tuple[Operation, ...], method: str, path: str) -> Operation | None:
    """The operation a request is for, by method and path."""
    return next((op for op in operations if op.method == method and op.pattern.match(path)),
                None)


def query_dict(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Query parameters as an object: ``name[]`` keys become lists, others strings."""
    query: dict[str, Any] = {}
    for key, value in pairs:
        if key.endswith("[]"):
            query.setdefault(key, []).append(value)
        else:
            query[key] = value
    return query


def form_dict(fields: list[tuple[str, str]], files: list[str]) -> dict[str, Any]:
    """A multipart form as nested objects: ``a[b]`` nests, ``a[]`` lists, files as "<file>"."""
    body: dict[str, Any] = {}
    for key, value in [*fields, *((name, "<file>") for name in files)]:
        parts = re.findall(r"[^\[\]]+|\[\]", key)
        node = body
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            if part == "[]":
                continue
            listed = index + 1 < len(parts) and parts[index + 1] == "[]"
            if last or (listed and index + 1 == len(parts) - 1):
                if listed:
                    node.setdefault(part, []).append(value)
                else:
                    node[part] = value
                break
            node = node.setdefault(part, {})
    return body


def _validator(schema: dict[str, Any]) -> Any:
    """A Draft 2020-12 validator for a schema."""
    from jsonschema import Draft202012Validator
    return Draft202012Validator(schema)


def _first_missing(error: Any) -> str | None:
    """The property a "required" error names."""
    if error.validator == "required":
        match = re.match(r"'([^']+)' is a required property", error.message)
        return match.group(1) if match else None
    return None


def check_request(op: Operation, query: dict[str, Any], headers: dict[str, str],
                  content_type: str, body: Any) -> list[str]:
    """Problems of a request against its operation (empty when it keeps the contract)."""
    problems = []
    for name in op.spec.get("headers", {}).get("required", []):
        if not any(key.lower() == name.lower() for key in headers):
            problems.append(f"header {name} is missing")
    for name in op.spec.get("headers", {}).get("forbidden", []):
        if any(key.lower() == name.lower() for key in headers):
            problems.append(f"header {name} must not be sent")
    query_schema = op.spec.get("query")
    if query_schema is not None:
        problems += [f"query: {_describe(error)}"
                     for error in _validator(query_schema).iter_errors(query)]
    request_spec = op.spec.get("request")
    if request_spec is None:
        if body not in (None, b"", "", {}):
            problems.append("a body was sent where none is documented")
        return problems
    schema = request_spec["schema"]
    if isinstance(body, dict):
        # Rails merges query parameters into the body's parameters.
        body = {**{key: value for key, value in query.items()
                   if key in schema.get("properties", {})}, **body}
    allowed = request_spec.get("content_types", ["application/json"])
    if content_type not in allowed:
        problems.append(f"content type {content_type or 'none'} is not one of {allowed}")
        return problems
    for error in _validator(schema).iter_errors(body):
        # A form carries every value as text: only its shape can be checked.
        if content_type == "multipart/form-data" and error.validator == "type" and \
                isinstance(error.instance, str):
            continue
        problems.append(f"body: {_describe(error)}")
    return problems


def check_response(op: Operation, status: int, content_type: str, body: Any) -> list[str]:
    """Problems of an answer against its operation's documented statuses and bodies."""
    responses = op.spec.get("responses", {})
    spec = responses.get(str(status))
    if spec is None:
        return [f"status {status} is not documented for {op.id}"]
    schema = spec.get("schema")
    if schema is None:
        expected = spec.get("content_type")
        if expected and content_type != expected:
            return [f"answer content type {content_type or 'none'} is not {expected}"]
        return []
    if content_type != spec.get("content_type", "application/json"):
        return [f"answer content type {content_type or 'none'} is not "
                f"{spec.get('content_type', 'application/json')}"]
    return [f"answer: {_describe(error)}" for error in _validator(schema).iter_errors(body)]


def _describe(error: Any) -> str:
    """One line naming where a schema error is (Rails style, below the wrapper) and what."""
    parts = list(error.absolute_path)
    if len(parts) > 1:
        parts = parts[1:]
    where = ""
    for part in parts:
        where += f"[{part}]" if isinstance(part, int) else f"{'.' if where else ''}{part}"
    return f"{where or '(top)'}: {error.message}"


def install(app: Flask) -> None:
    """Check every /rest request against the contract, when a contract file is configured."""
    path = app.config.get("SANDBOX_CONTRACT_PATH")
    if path is None:
        path = os.environ.get("SANDBOX_CONTRACT_PATH", str(DEFAULT_PATH))
    try:
        import jsonschema  # noqa: F401  (installed with the test extras)
    except ImportError:
        path = ""
    app.config["SANDBOX_CONTRACT_PATH"] = path if path and Path(path).exists() else ""


def check_current_request() -> None:
    """Answer an out-of-contract /rest request as Procore does: 404, 400 or 422 with the reason."""
    # Called by the guard after the token, company header and rate checks, as Procore does.
    path = current_app.config.get("SANDBOX_CONTRACT_PATH")
    if not path or not request.path.startswith("/rest/"):
        return
    op = find(load(path), request.method, request.path)
    if op is None:
        raise ApiError(404, f"No route matches [{request.method}] \"{request.path}\"")
    mimetype = request.mimetype or ""
    if mimetype == "multipart/form-data":
        body: Any = form_dict(list(request.form.items(multi=True)),
                              list(request.files.keys()))
    elif mimetype == "application/json":
        body = request.get_json(silent=True)
        if body is None:
            raise ApiError(400, "The request body is not valid JSON")
    else:
        body = request.get_data() or None
    problems = [problem for problem in check_request(
        op, query_dict(list(request.args.items(multi=True))), dict(request.headers), mimetype,
        body) if not problem.startswith("header ")]
    if not problems:
        return
    # Rails' strong parameters answer a missing key with this sentence; bad values are 422.
    for problem in problems:
        match = re.match(r"(?:body|query): [^:]*: '([^']+)' is a required property", problem)
        if match:
            raise ApiError(400, f"param is missing or the value is empty: {match.group(1)}")
    if any(problem.startswith(("query", "content type", "a body")) for problem in problems):
        raise ApiError(400, "Bad request: " + "; ".join(problems))
    errors: dict[str, list[str]] = {}
    for problem in problems:
        where, _, message = problem.removeprefix("body: ").partition(": ")
        errors.setdefault(where, []).append(message)
    details = "; ".join(f"{where} {message}" for where, messages in errors.items()
                        for message in messages)
    raise ApiError(422, f"Validation failed: {details}", errors)
