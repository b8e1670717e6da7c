"""The board and the outstanding report: its figures equal the tickets they count through the
API, as JSON and CSV, with the queue's filters; each bar opens a queue of exactly its count;
another company's tickets never count; the report needs a key and the page a session."""
from __future__ import annotations

import csv
import datetime as dt
import html
import io
import re
import urllib.parse
from decimal import Decimal

import pytest
import time_machine
from sqlalchemy import update

from models import Ticket, db
from services.tickets import stages
from tests.pile import seed_pile
from tests.test_outstanding import MOVES
from tests.test_record_status import written
from tests.test_review_pages import sign_in

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)
# Tickets moved further back, by position, so every age has some: hours before NOW.
OLDER = {4: 10 * 24, 8: 20 * 24, 16: 45 * 24, 20: 31 * 24 + 1, 21: 3 * 24}


@pytest.fixture
def board_pile(app, acme):
    """60 tickets of four subs on three projects moved on to each stage and spread over every
    age; each outstanding ticket's stage, sub, project, total and age key at NOW."""
    seeded = seed_pile(app, acme, count=60, now=NOW)
    expected = {}
    with app.app_context():
        for i, ticket in enumerate(seeded):
            stage = "signature" if not ticket.signed else "review"
            values = {}
            if i % 12 in MOVES and i > 0:
                stage, values = MOVES[i % 12]
            hours = OLDER.get(i, ticket.age_hours)
            values = {**values, "captured_at": NOW - dt.timedelta(hours=hours)}
            db.session.execute(update(Ticket).where(Ticket.id == ticket.id).values(**values))
            if stage in stages.OUTSTANDING:
                expected[ticket.id] = {"stage": stage, "sub": ticket.sub,
                                       "project": ticket.project_id, "total": ticket.total,
                                       "age": age_key(hours), "hours": hours}
        db.session.commit()
    assert {t["age"] for t in expected.values()} == {key for key, *_r in stages.AGES}
    return expected


