"""Group commit (services.database.GroupCommit): new tickets queued behind a SQLite write
share the next transaction, and still each get their own answer.

Every test holds the writer's place itself first, as another writer would, so that the
first caller leads a batch of its own and waits, and the callers started after it are known
to be queued together before the place is let go.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event, exc, select

from models import Ticket, TicketCount, db
from services import database
from services import tickets as ticket_service
from services.database import _sqlite_writer_lock, driver_writes
from tests.test_ticket_documents import ticket_body

pytestmark = pytest.mark.live
MISSING_COMPANY = 999_999


def count_row(company_id: int, project_id: str) -> list:
    """One caller's inserts: one submitted ticket counted on a project."""
    statement = ticket_service._count_statement(driver_writes().dialect_name)
    return [(statement, [{"company_id": company_id, "project_id": project_id,
                          "status": "submitted", "tickets": 1}])]


def counted(app, company_id: int) -> dict[str, int]:
    """The submitted counts stored for the company, by project."""
    with app.app_context():
        rows = db.session.execute(select(TicketCount.project_id, TicketCount.tickets).where(
            TicketCount.company_id == company_id)).all()
    return {project: tickets for project, tickets in rows}


def wait_until(condition: Callable[[], bool]) -> None:
    """Wait (at most ten seconds) for another thread to reach a known point."""
    for _ in range(10_000):
        if condition():
            return
        threading.Event().wait(0.001)
    raise AssertionError("the other threads never got there")


class Caller(threading.Thread):
    """A thread running one piece of work in the app, keeping its result or its error."""

    def __init__(self, app, work: Callable[[], object]) -> None:
        super().__init__(daemon=True)
        self.app, self.work = app, work
        self.result: object = None
        self.error: BaseException | None = None

    def run(self) -> None:
        with self.app.app_context():
            try:
                self.result = self.work()
            except BaseException as error:  # noqa: BLE001 - kept for the assertions
                self.error = error
            finally:
                db.session.remove()

    def finish(self) -> Caller:
        """Wait for the thread, failing the test if it hangs."""
        self.join(timeout=30)
        assert not self.is_alive(), "a caller was left waiting"
        return self


@contextmanager
def sqlite_statements(app) -> Iterator[list[str]]:
    """Every statement SQLite runs on connections checked out inside the block."""
    statements: list[str] = []
    traced = []

    def trace(dbapi_connection, _record, _proxy) -> None:
        dbapi_connection.set_trace_callback(statements.append)
        traced.append(dbapi_connection)

    with app.app_context():
        event.listen(db.engine, "checkout", trace)
    try:
        yield statements
    finally:
        with app.app_context():
            event.remove(db.engine, "checkout", trace)
        for dbapi_connection in traced:
            dbapi_connection.set_trace_callback(None)


def queued_batch(app, first: Callable[[], object], then: list[Callable[[], object]]
                 ) -> tuple[Caller, list[Caller]]:
    """Run `first` as a batch of its own and every one of `then` in the batch after it."""
    with app.app_context():
        place = _sqlite_writer_lock(db.engine)
        group = driver_writes()._group
    assert place.acquire(timeout=5)
    try:
        leader = Caller(app, first)
        leader.start()
        wait_until(lambda: len(place._waiters) == 1)  # its batch taken, waiting for the place
        followers = [Caller(app, work) for work in then]
        for follower in followers:
            follower.start()
        wait_until(lambda: group.queued() == len(then))
    finally:
        place.release()
    return leader.finish(), [follower.finish() for follower in followers]


def write_counts(company_id: int, project_id: str) -> Callable[[], None]:
    """Work that counts one ticket on a project through a grouped write."""
    return lambda: driver_writes().write(count_row(company_id, project_id))


def upserts(statements: list[str]) -> list[str]:
    """The count upserts among traced statements."""
    return [s for s in statements if s.startswith("INSERT INTO ticket_counts")]


