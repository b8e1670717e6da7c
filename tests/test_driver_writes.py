"""Driver writes (services.database.DriverWrites): a new ticket stored outside the ORM session.

They must store all or nothing, give back the writer's place and its connection whatever
happens, raise SQLAlchemy's exceptions, and leave the request's later reads seeing the write.
"""
from __future__ import annotations

import pytest
from sqlalchemy import exc, func, select

from models import Ticket, TicketCount, db
from services import tickets as ticket_service
from services.database import _sqlite_writer_lock, driver_writes, write_transaction
from tests.test_ticket_documents import ticket_body

pytestmark = pytest.mark.live


def stored_tickets(app) -> int:
    """How many tickets the database holds."""
    with app.app_context():
        return db.session.scalar(select(func.count()).select_from(Ticket))


def submitted_count(app, company_id: int) -> int:
    """The kept count of the company's submitted tickets."""
    with app.app_context():
        return db.session.scalar(select(func.sum(TicketCount.tickets)).where(
            TicketCount.company_id == company_id, TicketCount.status == "submitted")) or 0


def assert_writer_free(app) -> None:
    """No writer holds this process's place in the queue for the database."""
    with app.app_context():
        lock = _sqlite_writer_lock(db.engine)
    if lock is not None:
        assert lock.acquire(timeout=0.5), "the writer's place was not given back"
        lock.release()


def test_a_client_ref_race_lost_at_the_unique_index_answers_the_first_ticket(
        app, client, acme, monkeypatch):
    """Two sends of one client_ref both pass the lookup; the second's INSERT meets the unique
    index, arrives as SQLAlchemy's IntegrityError, stores nothing, and answers the first ticket."""
    body = ticket_body(acme.project()["id"], client_ref="phone-queue-0042")
    first = client.post("/v1/tickets", headers=acme.headers, json=body)
    assert first.status_code == 200, first.json
    lookup = ticket_service._id_for_client_ref
    calls: list[str] = []

    def not_yet_committed(company_id: int, client_ref: str) -> str | None:
        calls.append(client_ref)
        return None if len(calls) == 1 else lookup(company_id, client_ref)

    monkeypatch.setattr(ticket_service, "_id_for_client_ref", not_yet_committed)
    second = client.post("/v1/tickets", headers=acme.headers, json=body)
    assert second.status_code == 200, second.json
    assert second.json["id"] == first.json["id"] and len(calls) == 2
    assert stored_tickets(app) == 1 and submitted_count(app, acme.company_id) == 1
    assert_writer_free(app)
    third = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(acme.project()["id"]))
    assert third.status_code == 200 and submitted_count(app, acme.company_id) == 2


def test_a_failure_inside_a_driver_write_stores_nothing(app, client, acme):
    """The ticket row already inserted is rolled back with the transaction."""
    created = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(acme.project()["id"]))
    with app.app_context():
        row = {column.key: getattr(db.session.get(Ticket, created.json["id"]), column.key)
               for column in Ticket.__table__.columns if column.key != "approval_claimed_at"}
        row["id"], row["client_ref"] = "00000000-0000-4000-8000-000000000001", None
        writes = driver_writes()
        with pytest.raises(RuntimeError, match="after the insert"), \
                writes.transaction() as writer:
            writer.insert(ticket_service._INSERT_TICKET, [row])
            raise RuntimeError("after the insert")
        assert db.session.get(Ticket, row["id"]) is None
    assert stored_tickets(app) == 1
    assert_writer_free(app)


def test_driver_errors_arrive_as_sqlalchemys_and_a_dropped_connection_is_replaced(app):
    """A connection found closed is invalidated, and the next write gets a new one."""
    count_row = {"company_id": 1, "project_id": "1", "status": "submitted", "tickets": 1}
    with app.app_context():
        writes = driver_writes()
        with pytest.raises(exc.DBAPIError) as raised, writes.transaction() as writer:
            dropped = writer.connection
            dropped.close()
            writer.insert(ticket_service._count_statement(writes.dialect_name), [count_row])
        assert raised.value.orig is not None
        # No company 1: the foreign key refuses the row, on a new connection.
        with pytest.raises(exc.IntegrityError), writes.transaction() as writer:
            assert writer.connection is not dropped
            writer.insert(ticket_service._count_statement(writes.dialect_name), [count_row])
    assert_writer_free(app)


def test_a_driver_write_inside_a_write_transaction_is_refused(app):
    """It would wait for the place the enclosing transaction holds; it says so instead."""
    with app.app_context(), write_transaction(), \
            pytest.raises(RuntimeError, match="inside another write transaction"), \
            driver_writes().transaction():
        pass
    assert_writer_free(app)


def test_what_a_request_reads_after_a_driver_write_includes_it(app, acme):
    """A Session read transaction opened before the write is ended first, so the request's
    later Session reads see the new ticket rather than their older view."""
    data = ticket_service.TicketInput.model_validate(
        ticket_body(acme.project()["id"], client_ref="seen-after-write"))
    with app.test_request_context():
        assert db.session.scalar(select(func.count()).select_from(Ticket)) == 0  # opens a read
        stored = ticket_service.store_ticket(acme.company_id, data)
        assert stored.created
        assert ticket_service.find_ticket(acme.company_id, stored.id).client_ref == "seen-after-write"


def test_values_fixed_in_a_statement_travel_with_it(app, acme):
    """A value written into the INSERT itself is sent with the rows' own values."""
    fixed_status = TicketCount.__table__.insert().values(status="rejected")
    with app.app_context():
        with driver_writes().transaction() as writer:
            writer.insert(fixed_status, [
                {"company_id": acme.company_id, "project_id": "p-1", "tickets": 2},
                {"company_id": acme.company_id, "project_id": "p-2", "tickets": 3}])
        stored = db.session.execute(select(TicketCount.project_id, TicketCount.status,
                                           TicketCount.tickets).where(
            TicketCount.company_id == acme.company_id).order_by(TicketCount.project_id)).all()
    assert [tuple(row) for row in stored] == [("p-1", "rejected", 2), ("p-2", "rejected", 3)]


def test_a_driver_write_makes_no_session_of_its_own(app, acme):
    """Asking whether a Session is in a transaction must not create one for the request.
    (The first ticket reads the project list through a Session; the second finds it kept.)"""
    data = ticket_service.TicketInput.model_validate(ticket_body(acme.project()["id"]))
    for _ in range(2):
        with app.test_request_context():
            assert ticket_service.store_ticket(acme.company_id, data).created
            made_a_session = db.session.registry.has()
    assert not made_a_session
