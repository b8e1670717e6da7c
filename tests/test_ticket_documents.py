"""Kept ticket summaries: every change renders them again, and reads built on them
answer exactly what shaping the ticket from its fields would."""
from __future__ import annotations

import datetime as dt
import json

import pytest
import time_machine
from sqlalchemy import update

from models import Ticket, db
from models.schemas import TicketList, TicketSummary
from services import tickets as service
from tests.images import data_url, jpeg_bytes, png_bytes

pytestmark = pytest.mark.live


def ticket_body(project_id: str, **extra) -> dict:
    """A ticket whose lines route exactly, with a photo and a signature."""
    body = {"project_id": project_id, "description": "Patched the slab the plumber cut",
            "reason": "Not in our scope", "directed_by": "Sam Ortiz (GC super)",
            "labor": [{"trade": "Laborer", "hours": 8, "workers": 3, "rate": 55.5,
                       "costCode": "02-200"}],
            "materials": [{"description": "Grout", "quantity": 3, "unitCost": 41.25,
                           "costCode": "02-200"}],
            "photos": [{"name": "slab.jpg", "data_url": data_url(jpeg_bytes()),
                        "coords": {"lat": 45.5, "lng": -122.6}}],
            "signature": {"name": "Sam Ortiz", "role": "Superintendent",
                          "image": data_url(png_bytes(), "image/png")}}
    body.update(extra)
    return body


def shaped_from_fields(app, company_id: int, ticket_id: str) -> tuple[str, str, str | None]:
    """(the summary rendered now from a fresh load, the full Ticket document, the kept summary)."""
    with app.app_context():
        record = db.session.get(Ticket, ticket_id)
        return (service.summary_document(record),
                service.get_ticket(company_id, ticket_id).model_dump_json(),
                record.summary_json)


def list_shaped_from_fields(app, company_id: int, **filters) -> str:
    """The TicketList document shaped from loaded records, as lists were before summaries were kept."""
    limit, offset = filters.pop("limit", 50), filters.pop("offset", 0)
    with app.app_context():
        records, total = service.list_ticket_records(company_id, limit=limit, offset=offset,
                                                     **filters)
        return TicketList(data=[TicketSummary(**service.summarize(r)) for r in records],
                          total=total, limit=limit, offset=offset).model_dump_json()


def assert_reads_agree(client, app, tenant, ticket_id: str) -> None:
    """The kept summary is current, and GET and the list answer the shaped documents byte for byte."""
    fresh, full, kept = shaped_from_fields(app, tenant.company_id, ticket_id)
    assert kept == fresh
    answer = client.get(f"/v1/tickets/{ticket_id}", headers=tenant.headers)
    assert answer.status_code == 200 and answer.mimetype == "application/json"
    assert answer.get_data(as_text=True) == full
    listed = client.get("/v1/tickets", headers=tenant.headers)
    assert listed.get_data(as_text=True) == list_shaped_from_fields(app, tenant.company_id)
    assert json.loads(fresh) in listed.json["data"]


def test_every_change_renders_the_kept_summary_again(client, app, acme):
    project = acme.project()
    created = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(project["id"]))
    assert created.status_code == 200, created.json
    ticket_id = created.json["id"]
    assert created.get_data(as_text=True) == shaped_from_fields(app, acme.company_id, ticket_id)[1]
    assert_reads_agree(client, app, acme, ticket_id)

    more = client.post(f"/v1/tickets/{ticket_id}/photos", headers=acme.headers,
                       json={"photos": [{"name": "after.jpg", "data_url": data_url(jpeg_bytes())}]})
    assert more.status_code == 200 and more.json["photo_count"] == 2
    assert_reads_agree(client, app, acme, ticket_id)
    assert [p["name"] for p in client.get("/v1/tickets", headers=acme.headers).json["data"][0]
            ["photos"]] == ["slab.jpg", "after.jpg"]

    for action, status in (("reject", "rejected"), ("restore", "submitted"), ("approve", "written")):
        done = client.post(f"/v1/tickets/{ticket_id}/{action}", headers=acme.headers)
        assert done.status_code == 200, done.json
        assert done.json["status"] == status
        assert_reads_agree(client, app, acme, ticket_id)
    listed = client.get("/v1/tickets", headers=acme.headers).json["data"][0]
    assert [d["action"] for d in listed["decisions"]] == ["rejected", "restored", "approved"]
    assert listed["external"]["destination"] == "change_event"