@pytest.mark.sqlite_only
def test_callers_queued_during_a_write_share_the_next_commit(app, acme):
    """Four callers arriving while a write is under way make one transaction, not four, and
    their rows one statement; two counts of one project in that statement add up."""
    projects = ["p-1", "p-2", "p-2", "p-3"]
    with sqlite_statements(app) as statements:
        leader, followers = queued_batch(
            app, write_counts(acme.company_id, "p-0"),
            [write_counts(acme.company_id, project) for project in projects])
    assert [c.error for c in [leader, *followers]] == [None] * 5
    assert statements.count("BEGIN IMMEDIATE") == 2 and statements.count("COMMIT") == 2
    assert len(upserts(statements)) == 2
    assert upserts(statements)[1].count("'submitted'") == 4
    assert counted(app, acme.company_id) == {"p-0": 1, "p-1": 1, "p-2": 2, "p-3": 1}


@pytest.mark.sqlite_only
def test_two_tickets_written_in_one_statement_read_back_as_each_was_answered(app, client, acme):
    """Every column of both tickets, JSON and timestamps included, lands where it belongs."""
    bodies = [ticket_body(acme.project()["id"], client_ref=f"together-{n}") for n in range(3)]
    for n, body in enumerate(bodies):
        body["description"] = f"Ticket {n}: " + body["description"]

    def create(body):
        return lambda: client.post("/v1/tickets", headers=acme.headers, json=body)

    # A first request of the key writes down its use and caches the project list; neither
    # may be what the callers below queue for.
    assert create(ticket_body(acme.project()["id"]))().status_code == 200
    with sqlite_statements(app) as statements:
        leader, followers = queued_batch(app, create(bodies[0]), [create(b) for b in bodies[1:]])
    answers = [c.result for c in [leader, *followers]]
    assert [a.status_code for a in answers] == [200] * 3, [a.json for a in answers]
    assert len([s for s in statements if s.startswith("INSERT INTO tickets")]) == 2
    for body, answer in zip(bodies, answers):
        assert answer.json["description"] == body["description"]
        assert client.get(f"/v1/tickets/{answer.json['id']}", headers=acme.headers).json \
            == answer.json


@pytest.mark.sqlite_only
def test_rows_beyond_one_statements_variables_go_in_several(app, acme):
    """Three hundred upserts of four columns: two statements within 999 variables each,
    every row counted once, rows of one project added up."""
    rows = [{"company_id": acme.company_id, "project_id": f"p-{n % 200}", "status": "submitted",
             "tickets": 1} for n in range(300)]
    with sqlite_statements(app) as statements, app.app_context(), \
            driver_writes().transaction() as writer:
        writer.insert_together(ticket_service._count_statement("sqlite"), rows)
    counts = counted(app, acme.company_id)
    assert sum(counts.values()) == 300 and counts["p-0"] == 2 and counts["p-199"] == 1
    assert [s.count("'submitted'") for s in upserts(statements)] == [249, 51]


def test_rows_of_a_statement_with_values_of_its_own_go_in_one_by_one(app, acme):
    """A value written into the statement cannot be repeated per row; those rows still land."""
    fixed_status = TicketCount.__table__.insert().values(status="rejected")
    with app.app_context(), driver_writes().transaction() as writer:
        writer.insert_together(fixed_status, [
            {"company_id": acme.company_id, "project_id": "p-1", "tickets": 2},
            {"company_id": acme.company_id, "project_id": "p-2", "tickets": 3}])
    assert counted(app, acme.company_id) == {"p-1": 2, "p-2": 3}


@pytest.mark.sqlite_only
def test_one_callers_refused_row_refuses_nobody_else_in_the_batch(app, acme):
    """The batch is rolled back and each caller written alone: only the refused one fails."""
    work = [write_counts(acme.company_id, "p-1"),
            write_counts(MISSING_COMPANY, "p-2"),  # the foreign key refuses it
            write_counts(acme.company_id, "p-3")]
    with sqlite_statements(app) as statements:
        leader, followers = queued_batch(app, write_counts(acme.company_id, "p-0"), work)
    assert leader.error is None
    assert followers[0].error is None and followers[2].error is None
    assert isinstance(followers[1].error, exc.IntegrityError)
    assert counted(app, acme.company_id) == {"p-0": 1, "p-1": 1, "p-3": 1}
    assert counted(app, MISSING_COMPANY) == {}
    # The leader's batch, the shared one rolled back, then each of the three on its own.
    assert statements.count("BEGIN IMMEDIATE") == 5 and statements.count("COMMIT") == 3


