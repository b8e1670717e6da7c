"""A sub's live log through a share link: only that sub's tickets (of its project when it names
one), ended or expired links answer 410, another company's key reaches none of them, the
document only of the log's tickets, Spanish for a Spanish browser, a limit, and a CSV of the
page's rows."""
from __future__ import annotations

import csv
import datetime as dt
import io
import re

import pytest
import time_machine

from models import short_reference, utcnow
from tests.conftest import ConnectedTenant
from tests.test_approval import act, control, create
from tests.test_record_status import propose_on_commitment, sync
from tests.test_review_pages import sign_in

pytestmark = pytest.mark.live

REFERENCE = re.compile(r'<span class="reference">(T-[0-9A-F]{8})</span>')


def share(client, tenant: ConnectedTenant, **body) -> dict:
    """POST /v1/share-links and return the answer, checked to be a 201."""
    answer = client.post("/v1/share-links", headers=tenant.headers, json=body)
    assert answer.status_code == 201, answer.json
    assert answer.headers["Cache-Control"] == "no-store"
    return answer.json


def path_of(made: dict) -> str:
    """The page's path of a share link's address."""
    return "/l/" + made["url"].rsplit("/l/", 1)[1]


def shown(client, made: dict, **headers) -> list[str]:
    """The references the link's first page shows, in order."""
    page = client.get(path_of(made), headers=headers)
    assert page.status_code == 200, page.get_data(as_text=True)
    return REFERENCE.findall(page.get_data(as_text=True))


def project_at(tenant: ConnectedTenant, index: int) -> dict:
    """One of the tenant's seeded projects, its id as the API takes it."""
    found = tenant.projects[index]
    return dict(found, id=str(found["id"]))


@pytest.fixture
def tickets(client, acme, rival):
    """Two of Apex Concrete's tickets on two projects, one of Bolt Electric's, and a rival
    company's ticket naming a sub of the same name; their references by name."""
    first, second = project_at(acme, 0), project_at(acme, 1)
    return {"apex_a": create(client, acme, first, sub="Apex Concrete"),
            "apex_b": create(client, acme, second, sub="APEX CONCRETE"),
            "bolt": create(client, acme, first, sub="Bolt Electric"),
            "rival_apex": create(client, rival, sub="Apex Concrete")}


def test_a_share_link_shows_its_subs_tickets_and_none_of_another_sub_or_company(
        client, acme, tickets):
    made = share(client, acme, sub="apex concrete")
    assert made["project_id"] is None and made["expires_at"] is None and made["ended_at"] is None
    refs = shown(client, made)
    assert refs == [short_reference(tickets["apex_b"]["id"]), short_reference(tickets["apex_a"]["id"])]
    body = client.get(path_of(made)).get_data(as_text=True)
    for other in ("bolt", "rival_apex"):
        assert short_reference(tickets[other]["id"]) not in body
    assert "Waiting for the project manager" in body or "Waiting for a signature" in body


def test_a_project_link_shows_only_that_project(client, acme, tickets):
    made = share(client, acme, sub="Apex Concrete", project_id=project_at(acme, 1)["id"])
    assert made["project_id"] == project_at(acme, 1)["id"]
    assert shown(client, made) == [short_reference(tickets["apex_b"]["id"])]


def test_an_ended_link_answers_410_and_an_unknown_one_404(client, acme, tickets):
    made = share(client, acme, sub="Apex Concrete")
    assert client.delete(f"/v1/share-links/{made['id']}", headers=acme.headers).status_code == 204
    for path in (path_of(made), path_of(made) + "/log.csv",
                 f"{path_of(made)}/tickets/{tickets['apex_a']['id']}/document.pdf"):
        gone = client.get(path)
        assert gone.status_code == 410, path
        assert gone.mimetype == "text/html" and "no longer works" in gone.get_data(as_text=True)
        assert "T-" not in gone.get_data(as_text=True)
    # Ending again changes nothing; the list shows when it was ended.
    assert client.delete(f"/v1/share-links/{made['id']}", headers=acme.headers).status_code == 204
    listed = client.get("/v1/share-links", headers=acme.headers).json
    assert listed["total"] == 1 and listed["data"][0]["ended_at"] is not None
    assert "url" not in listed["data"][0]
    unknown = client.get("/l/" + "x" * 32)
    assert unknown.status_code == 404 and "does not work" in unknown.get_data(as_text=True)


