"""What JSON Schema cannot make, for the cases the document calls valid: a schemathesis hook.

Registered on import (tests/test_schemathesis.py imports it). The same check from the command
line, with every check and phase, against a served app (`make run`; lift API_RATE_LIMIT), from
the repository's root (schemathesis.toml is read there):
`PYTHONPATH=. SCHEMATHESIS_HOOKS=tests.schemathesis_hooks .venv/bin/schemathesis run --checks all
--phases examples,coverage,fuzzing,stateful -H "X-API-Key: <key>" http://HOST:PORT/v1/openapi.json`.
"""
from __future__ import annotations

import schemathesis

from support.images import data_url, jpeg_bytes, png_bytes

# What JSON Schema cannot make, for the cases the document calls valid: an image (a photo's
# data, a drawn signature, a photo sent as the body itself) and a CSV whose rows are a rate sheet.
PHOTO = jpeg_bytes(16, 12)
PHOTO_URL = data_url(PHOTO)
DRAWING_URL = data_url(png_bytes(24, 8), "image/png")
SHEET_CSV = ("kind,item,st,ot,dt,hourly,daily,unit_cost,percent\r\n"
             "labor,Journeyman Electrician,85,127.5,170,,,,\r\n"
             "equipment,Scissor lift,,,,35,220,,\r\n"
             "material,EMT conduit 3/4in,,,,,,2.35,\r\n"
             "material_markup,,,,,,,,10\r\n")
# A share link's expiry: in the future.
SHARE_EXPIRY = "2199-12-31T00:00:00Z"
# A webhook endpoint's address: https on a public host (one named by a private number is refused).
WEBHOOK_URL = "https://hooks.example.com/tickets"
# A rate sheet's lists, each naming its items by this field once (compared without case).
SHEET_NAMES = {"labor": "classification", "equipment": "description", "materials": "description"}


def _once_each(items: list, field: str) -> list:
    """The items of a rate sheet's list, without those repeating an earlier one's name."""
    seen, kept = set(), []
    for item in items:
        name = item.get(field) if isinstance(item, dict) else None
        key = name.strip().casefold() if isinstance(name, str) else None
        if key is None or key not in seen:
            kept.append(item)
        seen.add(key)
    return kept


def _one_choice(case):
    """A backup package's query names tickets or a change event, exactly one of the two."""
    query = dict(case.query or {})
    if query.get("tickets") is not None:
        query.pop("change_event_id", None)
    elif query.get("change_event_id") is None:
        query["tickets"] = "T-0000ABCD"
    case.query = query
    return case


def _valid_body(path: str, body: dict) -> dict:
    """A generated body with the content its words ask for: images, a webhook address, a
    share link's expiry, a sheet's CSV and items."""
    if isinstance(body.get("photos"), list):
        body["photos"] = [dict(photo, data_url=PHOTO_URL)
                          if isinstance(photo, dict) and isinstance(photo.get("data_url"), str) else photo
                          for photo in body["photos"]]
    if isinstance(body.get("signature"), dict) and isinstance(body["signature"].get("image"), str):
        body["signature"] = dict(body["signature"], image=DRAWING_URL)
    if path.startswith("/webhooks") and isinstance(body.get("url"), str):
        body["url"] = WEBHOOK_URL
    if path == "/share-links" and isinstance(body.get("expires_at"), str) and body["expires_at"]:
        body["expires_at"] = SHARE_EXPIRY
    if "rate-sheets" in path:
        if isinstance(body.get("csv"), str):
            body["csv"] = SHEET_CSV
        for name, field in SHEET_NAMES.items():
            if isinstance(body.get(name), list):
                body[name] = _once_each(body[name], field)
    return body


@schemathesis.hook
def map_case(context, case):
    """Cases the document calls valid carry a real image where it takes one, a readable CSV for
    a sheet, each item of a sheet once, a webhook address the service sends to, and a share
    link's expiry in the future: rules of content the document states in words."""
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return case
    if case.operation.path.endswith("/photo-uploads/{key}"):
        case.body = PHOTO
        return case
    if case.operation.path.endswith("/backup-package"):
        return _one_choice(case)
    if isinstance(case.body, dict):
        case.body = _valid_body(case.operation.path, dict(case.body))
    return case