def age_key(hours: float) -> str:
    """The age key of a ticket captured `hours` before NOW."""
    days = int(hours // 24)
    return next(key for key, _label, first, last in stages.AGES
                if days >= first and (last is None or days <= last))


def expected_rows(tickets: dict, group_by: str) -> dict:
    """What each row of a grouping should say, summed from the tickets themselves."""
    rows: dict = {}
    for ticket in tickets.values():
        row = rows.setdefault(ticket[group_by], {"count": 0, "total": Decimal(0), "ages": {},
                                                 "hours": 0})
        row["count"] += 1
        row["total"] += ticket["total"]
        age = row["ages"].setdefault(ticket["age"], [0, Decimal(0)])
        age[0] += 1
        age[1] += ticket["total"]
        row["hours"] = max(row["hours"], ticket["hours"])
    return rows


def report(client, tenant, **params):
    """GET /v1/reports/outstanding at NOW."""
    with time_machine.travel(NOW, tick=False):
        response = client.get("/v1/reports/outstanding", headers=tenant.headers,
                              query_string=params)
    assert response.status_code == 200, response.json
    return response.json


@pytest.mark.parametrize("group_by", ["stage", "sub", "project"])
def test_the_report_totals_equal_the_sum_of_the_matching_tickets(app, client, acme, rival,
                                                                 board_pile, group_by):
    seed_pile(app, rival, count=8, now=NOW)  # another company's tickets never count
    answer = report(client, acme, group_by=group_by)
    assert answer["group_by"] == group_by
    assert answer["as_of"].startswith("2026-11-20T12:00:00")
    want = expected_rows(board_pile, group_by)
    got = {row["key"]: row for row in answer["rows"]}
    assert set(got) == set(want) | (set(stages.OUTSTANDING) if group_by == "stage" else set())
    for key, row in want.items():
        shown = got[key]
        assert (shown["count"], Decimal(shown["total"])) == (row["count"], row["total"]), key
        assert re.fullmatch(r"\d+\.\d\d", shown["total"])
        assert dt.datetime.fromisoformat(shown["oldest_at"]) == NOW - dt.timedelta(
            hours=row["hours"])
        assert [b["key"] for b in shown["buckets"]] == [key for key, *_r in stages.AGES]
        assert {b["key"]: [b["count"], Decimal(b["total"])] for b in shown["buckets"]
                if b["count"]} == row["ages"], key
    labels = {row["key"]: row["label"] for row in answer["rows"]}
    if group_by == "stage":
        assert labels["review"] == "Waiting for the project manager"
    if group_by == "project":
        names = {str(p["id"]): p["name"] for p in acme.projects}
        assert all(labels[key].endswith(names[key]) for key in want), labels
    assert sum(Decimal(r["total"]) for r in answer["rows"]) == sum(
        t["total"] for t in board_pile.values())


def test_the_csv_says_what_the_json_says(client, acme, board_pile):
    for group_by in ("stage", "sub", "project"):
        answer = report(client, acme, group_by=group_by)
        with time_machine.travel(NOW, tick=False):
            response = client.get("/v1/reports/outstanding.csv", headers=acme.headers,
                                  query_string={"group_by": group_by})
        assert response.status_code == 200
        assert response.mimetype == "text/csv"
        assert response.headers["Content-Disposition"] == \
            f'attachment; filename="outstanding-{NOW:%Y-%m-%d}.csv"'
        assert response.headers["Cache-Control"] == "private, no-store"
        text = response.get_data(as_text=True)
        assert text.startswith("\ufeff")
        rows = list(csv.DictReader(io.StringIO(text[1:])))
        assert len(rows) == len(answer["rows"])
        for row, shown in zip(rows, answer["rows"], strict=True):
            assert (row[group_by] or None) == shown["key"]
            assert (row["label"], int(row["count"]), row["total"], row["oldest_at"] or None) == (
                shown["label"], shown["count"], shown["total"], shown["oldest_at"])
            for bucket in shown["buckets"]:
                assert int(row[f"count_{bucket['key']}"]) == bucket["count"]
                assert row[f"total_{bucket['key']}"] == bucket["total"]


def test_filters_narrow_the_report(client, acme, board_pile):
    project = acme.projects[1]["id"]
    for params, keep in (
            ({"project_id": project}, lambda t: t["project"] == str(project)),
            ({"sub": "bolt ELECTRIC"}, lambda t: t["sub"] == "Bolt Electric"),
            ({"project_id": project, "sub": "Cedar Framing"},
             lambda t: t["project"] == str(project) and t["sub"] == "Cedar Framing"),
            ({"q": "Foreman Delta"}, lambda t: t["sub"] == "Delta Drywall")):
        want = [t for t in board_pile.values() if keep(t)]
        assert 0 < len(want) < len(board_pile)
        rows = report(client, acme, group_by="sub", **params)["rows"]
        assert sum(row["count"] for row in rows) == len(want), params
        assert sum(Decimal(row["total"]) for row in rows) == sum(t["total"] for t in want)
    # LIKE's wildcards and escape are text searched for, in no ticket here: nothing matches
    for q in ("%", "%%", "_", "\\", "T-%"):
        rows = report(client, acme, group_by="stage", q=q)["rows"]
        assert sum(row["count"] for row in rows) == 0, q


@pytest.mark.parametrize("params", [
    {"group_by": "week"}, {"group_by": ""}, {"project_id": "abc"}, {"sub": "x" * 121},
    {"q": "x" * 101}, {"group_by": "stage\x00"}, {"project_id": "1" * 41}])
def test_bad_parameters_are_refused_in_the_error_shape(client, acme, params):
    for path in ("/v1/reports/outstanding", "/v1/reports/outstanding.csv"):
        response = client.get(path, headers=acme.headers, query_string=params)
        assert response.status_code == 400, (path, params)
        assert response.json["error"]["code"] == "validation_failed", response.json
        assert response.json["error"]["details"][0]["field"] in params


def test_the_report_needs_a_key_and_sees_only_its_company(app, client, acme, rival, board_pile):
    for path in ("/v1/reports/outstanding", "/v1/reports/outstanding.csv"):
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"Authorization": "Bearer ewt_nope"}).status_code == 401
    rows = report(client, rival, group_by="stage")["rows"]
    assert sum(row["count"] for row in rows) == 0
    assert client.get("/board").status_code in (302, 401)
    assert client.get("/board/outstanding.csv").status_code in (302, 401)