def test_an_expired_link_answers_410(client, acme, tickets):
    expires = (utcnow() + dt.timedelta(days=2)).replace(microsecond=0)
    made = share(client, acme, sub="Apex Concrete", expires_at=expires.isoformat())
    assert dt.datetime.fromisoformat(made["expires_at"]) == expires
    assert len(shown(client, made)) == 2
    with time_machine.travel(expires - dt.timedelta(seconds=1)):
        assert client.get(path_of(made)).status_code == 200
    with time_machine.travel(expires + dt.timedelta(seconds=1)):
        assert client.get(path_of(made)).status_code == 410


def test_an_expiry_in_the_past_or_without_offset_is_refused(client, acme):
    for expires in ((utcnow() - dt.timedelta(minutes=1)).isoformat(), "2099-01-01T00:00:00"):
        answer = client.post("/v1/share-links", headers=acme.headers,
                             json={"sub": "Apex Concrete", "expires_at": expires})
        assert answer.status_code == 400, answer.json
        assert answer.json["error"]["details"][0]["field"] == "expires_at"


def test_another_companys_key_reaches_none_of_its_share_links(client, acme, rival, tickets):
    made = share(client, acme, sub="Apex Concrete")
    foreign = client.delete(f"/v1/share-links/{made['id']}", headers=rival.headers)
    missing = client.delete("/v1/share-links/999999", headers=rival.headers)
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json == missing.json and foreign.json["error"]["code"] == "share_link_not_found"
    assert client.delete("/v1/share-links/" + "9" * 25, headers=rival.headers).json == missing.json
    assert client.get("/v1/share-links", headers=rival.headers).json["total"] == 0
    # A project of another company is refused, and nothing is made.
    refused = client.post("/v1/share-links", headers=rival.headers,
                          json={"sub": "Apex Concrete", "project_id": project_at(acme, 1)["id"]})
    assert refused.status_code == 409 and refused.json["error"]["code"] == "project_not_found"
    assert client.get("/v1/share-links", headers=rival.headers).json["total"] == 0
    # The owner's link still works.
    assert len(shown(client, made)) == 2


def test_the_document_link_works_only_for_the_logs_tickets(client, acme, tickets):
    made = share(client, acme, sub="Apex Concrete", project_id=project_at(acme, 0)["id"])
    page = client.get(path_of(made)).get_data(as_text=True)
    own = f"{path_of(made)}/tickets/{tickets['apex_a']['id']}/document.pdf"
    assert f'href="{own}"' in page
    document = client.get(own)
    assert document.status_code == 200 and document.data.startswith(b"%PDF")
    assert document.headers["Cache-Control"] == "no-store"
    assert document.headers["Referrer-Policy"] == "no-referrer"
    # Another sub's, another project's and another company's tickets are not found through it.
    for other in ("bolt", "apex_b", "rival_apex"):
        answer = client.get(f"{path_of(made)}/tickets/{tickets[other]['id']}/document.pdf")
        assert answer.status_code == 404, other
        assert not answer.data.startswith(b"%PDF")


def test_the_page_is_in_spanish_when_the_browser_asks(client, acme, tickets):
    made = share(client, acme, sub="Apex Concrete")
    page = client.get(path_of(made), headers={"Accept-Language": "es-MX,es;q=0.9"})
    text = page.get_data(as_text=True)
    assert '<html lang="es">' in text
    assert "Boletas de Apex Concrete" in text and "Esperando" in text
    assert page.headers["Referrer-Policy"] == "no-referrer"
    assert page.headers["Cache-Control"] == "no-store"
    english = client.get(path_of(made), headers={"Accept-Language": "en-US"}).get_data(as_text=True)
    assert "Tickets of Apex Concrete" in english