def test_list_pages_and_filters_answer_the_shaped_document(client, app, acme):
    project = acme.project()
    ids = []
    for n in range(5):
        answer = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(
            project["id"], description=f"Extra work {n}", photos=[], signature=None))
        ids.append(answer.json["id"])
    assert client.post(f"/v1/tickets/{ids[1]}/reject", headers=acme.headers).status_code == 200
    for query, filters in (
        ("", {}),
        ("?limit=2&offset=1", {"limit": 2, "offset": 1}),
        ("?status=rejected", {"status": "rejected"}),
        (f"?project_id={project['id']}&status=submitted",
         {"project_id": project["id"], "status": "submitted"}),
        ("?q=work%203", {"q": "work 3"}),
        ("?offset=40", {"offset": 40}),
    ):
        answer = client.get("/v1/tickets" + query, headers=acme.headers)
        assert answer.status_code == 200
        assert answer.get_data(as_text=True) == list_shaped_from_fields(
            app, acme.company_id, **filters), query
    assert client.get("/v1/tickets?q=work%203", headers=acme.headers).json["total"] == 1


def test_long_lists_with_shared_timestamps_keep_their_order_byte_for_byte(client, app, acme):
    """Pages of many tickets, most sharing a timestamp with others, answer the shaped list.

    On SQLite a page's summaries are joined inside the database; this holds that the join
    keeps the page's order, the id breaking ties, and that a page with one ticket whose
    summary is not kept is shaped row by row and reads the same.
    """
    with_tool, without_tool = acme.project(True)["id"], acme.project(False)["id"]
    start = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.timezone.utc)
    with time_machine.travel(start, tick=False) as clock:
        for n in range(64):
            project = with_tool if n % 3 else without_tool
            created = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(
                project, description=f"Extra work {n}", photos=[], signature=None))
            assert created.status_code == 200, created.json
            if n % 4 == 3:
                clock.shift(60)  # four tickets to each timestamp
    pages = [({}, ""), ({"limit": 7, "offset": 5}, "?limit=7&offset=5"),
             ({"limit": 200}, "?limit=200"), ({"limit": 5, "offset": 62}, "?limit=5&offset=62"),
             ({"offset": 64}, "?offset=64"),
             ({"project_id": without_tool, "limit": 9, "offset": 2},
              f"?project_id={without_tool}&limit=9&offset=2"),
             ({"status": "submitted", "project_id": with_tool},
              f"?status=submitted&project_id={with_tool}")]

    def assert_pages_agree() -> None:
        for filters, query in pages:
            answer = client.get("/v1/tickets" + query, headers=acme.headers)
            assert answer.status_code == 200
            assert answer.get_data(as_text=True) == list_shaped_from_fields(
                app, acme.company_id, **filters), query

    assert_pages_agree()
    middle = client.get("/v1/tickets?limit=1&offset=9", headers=acme.headers).json["data"][0]["id"]
    with app.app_context():
        db.session.execute(update(Ticket).where(Ticket.id == middle).values(summary_json=None))
        db.session.commit()
    assert_pages_agree()


def test_tickets_kept_before_summaries_read_the_same_and_are_filled(client, app, acme, runner):
    project = acme.project()
    ids = [client.post("/v1/tickets", headers=acme.headers,
                       json=ticket_body(project["id"], description=f"Old ticket {n}")).json["id"]
           for n in range(2)]
    expected = {ticket_id: shaped_from_fields(app, acme.company_id, ticket_id)[:2]
                for ticket_id in ids}
    expected_list = list_shaped_from_fields(app, acme.company_id)
    with app.app_context():  # as a database upgraded by migration 0007 leaves them
        db.session.execute(update(Ticket).values(summary_json=None))
        db.session.commit()
    for ticket_id, (_summary, full) in expected.items():
        answer = client.get(f"/v1/tickets/{ticket_id}", headers=acme.headers)
        assert answer.get_data(as_text=True) == full
    assert client.get("/v1/tickets", headers=acme.headers).get_data(as_text=True) == expected_list

    result = runner.invoke(args=["tickets", "fill-summaries"])
    assert result.exit_code == 0 and "filled 2 ticket summaries" in result.output
    for ticket_id, (summary, _full) in expected.items():
        assert shaped_from_fields(app, acme.company_id, ticket_id)[2] == summary
    assert "filled 0" in runner.invoke(args=["tickets", "fill-summaries"]).output
    assert client.get("/v1/tickets", headers=acme.headers).get_data(as_text=True) == expected_list


def test_a_routing_warning_is_inside_the_ticket_document(client, app, acme):
    project = acme.project()
    ticket_id = client.post("/v1/tickets", headers=acme.headers,
                            json=ticket_body(project["id"], photos=[], signature=None)).json["id"]
    with app.app_context():  # the company loses its project-system connection
        from models import ProjectSystemConnection
        db.session.execute(ProjectSystemConnection.__table__.delete())
        db.session.commit()
    app.extensions.pop("project_system_caches", None)
    answer = client.get(f"/v1/tickets/{ticket_id}", headers=acme.headers)
    assert answer.status_code == 200
    assert any(w.startswith("routing is unavailable") for w in answer.json["warnings"])
    assert all(line["needs_review"] for line in answer.json["routing"])
    assert answer.get_data(as_text=True) == shaped_from_fields(app, acme.company_id, ticket_id)[1]
