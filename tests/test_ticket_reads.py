"""Ticket reads: one shaping function for the API and the pages, one list query, no N+1,
and every write (ORM, bulk or raw SQL) visible on the next read."""
from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from sqlalchemy import create_engine, event, text, update

from models import Ticket, db
from models.schemas import Ticket as TicketShape
from models.schemas import TicketList, TicketSummary
from services.platform.database import write_transaction
from services.tickets import ticket_queries, ticket_shapes
from support.images import data_url, jpeg_bytes, png_bytes

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


class StatementCounter:
    """Counts the SQL statements an engine runs while it is active."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self.statements: list[str] = []

    def _seen(self, _conn, _cursor, statement, *_args) -> None:
        if not statement.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK", "PRAGMA")):
            self.statements.append(statement)

    def __enter__(self) -> StatementCounter:
        event.listen(self.engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *_exc) -> None:
        event.remove(self.engine, "before_cursor_execute", self._seen)


def test_a_list_of_fifty_is_a_fixed_small_number_of_queries(client, app, acme):
    project = acme.project()
    with app.app_context():
        engine = db.engine

    def queries_for_page(count: int) -> int:
        with StatementCounter(engine) as counter:
            answer = client.get(f"/v1/tickets?limit={count}", headers=acme.headers)
        assert answer.status_code == 200 and len(answer.json["data"]) == count
        return len(counter.statements)

    for n in range(50):
        body = ticket_body(project["id"], description=f"Extra work {n}", signature=None)
        if n % 2:
            body["photos"] = []
        assert client.post("/v1/tickets", headers=acme.headers, json=body).status_code == 200
    first = client.get("/v1/tickets?limit=1", headers=acme.headers).json["data"][0]["id"]
    assert client.post(f"/v1/tickets/{first}/reject", headers=acme.headers).status_code == 200
    one, fifty = queries_for_page(1), queries_for_page(50)
    # The key, the total, the tickets and the open signature requests of the unsigned ones:
    # no query per ticket, photos and decisions not read.
    assert fifty == one
    assert fifty <= 4


def test_a_phones_list_of_its_tickets_is_a_fixed_number_of_queries(client, app, acme):
    from tests.test_reject_reason import capture_body

    token = client.post("/v1/links", headers=acme.headers, json={
        "project_id": acme.project()["id"], "label": "Gate 3"}).json["token"]
    refs = [f"phone-ref-{n:04d}" for n in range(12)]
    for ref in refs:
        sent = client.post(f"/c/{token}/tickets", json=capture_body(ref))
        assert sent.status_code in (200, 201), sent.get_data(as_text=True)[:300]
    with app.app_context():
        engine = db.engine

    def queries_for(count: int) -> int:
        with StatementCounter(engine) as counter:
            answer = client.post(f"/c/{token}/mine", json={"client_refs": refs[:count]})
        assert answer.status_code == 200 and len(answer.json["data"]) == count
        return len(counter.statements)

    # The link, the tickets and their decisions, however many tickets the phone holds.
    assert queries_for(1) == queries_for(12)


def test_a_bulk_orm_update_is_visible_on_the_next_read(client, app, acme):
    project = acme.project()
    ticket_id = client.post("/v1/tickets", headers=acme.headers,
                            json=ticket_body(project["id"])).json["id"]
    assert client.get(f"/v1/tickets/{ticket_id}", headers=acme.headers).status_code == 200
    assert client.get("/v1/tickets", headers=acme.headers).status_code == 200
    with app.app_context(), write_transaction() as session:
        session.execute(update(Ticket).where(Ticket.id == ticket_id)
                        .values(description="Changed in bulk"))
    assert client.get(f"/v1/tickets/{ticket_id}", headers=acme.headers).json["description"] == \
        "Changed in bulk"
    assert client.get("/v1/tickets", headers=acme.headers).json["data"][0]["description"] == \
        "Changed in bulk"


def test_a_raw_sql_write_is_visible_on_the_next_read(client, app, acme):
    project = acme.project()
    ticket_id = client.post("/v1/tickets", headers=acme.headers,
                            json=ticket_body(project["id"])).json["id"]
    assert client.get("/v1/tickets", headers=acme.headers).status_code == 200
    script = create_engine(app.config["SQLALCHEMY_DATABASE_URI"])  # another program's engine
    with script.begin() as connection:
        connection.execute(text("UPDATE tickets SET reason = 'Typed in the shell' WHERE id = :id"),
                           {"id": ticket_id})
    script.dispose()
    assert client.get(f"/v1/tickets/{ticket_id}", headers=acme.headers).json["reason"] == \
        "Typed in the shell"
    assert client.get("/v1/tickets", headers=acme.headers).json["data"][0]["reason"] == \
        "Typed in the shell"


def test_a_model_column_named_in_the_shape_appears_in_single_and_list_reads(
        client, app, acme, monkeypatch):
    """Shaping copies every field of the output shape that is a column of the model, so a new
    column needs no second list of names: here a shape naming `client_ref` shows it."""
    project = acme.project()
    ticket_id = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(
        project["id"], client_ref="phone-ref-7")).json["id"]
    plain = client.get(f"/v1/tickets/{ticket_id}", headers=acme.headers).json
    assert "client_ref" not in plain

    class SummaryWithRef(TicketSummary):
        client_ref: str | None

    class TicketWithRef(TicketShape):
        client_ref: str | None

    class ListWithRef(TicketList):
        data: list[SummaryWithRef]

    monkeypatch.setattr(ticket_shapes, "TicketSummary", SummaryWithRef)
    monkeypatch.setattr(ticket_shapes, "Ticket", TicketWithRef)
    monkeypatch.setattr(ticket_queries, "TicketList", ListWithRef)
    assert client.get(f"/v1/tickets/{ticket_id}", headers=acme.headers).json["client_ref"] == \
        "phone-ref-7"
    assert client.get("/v1/tickets", headers=acme.headers).json["data"][0]["client_ref"] == \
        "phone-ref-7"


def test_the_create_answer_the_api_and_the_review_page_shape_the_same_ticket(client, app, acme):
    project = acme.project()
    first = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(project["id"])).json
    client.get(f"/v1/tickets/{first['id']}", headers=acme.headers)  # the project's codes are known
    created = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(project["id"])).json
    ticket_id = created["id"]
    api = client.get(f"/v1/tickets/{ticket_id}", headers=acme.headers).json
    assert created == api  # the answer to a create is the ticket as it reads afterwards
    # The page is shaped in a request too, so its evidence addresses name the same host.
    with app.test_request_context():
        from services.review import review_ticket
        page = review_ticket.ticket_page(acme.company_id, ticket_id)
    assert page.ticket.model_dump(mode="json") == api


def test_long_lists_with_shared_timestamps_keep_their_order(client, app, acme):
    """Pages of many tickets, most sharing a timestamp with others, come newest first with the id
    breaking ties, and consecutive pages neither repeat nor skip a ticket."""
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
    everything = client.get("/v1/tickets?limit=200", headers=acme.headers).json
    assert everything["total"] == 64
    order = [(t["captured_at"], t["id"]) for t in everything["data"]]
    assert order == sorted(order, reverse=True)
    paged = []
    for offset in range(0, 64, 7):
        paged += [t["id"] for t in client.get(f"/v1/tickets?limit=7&offset={offset}",
                                              headers=acme.headers).json["data"]]
    assert paged == [t["id"] for t in everything["data"]]
    filtered = client.get(f"/v1/tickets?project_id={without_tool}&limit=9&offset=2",
                          headers=acme.headers).json
    assert filtered["total"] == 22
    assert [t["id"] for t in filtered["data"]] == [
        t["id"] for t in everything["data"] if t["project_id"] == without_tool][2:11]
    assert client.get("/v1/tickets?q=work%2063", headers=acme.headers).json["total"] == 1


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


def test_totals_follow_every_write_to_tickets_whoever_makes_it(client, app, acme):
    """List totals and status counts come from counts the database moves itself, so a bulk
    status change, a raw insert and a delete from another program all show at once."""
    project = acme.project()["id"]
    ids = [client.post("/v1/tickets", headers=acme.headers, json=ticket_body(
        project, description=f"Extra work {n}", photos=[], signature=None)).json["id"]
        for n in range(4)]
    assert client.post(f"/v1/tickets/{ids[0]}/reject", headers=acme.headers).status_code == 200

    def totals() -> dict[str, int]:
        return {status: client.get(f"/v1/tickets?status={status}",
                                   headers=acme.headers).json["total"]
                for status in ("submitted", "rejected", "written")} | {
            "all": client.get("/v1/tickets", headers=acme.headers).json["total"]}

    assert totals() == {"submitted": 3, "rejected": 1, "written": 0, "all": 4}
    with app.app_context(), write_transaction() as session:
        session.execute(update(Ticket).where(Ticket.id.in_(ids[1:3])).values(status="rejected"))
    assert totals() == {"submitted": 1, "rejected": 3, "written": 0, "all": 4}
    script = create_engine(app.config["SQLALCHEMY_DATABASE_URI"])  # another program's engine
    with script.begin() as connection:
        connection.execute(text("DELETE FROM tickets WHERE id = :id"), {"id": ids[3]})
        connection.execute(text(
            "INSERT INTO tickets (id, company_id, project_id, status, description, reason, "
            "directed_by, captured_at, captured_via, total, lines, warnings, photo_count) "
            "VALUES (:id, :company, :project, 'written', 'Typed in', 'r', 'x', "
            "CURRENT_TIMESTAMP, 'api', '0', '[]', '[]', 0)"),
            {"id": "00000000-0000-4000-8000-000000000001", "company": acme.company_id,
             "project": project})
    script.dispose()
    assert totals() == {"submitted": 0, "rejected": 3, "written": 1, "all": 4}
    with app.app_context():
        from services.tickets.ticket_queries import ListFilter, list_status_counts
        assert list_status_counts(acme.company_id, ListFilter()) == {
            "submitted": 0, "written": 1, "rejected": 3}