@pytest.mark.sqlite_only
def test_two_sends_of_one_client_ref_in_one_batch_answer_one_ticket(app, acme):
    """A phone's retry that lands in the same batch as its first send gets that ticket back."""
    data = ticket_service.TicketInput.model_validate(
        ticket_body(acme.project()["id"], client_ref="phone-queue-0007"))
    other = ticket_service.TicketInput.model_validate(ticket_body(acme.project()["id"]))

    def store(ticket):
        def work():
            with app.test_request_context():
                return ticket_service.store_ticket(acme.company_id, ticket)
        return work

    leader, (first, retry) = queued_batch(app, store(other), [store(data), store(data)])
    assert [c.error for c in (leader, first, retry)] == [None] * 3
    assert first.result.id == retry.result.id
    assert sorted([first.result.created, retry.result.created]) == [False, True]
    with app.app_context():
        stored = db.session.scalars(select(Ticket.id).where(
            Ticket.client_ref == "phone-queue-0007")).all()
    assert stored == [first.result.id]
    assert counted(app, acme.company_id) == {acme.project()["id"]: 2}


def failing_commit(error: BaseException):
    """A DriverWriter.run_commit that rolls back and raises, as a failing disk would."""
    def run_commit(self, pooled) -> None:
        pooled.rollback()
        raise error
    return run_commit


@pytest.mark.sqlite_only
def test_a_failed_commit_fails_everyone_in_its_batch_and_stores_nothing(app, acme, monkeypatch):
    """Nobody is told their rows are stored, and the batch is not written again row by row."""
    disk_error = exc.OperationalError("COMMIT", None, Exception("disk I/O error"))
    monkeypatch.setattr(database.DriverWriter, "run_commit", failing_commit(disk_error))
    with sqlite_statements(app) as statements:
        leader, followers = queued_batch(
            app, write_counts(acme.company_id, "p-0"),
            [write_counts(acme.company_id, f"p-{n}") for n in range(1, 4)])
    assert all(c.error is disk_error for c in [leader, *followers])
    assert counted(app, acme.company_id) == {}
    assert statements.count("BEGIN IMMEDIATE") == 2


@pytest.mark.sqlite_only
def test_an_interrupted_batch_tells_nobody_their_rows_are_stored(app, acme, monkeypatch):
    """Something that is not an error (an interrupt) stops the leader: its followers are
    woken with an error of their own, and the next caller leads a batch of its own."""
    monkeypatch.setattr(database.DriverWriter, "run_commit",
                        failing_commit(KeyboardInterrupt()))
    leader, followers = queued_batch(
        app, write_counts(acme.company_id, "p-0"),
        [write_counts(acme.company_id, f"p-{n}") for n in range(1, 3)])
    # The leader's batch is interrupted; the first follower leads the next and is
    # interrupted too; the second, whose rows that batch held, hears that it was.
    assert isinstance(leader.error, KeyboardInterrupt)
    assert isinstance(followers[0].error, KeyboardInterrupt)
    assert isinstance(followers[1].error, RuntimeError)
    assert "interrupted" in str(followers[1].error)
    assert counted(app, acme.company_id) == {}
    monkeypatch.undo()
    after = Caller(app, write_counts(acme.company_id, "p-9"))
    after.start()
    assert after.finish().error is None
    assert counted(app, acme.company_id) == {"p-9": 1}


def test_many_writers_at_once_all_land_and_leave_nobody_queued(app, acme):
    """Eight threads of twenty writes each: every write counted once, leadership handed on
    to the end, and the group idle afterwards."""
    def twenty() -> None:
        for _ in range(20):
            driver_writes().write(count_row(acme.company_id, "busy"))

    callers = [Caller(app, twenty) for _ in range(8)]
    for caller in callers:
        caller.start()
    assert [caller.finish().error for caller in callers] == [None] * 8
    assert counted(app, acme.company_id) == {"busy": 160}
    with app.app_context():
        group = driver_writes()._group
    if group is not None:
        assert group.queued() == 0 and not group._leading


def test_only_sqlite_groups_its_writes(app):
    """PostgreSQL runs writers side by side; grouping them there would only queue them."""
    with app.app_context():
        writes = driver_writes()
        assert (writes._group is not None) == (writes.dialect_name == "sqlite")