def bar_links(page: str) -> list[tuple[str, int, str]]:
    """Each bar of the board's charts: its queue address, its count and what it says."""
    found = re.findall(r'<a href="([^"]+)" aria-label="([^"]+)" class="bar [^"]*"[^>]*'
                       r'data-count="(\d+)"', page)
    return [(html.unescape(href), int(count), html.unescape(label))
            for href, label, count in found]


def test_each_bar_opens_the_queue_on_exactly_its_tickets(app, client, acme, rival, board_pile):
    seed_pile(app, rival, count=8, now=NOW)
    with time_machine.travel(NOW, tick=False):
        browser = sign_in(app, client, acme)
        page = browser.get("/board").get_data(as_text=True)
        bars = bar_links(page)
        # a bar for each age of each row of each grouping that has tickets
        assert len(bars) == sum(len(row["ages"]) for group_by in ("stage", "sub", "project")
                                for row in expected_rows(board_pile, group_by).values())
        total = sum(t["total"] for t in board_pile.values())
        assert f"${total:,.2f}</strong> outstanding in {len(board_pile)} tickets" in page
        for href, count, label in bars:
            assert href.startswith("/queue?")
            queue = browser.get(href).get_data(as_text=True)
            assert re.search(rf"of {count} tickets?\b", queue), (label, href)
            assert 'id="board-filter"' in queue
            args = urllib.parse.parse_qs(urllib.parse.urlparse(href).query)
            assert args["age"][0] in {key for key, *_r in stages.AGES}


def test_the_board_takes_the_queues_filters(app, client, acme, board_pile):
    project = str(acme.projects[0]["id"])
    want = [t for t in board_pile.values() if t["project"] == project and t["sub"] == "Apex Concrete"]
    with time_machine.travel(NOW, tick=False):
        browser = sign_in(app, client, acme)
        queue = browser.get(f"/queue?project_id={project}&sub=Apex+Concrete&sort=newest")
        board_link = re.search(r'<a href="([^"]+)" class="board-link"',
                               queue.get_data(as_text=True)).group(1)
        assert html.unescape(board_link) == f"/board?project_id={project}&sub=Apex+Concrete"
        page = browser.get(html.unescape(board_link)).get_data(as_text=True)
        bars = bar_links(page)
        for href, _count, _label in bars:
            args = urllib.parse.parse_qs(urllib.parse.urlparse(href).query)
            assert args["sub"] == ["Apex Concrete"]
            assert args["project_id"] == [project]
        csv_link = html.unescape(re.search(r'href="(/board/outstanding.csv[^"]+)"', page).group(1))
        text = browser.get(csv_link).get_data(as_text=True)
    assert f"{sum(t['total'] for t in want):,.2f}</strong> outstanding in {len(want)} ticket" in page
    assert "Sub or crew: Apex Concrete." in page
    rows = list(csv.DictReader(io.StringIO(text[1:])))
    assert sum(int(row["count"]) for row in rows) == len(want)


def test_a_program_reads_the_same_words_whatever_language_it_asks_for(client, acme, board_pile):
    english = report(client, acme, group_by="stage")
    with time_machine.travel(NOW, tick=False):
        spanish = client.get("/v1/reports/outstanding", headers={
            **acme.headers, "Accept-Language": "es"}).json
    assert spanish["rows"] == english["rows"]
    assert english["rows"][0]["buckets"][1]["label"] == "3-7 days"


def test_the_queue_ignores_a_stage_or_age_it_does_not_know(app, client, acme, board_pile):
    with time_machine.travel(NOW, tick=False):
        browser = sign_in(app, client, acme)
        for query in ("stage=nope&age=9_9", "stage=paid2", "age=over_30x"):
            response = browser.get(f"/queue?{query}")
            assert response.status_code == 200, query
            assert 'id="board-filter"' not in response.get_data(as_text=True), query
        # a NUL anywhere is refused before any page reads it; nothing else is an error
        for path in ("/queue?stage=%00", "/board?q=%00", "/board/outstanding.csv?group_by=%00"):
            assert browser.get(path).status_code == 400, path
        assert browser.get("/board/outstanding.csv?group_by=nope").get_data(
            as_text=True).startswith("\ufeffstage,label,")
        assert browser.get("/board?project_id=abc&q=" + "x" * 500).status_code == 200


