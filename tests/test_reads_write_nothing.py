"""Reading a ticket writes nothing: no read of the API, the pages, the CSV or the document
changes a row, even for a ticket stored before its project's codes were read."""
from __future__ import annotations

import pytest

from models import db
from tests.test_review_pages import new_ticket, sign_in
from tests.test_ticket_reads import StatementCounter

pytestmark = pytest.mark.live

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "UPSERT")


def writes_during(engine, read) -> list[str]:
    """The data-changing statements the database ran while `read` ran."""
    with StatementCounter(engine) as counter:
        read()
    return [s for s in counter.statements if s.lstrip().upper().startswith(WRITES)]


def test_no_read_of_a_ticket_writes(app, client, acme):
    browser = sign_in(app, client, acme)
    app.extensions.pop("project_system_caches", None)  # the codes are not known: pending
    ticket = new_ticket(client, acme)
    assert ticket["routing_pending"] is True
    written = new_ticket(client, acme, labor=[{"trade": "Laborer", "hours": 2, "rate": 50,
                                               "costCode": "02-200"}])
    approved = client.post(f"/v1/tickets/{written['id']}/approve", headers=acme.headers, json={})
    assert approved.status_code == 200, approved.json
    app.extensions.pop("project_system_caches", None)  # as in a process that just started
    with app.app_context():
        engine = db.engine
    reads = {
        "the ticket": lambda: client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers),
        "a written ticket": lambda: client.get(f"/v1/tickets/{written['id']}", headers=acme.headers),
        "the list": lambda: client.get("/v1/tickets?status=submitted", headers=acme.headers),
        "the CSV": lambda: client.get("/v1/tickets/export.csv", headers=acme.headers),
        "the queue": lambda: browser.get("/queue?to_check=1"),
        "the ticket page": lambda: browser.get(f"/tickets/{ticket['id']}"),
        "the document": lambda: client.get(f"/v1/tickets/{ticket['id']}/document.pdf",
                                           headers=acme.headers),
    }
    for name, read in reads.items():
        answers = []
        assert writes_during(engine, lambda answers=answers, read=read: answers.append(read())) == [], name
        assert answers[0].status_code == 200, (name, answers[0].status_code)
    routed = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert routed["routing_pending"] is False and routed["routing"][0]["budget_code"] == "02-200.L"