def test_too_many_requests_through_one_link_answer_429_as_a_plain_page(app, client, acme, tickets):
    app.config["SHARE_LINK_RATE_LIMIT"] = "3 per minute"
    made = share(client, acme, sub="Apex Concrete")
    for _ in range(3):
        assert client.get(path_of(made)).status_code == 200
    limited = client.get(path_of(made) + "/log.csv")
    assert limited.status_code == 429 and limited.mimetype == "text/html"
    assert int(limited.headers["Retry-After"]) >= 1
    assert "Too many tries" in limited.get_data(as_text=True)
    assert "T-" not in limited.get_data(as_text=True)
    # its documents count on the same limit, and made-up tokens on their address's
    document = client.get(path_of(made) + f"/tickets/{tickets['apex_a']['id']}/document.pdf")
    assert document.status_code == 429 and document.mimetype == "text/html"
    for _ in range(3):
        assert client.get("/l/" + "x" * 32).status_code == 404
    assert client.get("/l/" + "y" * 32 + "/log.csv").status_code == 429
    # Another link of the company counts apart.
    assert client.get(path_of(share(client, acme, sub="Bolt Electric"))).status_code == 200


def test_the_csv_rows_are_the_pages_rows(client, acme, tickets):
    sent_back = act(client, acme, tickets["apex_a"]["id"], "reject", {"reason": "Hours look high"})
    assert sent_back.status_code == 200, sent_back.json
    made = share(client, acme, sub="Apex Concrete")
    page = client.get(path_of(made)).get_data(as_text=True)
    assert "Hours look high" in page and "Sent back" in page
    answer = client.get(path_of(made) + "/log.csv")
    assert answer.status_code == 200 and answer.mimetype == "text/csv"
    assert answer.headers["Cache-Control"] == "no-store"
    rows = list(csv.reader(io.StringIO(answer.get_data(as_text=True).lstrip("\ufeff"))))
    assert rows[0][:2] == ["Reference", "Date"]
    assert [row[0] for row in rows[1:]] == REFERENCE.findall(page)
    reasons = {row[0]: row[6] for row in rows[1:]}
    assert reasons[short_reference(tickets["apex_a"]["id"])] == "Hours look high"


def test_pages_of_the_log_go_newest_first_without_repeating(app, client, acme, monkeypatch):
    for i in range(27):
        client.post("/v1/tickets", headers=acme.headers, json={
            "project_id": acme.project()["id"], "description": f"Job {i}", "reason": "r",
            "directed_by": "d", "sub": "Cedar Framing",
            "labor": [{"trade": "Laborer", "hours": 1, "rate": 1, "costCode": "02-200"}]})
    made = share(client, acme, sub="Cedar Framing")
    first = shown(client, made)
    second = REFERENCE.findall(client.get(path_of(made) + "?page=2").get_data(as_text=True))
    assert len(first) == 25 and len(second) == 2 and not set(first) & set(second)
    listed = client.get("/v1/tickets", headers=acme.headers,
                        query_string={"sub": "Cedar Framing", "limit": 50}).json["data"]
    assert first + second == [short_reference(ticket["id"]) for ticket in listed]
    # The CSV holds every page's rows in the same order, read a batch at a time (an anonymous
    # download never loads a sub's whole history at once).
    from services.reports import share_links

    read, rows_of = [], share_links._rows
    monkeypatch.setattr(share_links, "CSV_BATCH", 10, raising=False)
    monkeypatch.setattr(share_links, "_rows", lambda link, limit=None, offset=0: (
        read.append(limit), rows_of(link, limit, offset))[1])
    answer = client.get(path_of(made) + "/log.csv").get_data(as_text=True)
    assert [row[0] for row in csv.reader(io.StringIO(answer.lstrip("\ufeff")))][1:] \
        == first + second
    assert read == [10, 10, 10]