def test_a_sub_named_like_markup_or_a_formula_stays_text(app, client, acme):
    for sub in ('<img src=x onerror=alert(1)>', '=HYPERLINK("http://evil.example","pay")'):
        response = client.post("/v1/tickets", headers=acme.headers, json={
            "project_id": acme.project()["id"], "sub": sub, "description": "Extra",
            "reason": "Changed", "directed_by": "Sam",
            "labor": [{"trade": "Laborer", "hours": 1, "rate": 50, "costCode": "02-200"}]})
        assert response.status_code in (200, 201), response.json
    text = client.get("/v1/reports/outstanding.csv?group_by=sub",
                      headers=acme.headers).get_data(as_text=True)
    rows = {row["sub"]: row for row in csv.DictReader(io.StringIO(text[1:]))}
    assert "'=HYPERLINK(\"http://evil.example\",\"pay\")" in rows
    page = sign_in(app, client, acme).get("/board").get_data(as_text=True)
    assert "<img src=x" not in page
    assert page.count("&lt;img src=x onerror=alert(1)&gt;") >= 2  # the bar's words and the table


@pytest.mark.live
def test_the_board_offers_each_outstanding_change_events_backup_package(app, client, acme):
    """A written change event not yet on an approved change order is listed on the board with
    its backup package, which downloads as the PDF of its tickets; a paid one is not listed."""
    first, paid = written(client, acme), written(client, acme)
    with app.app_context():
        db.session.execute(update(Ticket).where(Ticket.id == paid["id"]).values(
            on_change_order=True, change_orders_approved=True))
        db.session.commit()
    browser = sign_in(app, client, acme)
    page = browser.get("/board").get_data(as_text=True)
    links = re.findall(r'href="(/projects/[^"]+/backup-package\?change_event_id=(\d+))"', page)
    assert [int(event) for _href, event in links] == [first["external"]["change_event_id"]]
    assert f"Change event {first['external']['number']}" in page
    package = browser.get(html.unescape(links[0][0]))
    assert package.status_code == 200 and package.mimetype == "application/pdf"
    assert package.data.startswith(b"%PDF")


def test_every_stage_and_project_reads_whole_beside_its_bar(app, client, acme, board_pile):
    """A chart's label is the row's full words (on two lines when long), never cut short."""
    with time_machine.travel(NOW, tick=False):
        page = sign_in(app, client, acme).get("/board").get_data(as_text=True)
    labels = [" ".join(html.unescape(part) for part in re.findall(r"<tspan[^>]*>([^<]*)</tspan>",
                                                                  text))
              for text in re.findall(r'<text [^>]*class="bar-label-text">(.*?)</text>', page)]
    for stage in stages.OUTSTANDING:
        assert str(stages.LABELS[stage]) in labels
    for project in acme.projects[:3]:  # its number, then its whole name
        assert any(label.endswith(project["name"]) for label in labels), labels


def test_a_written_stage_s_bar_opens_a_queue_that_makes_a_backup_package(app, client, acme,
                                                                           board_pile):
    """The written tickets a bar lists can be chosen for a backup package; submitted ones for
    approval; and 'Show every ticket' shows all 60."""
    with time_machine.travel(NOW, tick=False):
        browser = sign_in(app, client, acme)
        bars = bar_links(browser.get("/board").get_data(as_text=True))
        for stage, offered in (("written", 'id="backup-package"'),
                               ("review", 'id="bulk-approve"')):
            href = next(href for href, _count, label in bars
                        if label.startswith(str(stages.LABELS[stage])))
            queue = browser.get(href).get_data(as_text=True)
            assert offered in queue and 'name="ids"' in queue, stage
            # and its way back to every ticket is to every ticket, whatever its status
            every = html.unescape(re.search(r'<a href="([^"]+)">Show every ticket</a>',
                                            queue).group(1))
            assert "of 60 tickets" in browser.get(every).get_data(as_text=True), every
