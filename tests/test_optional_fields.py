"""Every optional text field a ticket is sent and shown with reaches the CSV and the document.

The fields are read off the models, so a field added to the input and the output shapes but
left out of the CSV's columns or the document's facts fails here.
"""
from __future__ import annotations

import csv
import io
import types
import typing

import pytest

from models.schemas import TicketInput, TicketSummary
from tests.test_documents import pdf_text

pytestmark = pytest.mark.live


def optional_text_fields() -> list[str]:
    """The input's optional text fields that the output shape shows too."""
    def optional_text(annotation) -> bool:
        return (typing.get_origin(annotation) in (typing.Union, types.UnionType)
                and set(typing.get_args(annotation)) == {str, type(None)})
    return [name for name, field in TicketInput.model_fields.items()
            if name in TicketSummary.model_fields and optional_text(field.annotation)]


def test_the_csv_and_the_document_carry_every_optional_text_field(client, acme, tmp_path):
    fields = optional_text_fields()
    assert {"captured_by", "authorization_ref"} <= set(fields)
    values = {name: f"{name.replace('_', ' ')} Qz7" for name in fields}
    body = {"project_id": acme.project()["id"], "description": "Cut the slab", "reason": "Gas",
            "directed_by": "Sam", **values,
            "labor": [{"trade": "Laborer", "hours": 2, "rate": 50, "costCode": "02-200"}]}
    made = client.post("/v1/tickets", headers=acme.headers, json=body)
    assert made.status_code == 200, made.json
    assert {name: made.json[name] for name in fields} == values  # sent and shown

    exported = client.get("/v1/tickets/export.csv", headers=acme.headers).get_data(as_text=True)
    (row,) = csv.DictReader(io.StringIO(exported))
    for name, value in values.items():
        assert value in row.values(), f"the CSV has no column for {name}"

    document = client.get(f"/v1/tickets/{made.json['id']}/document.pdf", headers=acme.headers)
    assert document.status_code == 200
    text = " ".join(pdf_text(document.data, tmp_path).split())
    for name, value in values.items():
        assert value in text, f"the document does not show {name}"


def test_the_document_and_the_code_agree_on_blank_dates_and_numeric_times(client, acme):
    """Schemathesis found both: a blank worked_on is none (documented now), and a taken_at of
    "0.5" was read as seconds since 1970 (refused now, as the document always said)."""
    document = client.get("/v1/openapi.json").json
    ticket_input = document["components"]["schemas"]["TicketInput"]["properties"]["worked_on"]
    assert {"type": "string", "maxLength": 0} in ticket_input["anyOf"]
    made = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": acme.project()["id"], "description": "d", "reason": "r", "directed_by": "s",
        "worked_on": ""})
    assert made.status_code == 200
    from support.images import jpeg_bytes

    refused = client.put(f"/v1/tickets/{made.json['id']}/photo-uploads/k1?taken_at=0.5",
                         headers={**acme.headers, "Content-Type": "image/jpeg"}, data=jpeg_bytes())
    assert refused.status_code == 400 and refused.json["error"]["code"] == "validation_failed"


def test_times_are_rfc_3339_as_documented_and_blank_is_none(client, acme):
    """A time is a date, a time and its offset, as `format: date-time` says, in the years 1900 to
    2199 (the document's pattern); the parser's other readings (a bare date, no offset, seconds)
    and times at the calendar's edge are refused; a blank one is none."""
    document = client.get("/v1/openapi.json").json
    signed_at = document["components"]["schemas"]["SignatureIn"]["properties"]["signed_at"]
    assert {"type": "string", "maxLength": 0} in signed_at["anyOf"]
    body = {"project_id": acme.project()["id"], "description": "d", "reason": "r", "directed_by": "s"}
    for given, status in (("", 200), ("2026-05-04T07:30:00Z", 200), ("2026-05-04t07:30:00.5+02:00", 200),
                          ("2026-05-04", 400), ("2026-05-04T07:30:00", 400), ("1714807800", 400),
                          ("0001-01-01T00:30:00+01:00", 400), ("9999-12-31T23:59:59Z", 400)):
        made = client.post("/v1/tickets", headers=acme.headers,
                           json={**body, "signature": {"name": "Sam", "signed_at": given}})
        assert made.status_code == status, (given, made.json)
