"""Checks recorded client exchanges against Procore's contract file (procore.json here)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from sandbox import contract
from tests.plugins.sandbox import Exchange

CONTRACT = Path(__file__).with_name("procore.json")
RATE_HEADERS = ("X-Rate-Limit-Limit", "X-Rate-Limit-Remaining", "X-Rate-Limit-Reset")


def operations() -> tuple[contract.Operation, ...]:
    """Every operation of the contract file."""
    return contract.load(str(CONTRACT))


def _request_body(exchange: Exchange) -> Any:
    """The request body as the contract sees it: JSON, or a form as nested objects."""
    if not exchange.body:
        return None
    if exchange.content_type == "application/json":
        return json.loads(exchange.body)
    if exchange.content_type == "application/x-www-form-urlencoded":
        return dict(parse_qsl(exchange.body.decode()))
    if exchange.content_type == "multipart/form-data":
        sent = Request(EnvironBuilder(method=exchange.method, data=exchange.body, headers={
            "Content-Type": exchange.headers["Content-Type"]}).get_environ())
        try:
            return contract.form_dict(list(sent.form.items(multi=True)),
                                      list(sent.files.keys()))
        finally:
            sent.close()
    return exchange.body


def _answer_body(exchange: Exchange) -> Any:
    """The answer body: JSON when it says so, else text."""
    kind = exchange.answer_headers.get("Content-Type", "").split(";")[0].strip()
    if kind == "application/json":
        return json.loads(exchange.answer_body)
    return exchange.answer_body.decode("utf-8", "replace")


def problems(exchange: Exchange) -> list[str]:
    """Everything in one exchange that the contract does not allow (empty when none)."""
    url = urlsplit(exchange.url)
    op = contract.find(operations(), exchange.method, url.path)
    if op is None:
        return [f"{exchange.method} {url.path} is not an operation of the contract"]
    found = contract.check_request(op, contract.query_dict(parse_qsl(url.query)),
                                   exchange.headers, exchange.content_type,
                                   _request_body(exchange))
    kind = exchange.answer_headers.get("Content-Type", "").split(";")[0].strip()
    found += contract.check_response(op, exchange.status, kind if exchange.answer_body else "",
                                     _answer_body(exchange) if exchange.answer_body else None)
    if url.path.startswith("/rest/"):
        found += [f"answer lacks the {name} header" for name in RATE_HEADERS
                  if name not in exchange.answer_headers]
    return [f"{op.id} {exchange.method} {url.path} -> {exchange.status}: {problem}"
            for problem in found]
