"""Every optional text field a ticket is sent and shown with shows in each place its
declaration names (TicketText), and in no place it does not name.

The fields and their places are read off the declaration, so a field added there is checked
everywhere at once; the same check with every field declared for every place, then for none,
fails when a place keeps a hand list of its own instead of reading the declaration.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import html
import io
import json
import re

import pytest
from flask_babel import force_locale, gettext

from models import Ticket, db
from models.schemas import Shown, Shows, TicketText, ticket_fields
from services.tickets import signatures
from support.images import data_url, png_bytes
from tests.mailbox import smtp_server
from tests.test_approval import act, origin_rows, ticket_body
from tests.test_documents import pdf_text
from tests.test_links import make_link
from tests.test_review_pages import sign_in
from tests.test_signing import ask, signing_path

pytestmark = pytest.mark.live


@pytest.fixture(params=["as declared", "every place", "no place"])
def declared(request, monkeypatch) -> list:
    """The declared fields; in the other runs each one is declared for every place, or for none
    (so a place that keeps a hand list shows a field it should not, or misses one)."""
    if request.param != "as declared":
        shows = frozenset(Shows) if request.param == "every place" else frozenset()
        for info in TicketText.model_fields.values():
            monkeypatch.setattr(info, "metadata", [
                dataclasses.replace(item, shows=shows) if isinstance(item, Shown) else item
                for item in info.metadata])
    fields = ticket_fields()
    assert {"sub", "captured_by", "authorization_ref"} <= {field.name for field in fields}
    return fields


def places(declared: list, value_of: dict[str, str], place: Shows) -> tuple[list, list]:
    """The (field, value) pairs declared for a place, and those not."""
    shown = [(f, value_of[f.name]) for f in declared if place in f.shows]
    return shown, [(f, value_of[f.name]) for f in declared if place not in f.shows]


def queue_row(page: str, ticket_id: str) -> str:
    """The queue's row of a ticket, as HTML."""
    return re.search(rf'<tr class="queue-row[^"]*" data-ticket="{ticket_id}">.*?</tr>', page,
                     re.S).group(0)


