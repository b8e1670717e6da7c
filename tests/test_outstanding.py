"""Outstanding dollars by stage, sub and project: every figure equals the sum of the tickets it
counts, every stage is exactly one of a ticket's, and the queue's filters narrow it."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from sqlalchemy import select, update

from models import Ticket, db, utcnow
from services.reports.outstanding import outstanding
from services.tickets import stages
from services.tickets.ticket_queries import ListFilter
from tests.pile import seed_pile

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)

# How the seeded tickets are moved on, by position: the stage each should then be in.
MOVES = {
    1: ("written", {"status": "written", "on_change_order": False}),
    2: ("change_order", {"status": "written", "on_change_order": True,
                         "change_orders_approved": False}),
    3: ("paid", {"status": "written", "on_change_order": True, "change_orders_approved": True}),
    5: ("daily_log", {"status": "written", "on_change_order": None}),
    6: ("gone", {"status": "written", "on_change_order": False, "record_deleted": True}),
    7: ("gone", {"status": "written", "on_change_order": False, "record_status": "Void"}),
    9: ("sent_back", {"status": "rejected"}),
    10: ("change_order", {"status": "written", "on_change_order": True,
                          "change_orders_approved": None}),
}


@pytest.fixture
def staged(app, acme):
    """60 tickets of four subs on three projects, a few moved to each later stage; each
    ticket's expected stage, sub, project, total and age."""
    seeded = seed_pile(app, acme, count=60, now=NOW)
    expected = {}
    with app.app_context():
        for i, ticket in enumerate(seeded):
            stage = "signature" if not ticket.signed else "review"
            if i % 12 in MOVES and i > 0:
                stage, values = MOVES[i % 12]
                db.session.execute(update(Ticket).where(Ticket.id == ticket.id).values(**values))
            expected[ticket.id] = (stage, ticket)
        db.session.commit()
    return expected


def age_of(hours: float) -> str:
    """The age key of a ticket captured `hours` before NOW."""
    days = int(hours // 24)
    return next(key for key, _label, first, last in stages.AGES
                if days >= first and (last is None or days <= last))


def test_each_ticket_is_in_exactly_one_stage_and_the_column_agrees(app, acme, staged):
    with app.app_context():
        read = dict(db.session.execute(select(Ticket.id, stages.stage_column())
                                       .where(Ticket.company_id == acme.company_id)).all())
        for stage in stages.STAGES:
            members = set(db.session.scalars(select(Ticket.id).where(
                Ticket.company_id == acme.company_id, stages.condition(stage))))
            assert members == {i for i, (want, _t) in staged.items() if want == stage}, stage
    assert read == {ticket_id: stage for ticket_id, (stage, _t) in staged.items()}
    assert {"paid", "daily_log", "gone", "sent_back", "written", "change_order"} <= set(
        read.values())


@pytest.mark.parametrize("group_by", ["stage", "sub", "project"])
def test_totals_equal_the_sum_of_the_matching_tickets_for_each_grouping(app, acme, staged,
                                                                        group_by):
    with app.app_context():
        rows = outstanding(acme.company_id, ListFilter(), group_by, now=NOW)
    want: dict = {}
    for stage, ticket in staged.values():
        if stage not in stages.OUTSTANDING:
            continue
        key = {"stage": stage, "sub": ticket.sub, "project": ticket.project_id}[group_by]
        row = want.setdefault(key, {"count": 0, "total": Decimal(0), "ages": {},
                                    "oldest": 0.0})
        row["count"] += 1
        row["total"] += ticket.total
        age = row["ages"].setdefault(age_of(ticket.age_hours), [0, Decimal(0)])
        age[0] += 1
        age[1] += ticket.total
        row["oldest"] = max(row["oldest"], ticket.age_hours)
    got = {row.key: row for row in rows}
    assert set(got) == set(want) | (set(stages.OUTSTANDING) if group_by == "stage" else set())
    for key, row in want.items():
        assert (got[key].count, got[key].total) == (row["count"], row["total"]), key
        assert got[key].oldest_at == NOW - dt.timedelta(hours=row["oldest"])
        assert {b.key: [b.count, b.total] for b in got[key].buckets if b.count} == row["ages"]
    totals = [row.total for row in rows]
    if group_by != "stage":
        assert totals == sorted(totals, reverse=True)
    else:
        assert [row.key for row in rows] == list(stages.OUTSTANDING)


def test_the_queue_filters_narrow_the_report_and_another_company_adds_nothing(app, acme, rival,
                                                                            staged):
    seed_pile(app, rival, count=8, now=NOW)
    project = next(t.project_id for stage, t in staged.values()
                   if t.sub == "Bolt Electric" and stage in stages.OUTSTANDING)
    with app.app_context():
        rows = outstanding(acme.company_id, ListFilter(project_id=project, sub="bolt electric"),
                           "stage", now=NOW)
    want = [t for stage, t in staged.values() if stage in stages.OUTSTANDING
            and t.project_id == project and t.sub == "Bolt Electric"]
    assert want
    assert sum(row.count for row in rows) == len(want)
    assert sum(row.total for row in rows) == sum(t.total for t in want)


def test_an_age_range_and_the_age_column_agree(app, acme, staged):
    with app.app_context():
        for key, *_rest in stages.AGES:
            start, before = stages.age_range(key, NOW)
            found = set(db.session.scalars(select(Ticket.id).where(
                Ticket.company_id == acme.company_id,
                stages.age_column(NOW) == key)))
            where = ListFilter(captured_from=start, captured_before=before)
            from_filter = set(db.session.scalars(select(Ticket.id).where(
                Ticket.company_id == acme.company_id,
                *(c for c in [Ticket.captured_at >= start if start else None,
                              Ticket.captured_at < before if before else None] if c is not None))))
            assert found == from_filter, (key, where)
            assert found == {i for i, (_s, t) in staged.items() if age_of(t.age_hours) == key}


def test_a_ticket_sent_back_corrected_counts_again(app, acme, staged):
    sent_back = next(i for i, (stage, _t) in staged.items() if stage == "sent_back")
    with app.app_context():
        before = sum(row.count for row in outstanding(acme.company_id, ListFilter(), now=NOW))
        db.session.execute(update(Ticket).where(Ticket.id == sent_back).values(status="submitted"))
        db.session.commit()
        after = sum(row.count for row in outstanding(acme.company_id, ListFilter(), now=utcnow()))
    assert after == before + 1