def test_where_a_ticket_stands_in_procore_shows_its_change_event_and_change_order(
        client, acme, sandbox_server):
    ticket = create(client, acme, sub="Apex Concrete")
    written = act(client, acme, ticket["id"], "approve")
    assert written.status_code == 200, written.json
    propose_on_commitment(sandbox_server, written.json, "Apex Concrete, Inc.")
    control(sandbox_server, acme).put_on_change_orders(
        written.json["external"]["change_event_id"], "commitment", "pending", title="Apex extra")
    assert sync(client, acme, ticket["id"]).status_code == 200
    made = share(client, acme, sub="Apex Concrete")
    page = client.get(path_of(made)).get_data(as_text=True)
    number = written.json["external"]["number"]
    assert f"Change event {number} (open)" in page
    assert "On a change order not yet approved" in page
    assert re.search(r"Change order [^<(]+ \(pending\)", page), page
    # In Spanish, Procore's statuses too, each agreeing with what it is the status of.
    page = client.get(path_of(made), headers={"Accept-Language": "es"}).get_data(as_text=True)
    assert f"Evento de cambio {number} (abierto)" in page
    assert re.search(r"Orden de cambio [^<(]+ \(pendiente\)", page), page


def test_a_pm_makes_and_ends_a_share_link_on_the_links_page(app, client, acme, tickets):
    browser = sign_in(app, client, acme)
    page = client.get("/links").get_data(as_text=True)
    assert "Share a sub's live log" in page and "No share links yet." in page
    made = browser.post("/links/share", {"sub": "Apex Concrete", "project_id": "",
                                         "expires": (utcnow() + dt.timedelta(days=3)).date().isoformat()},
                        htmx=True)
    panel = made.get_data(as_text=True)
    assert made.status_code == 200 and panel.startswith('<section id="share-links-panel"')
    url = re.search(r'<code class="link-url share-url">([^<]+)</code>', panel).group(1)
    assert "every project" in panel and "works until" in panel
    path = "/l/" + url.rsplit("/l/", 1)[1]
    assert REFERENCE.findall(app.test_client().get(path).get_data(as_text=True)) == [
        short_reference(tickets["apex_b"]["id"]), short_reference(tickets["apex_a"]["id"])]
    # The address is shown once: the links page lists the link without it.
    assert url not in client.get("/links").get_data(as_text=True)
    (listed,) = client.get("/v1/share-links", headers=acme.headers).json["data"]
    assert listed["created_by"] == "pm@acme.example"
    ended = browser.post(f"/links/share/{listed['id']}/end", htmx=True)
    assert ended.status_code == 200 and "ended" in ended.get_data(as_text=True)
    assert app.test_client().get(path).status_code == 410
    # A blank sub is refused in words, and nothing is made.
    for form, words in (({"sub": " "}, "Name the sub"),
                        ({"sub": "Apex Concrete", "expires": "2020-01-01"}, "Pick a day from today"),
                        ({"sub": "Apex Concrete", "expires": "9999-12-31"}, "Pick a day from today"),
                        ({"sub": "Apex Concrete", "expires": "31/12/2026"}, "Pick a day from today"),
                        ({"sub": "Apex Concrete", "project_id": "999999"}, "not in Procore")):
        refused = browser.post("/links/share", {"project_id": "", "expires": "", **form})
        assert refused.status_code == 422 and words in refused.get_data(as_text=True), form
    assert client.get("/v1/share-links", headers=acme.headers).json["total"] == 1


def test_the_day_a_pm_picks_is_the_last_day_both_pages_show(app, client, acme, tickets):
    """A link made to work until a day says that day, on the links page and the sub's page, and
    works to that day's end."""
    browser = sign_in(app, client, acme)
    day = (utcnow() + dt.timedelta(days=3)).date()
    panel = browser.post("/links/share", {"sub": "Apex Concrete", "project_id": "",
                                          "expires": day.isoformat()}, htmx=True
                         ).get_data(as_text=True)
    assert f"works until {day:%B} {day.day}, {day.year}" in panel
    url = re.search(r'<code class="link-url share-url">([^<]+)</code>', panel).group(1)
    path = "/l/" + url.rsplit("/l/", 1)[1]
    page = app.test_client().get(path, headers={"Accept-Language": "en"}).get_data(as_text=True)
    assert f"This page works until {day:%b} {day.day}, {day.year}." in page
    end_of_day = dt.datetime.combine(day, dt.time(23, 59), tzinfo=dt.timezone.utc)
    with time_machine.travel(end_of_day):
        assert app.test_client().get(path).status_code == 200
    with time_machine.travel(end_of_day + dt.timedelta(minutes=1, seconds=1)):
        assert app.test_client().get(path).status_code == 410