def test_every_optional_field_shows_where_its_declaration_says(app, client, acme, tmp_path,
                                                                sandbox_server, declared):
    value_of = {field.name: f"Qz{index}{field.name.replace('_', '')}"
                for index, field in enumerate(declared)}
    made = client.post("/v1/tickets", headers=acme.headers,
                       json=ticket_body(acme.project()["id"], **value_of))
    assert made.status_code == 200, made.json
    ticket_id = made.json["id"]
    assert {name: made.json[name] for name in value_of} == value_of  # the API: sent and shown

    def check(place: Shows, text: str, shows=lambda field, value, text: value in text) -> None:
        shown, left_out = places(declared, value_of, place)
        for field, value in shown:
            assert shows(field, value, text), f"{place}: {field.name} is not shown"
        for field, value in left_out:
            assert value not in text, f"{place}: {field.name} is shown though not declared"

    # The crew's capture form asks each field declared there, in the crew's language.
    link = make_link(client, acme)
    form = client.get(f"/c/{link['token']}?lang=es").get_data(as_text=True)
    check(Shows.CAPTURE, form, lambda f, v, text: f'name="{f.name}"' in text)
    for field in ticket_fields(Shows.CAPTURE):
        assert f"<span>{field.ask or field.label}" not in form, f"{field.name} asked in English"

    exported = client.get("/v1/tickets/export.csv", headers=acme.headers).get_data(as_text=True)
    rows = list(csv.DictReader(io.StringIO(exported[1:])))
    assert len(rows) == 3  # a row a line, each with the ticket's fields
    for row in rows:
        check(Shows.CSV, json.dumps(row), lambda f, v, text, row=row: row.get(f.name) == v)

    browser = sign_in(app, client, acme)
    page = html.unescape(client.get(f"/tickets/{ticket_id}").get_data(as_text=True))
    facts = re.search(r'<dl class="facts">.*?</dl>', page, re.S).group(0)
    check(Shows.FACTS, facts, lambda f, v, text: f">{v}</dd>" in text and f.label in text)
    # The document lists the same facts (its history names who recorded the ticket anyway).
    document = client.get(f"/v1/tickets/{ticket_id}/document.pdf", headers=acme.headers)
    text = " ".join(pdf_text(document.data, tmp_path).split())
    for field, value in places(declared, value_of, Shows.FACTS)[0]:
        assert f"{field.label} {value}" in text, f"the document does not show {field.name}"

    queue = html.unescape(browser.get("/queue").get_data(as_text=True))
    check(Shows.QUEUE, queue_row(queue, ticket_id))

    for field in declared:
        found = client.get("/v1/tickets", headers=acme.headers,
                           query_string={"q": value_of[field.name].lower()}).json["data"]
        assert ([t["id"] for t in found] == [ticket_id]) == (Shows.SEARCH in field.shows), \
            f"search: {field.name}"

    # The signer reads the declared fields in Spanish, in the e-mail and on the page, and the
    # digest of what they sign covers the fields the page shows.
    with app.test_request_context("/"), force_locale("es"):
        spanish = {field.name: gettext(field.label) for field in declared}
    with smtp_server() as mailbox:
        app.config.update(mailbox.settings())
        path = signing_path(ask(client, acme, ticket_id, email="sam@gc.example", phone=None,
                                language="es"))
        (message,) = mailbox.messages
    check(Shows.EMAIL, message.get_content().replace("\r\n", "\n"),
          lambda f, v, text: f"\n{spanish[f.name]}: {v}\n" in text)
    signing = html.unescape(client.get(path).get_data(as_text=True))
    work = re.search(r'<dl class="facts">.*?</dl>', signing, re.S).group(0)
    check(Shows.SIGNING, work, lambda f, v, text: f"<dt>{spanish[f.name]}</dt><dd>{v}</dd>" in text)
    with app.app_context():
        content = signatures.shown_content(db.session.get(Ticket, ticket_id))
    check(Shows.SIGNING, json.dumps(content), lambda f, v, text: content["texts"][f.name] == v)

    # Procore's change event, as the sandbox stores it.
    approved = act(client, acme, ticket_id, "approve")
    assert approved.status_code == 200, approved.json
    (event,) = origin_rows(sandbox_server, "change_events", ticket_id)
    check(Shows.PROCORE, event["description"], lambda f, v, text: f"\n{f.label}: {v}\n" in text)


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


def test_a_signature_on_the_content_before_its_texts_still_matches_its_ticket(app, client, acme,
                                                                             tmp_path):
    """Version 2 of what a signer is shown adds the texts the signing page shows; a signature
    given on version 1 still matches its unchanged ticket, and stops matching once it changes."""
    made = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(
        acme.project()["id"], captured_by="Lee Park", signature={
            "name": "Sam Ortiz", "image": data_url(png_bytes(), "image/png")}))
    assert made.status_code == 200, made.json
    with app.app_context():
        record = db.session.get(Ticket, made.json["id"])
        now = signatures.content_digest(record)
        assert record.signature["content_sha256"] == now  # sealed on the current version
        older = signatures.shown_content(record, version=1)
        assert "texts" not in older and signatures.shown_content(record)["texts"] == {
            "captured_by": "Lee Park"}
        before = hashlib.sha256(json.dumps(older, sort_keys=True, separators=(",", ":"),
                                           ensure_ascii=False).encode()).hexdigest()
        assert before != now
        assert signatures.content_digest(record, before) == before
        assert signatures.content_digest(record, "0" * 64) == now
        record.signature = {**record.signature, "content_sha256": before}
        db.session.commit()

    def document_text() -> str:
        answer = client.get(f"/v1/tickets/{made.json['id']}/document.pdf", headers=acme.headers)
        return " ".join(pdf_text(answer.data, tmp_path).split())

    assert before in document_text() and "changed after it was signed" not in document_text()
    with app.app_context():
        record = db.session.get(Ticket, made.json["id"])
        record.directed_by = "Someone else"
        db.session.commit()
    assert "changed after it was signed" in document_text()
