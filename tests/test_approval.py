"""Approve, reject and restore against the live sandbox: states, rules, records, exactly once."""
from __future__ import annotations

import datetime as dt
import math
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import requests
import time_machine
from sqlalchemy.orm import selectinload
from werkzeug.serving import make_server

from models import Ticket, db, utcnow
from support.images import data_url, jpeg_bytes, png_bytes
from tests.conftest import ConnectedTenant
from tests.plugins.sandbox import FakeClock, SandboxControl, SharedFakeClock

pytestmark = pytest.mark.live


def ticket_body(project_id: str, **extra: Any) -> dict:
    """A complete ticket whose lines all route exactly (cost code 02-200)."""
    body = {"project_id": project_id, "description": "Moved the trench 3 m east",
            "reason": "Conflict with an unmarked gas line", "directed_by": "Sam Ortiz (GC super)",
            "captured_by": "Lee Park",
            "labor": [{"trade": "Laborer", "hours": 8, "workers": 3, "rate": 55.5,
                       "costCode": "02-200"}],
            "equipment": [{"description": "Mini excavator", "hours": 4, "rate": 95,
                           "costCode": "02-200"}],
            "materials": [{"description": "Gravel", "quantity": 3, "unitCost": 41.25,
                           "costCode": "02-200"}]}
    body.update(extra)
    return body


def create(client, tenant: ConnectedTenant, project: dict | None = None, **extra: Any) -> dict:
    """Create a ticket and return it as read back, routed on the project's codes."""
    project = project or tenant.project()
    response = client.post("/v1/tickets", headers=tenant.headers,
                           json=ticket_body(project["id"], **extra))
    assert response.status_code == 200, response.json
    return client.get(f"/v1/tickets/{response.json['id']}", headers=tenant.headers).json


def act(client, tenant: ConnectedTenant, ticket_id: str, action: str, body: dict | None = None):
    """POST approve, reject or restore; approve's body is omitted unless given."""
    return client.post(f"/v1/tickets/{ticket_id}/{action}", headers=tenant.headers, json=body)


def origin_rows(sandbox_server, table: str, ticket_id: str) -> list[dict]:
    """Rows of a sandbox table written for a ticket (by origin id or origin marker)."""
    origin = f"ewt-ticket-{ticket_id}"
    with closing(sqlite3.connect(sandbox_server.db_path)) as connection:
        connection.row_factory = sqlite3.Row
        if table == "change_events":
            rows = connection.execute("SELECT * FROM change_events WHERE origin_id = ?", [origin])
        else:
            rows = connection.execute("SELECT * FROM manpower_logs WHERE instr(notes, ?)",
                                      [f"[ref:{origin}]"])
        return [dict(row) for row in rows]


def remote(app, tenant: ConnectedTenant):
    """The tenant's project-system client."""
    from services.project_system.connections import client_for

    with app.app_context():
        return client_for(tenant.company_id)


def control(sandbox_server, tenant: ConnectedTenant) -> SandboxControl:
    """Fault switches for the tenant's sandbox company."""
    return SandboxControl(sandbox_server, {"client_id": tenant.client_id,
                                           "client_secret": tenant.client_secret,
                                           "company_id": tenant.remote_company_id})


@contextmanager
def spike_limited(app, tenant: ConnectedTenant, sandbox_server, monkeypatch, *,
                  window_s: int = 10, rolling: bool = False, real_share: float = 0.0
                  ) -> Iterator[tuple[FakeClock, list[int]]]:
    """Procore's spike limit (the sandbox's default, 25 calls in 10 s, or in a `window_s`
    window, `rolling` or fixed) on the sandbox's clock, which the tenant's client reads and
    moves on when it waits, so no test time is spent waiting (but `real_share` of each wait,
    so other threads see it last); yields that clock and the statuses of every answer the
    client gets."""
    switch = control(sandbox_server, tenant)
    monkeypatch.setitem(sandbox_server.app.config, "SANDBOX_SPIKE_LIMIT", 25)
    procore = remote(app, tenant)
    clock = SharedFakeClock(switch.freeze_clock())
    statuses: list[int] = []

    def wait(seconds: float) -> None:
        # Procore's clock first: the client never reads ahead
        clock.wait(seconds, before=switch.advance_clock)
        time.sleep(seconds * real_share)

    monkeypatch.setattr(procore, "clock", clock)
    monkeypatch.setattr(procore, "sleep", wait)
    monkeypatch.setattr(procore, "observer", lambda answer, _body: statuses.append(
        answer.status_code))
    switch.set_spike_limit("default", window_s=window_s, rolling=rolling)
    try:
        yield clock, statuses
    finally:
        switch.set_spike_limit(None)


def stored(app, ticket_id: str) -> Ticket:
    """The ticket row as stored, with its photos and decisions."""
    with app.app_context():
        ticket = db.session.get(Ticket, ticket_id, options=[selectinload(Ticket.photos),
                                                            selectinload(Ticket.decisions)])
        db.session.expunge(ticket)
        return ticket


def budget_code_id(client, tenant: ConnectedTenant, project_id: str, flat_code: str) -> int:
    """A budget code id of the project by its flat code, read through the API."""
    codes = client.get(f"/v1/projects/{project_id}/cost-codes", headers=tenant.headers).json
    return next(b["id"] for c in codes["data"] for b in c["budget_codes"] if b["code"] == flat_code)


def actor(tenant: ConnectedTenant) -> str:
    """How the tenant's key is recorded as an actor."""
    return f"key:tests ({tenant.prefix})"


# ----------------------------------------------------------------- writing a change event

@pytest.mark.both_stores
def test_approve_writes_a_change_event_with_lines_photos_and_signature(client, acme, app,
                                                                       sandbox_server):
    ticket = create(client, acme, description="Moved the trench 3 m east " + "x" * 150,
                    photos=[{"name": "trench east.jpg", "data_url": data_url(jpeg_bytes())},
                            {"data_url": data_url(jpeg_bytes(color=(1, 2, 3)))}],
                    signature={"name": "Sam Ortiz", "role": "Superintendent",
                               "image": data_url(png_bytes(), "image/png")})
    response = act(client, acme, ticket["id"], "approve")
    assert response.status_code == 200, response.json
    written = response.json
    assert written["status"] == "written" and written["already"] is False
    assert written["approved_by"] == actor(acme) and written["approved_at"]
    assert [(d["action"], d["by"]) for d in written["decisions"]] == [("approved", actor(acme))]
    external = written["external"]
    assert external["destination"] == "change_event" and external["manpower_log_id"] is None
    assert external["note"] is None and external["number"] == "001"
    assert [r["line"] for r in written["routing"]] == [0, 1, 2]
    assert all(r["exact"] for r in written["routing"])

    event = remote(app, acme).get_change_event(int(ticket["project_id"]),
                                               external["change_event_id"])
    assert event["external_data"]["origin_id"] == f"ewt-ticket-{ticket['id']}"
    assert event["scope"] == "out_of_scope"
    assert event["title"].startswith("Extra work: Moved the trench")
    assert event["title"].endswith(f"(#{ticket['id'][:8]})") and len(event["title"]) < 110
    for text in ("Conflict with an unmarked gas line", "Sam Ortiz (GC super)", "Lee Park",
                 ticket["id"], ticket["captured_at"][:10]):
        assert text in event["description"]
    items = [(i["budget_code"]["id"], float(i["cost_impact"]["estimate"]["amount"]),
              i["cost_impact"]["estimate"]["unit_of_measure"]) for i in event["change_items"]]
    assert items == [(written["routing"][0]["budget_code_id"], 1332.0, "HR"),
                     (written["routing"][1]["budget_code_id"], 380.0, "HR"),
                     (written["routing"][2]["budget_code_id"], 123.75, None)]
    assert [i["budget_code"]["flat_code"] for i in event["change_items"]] == \
        ["02-200.L", "02-200.E", "02-200.M"]
    names = [a["filename"] for a in event["attachments"]]
    assert names == ["photo-01-trench-east.jpg", "photo-02.jpg", "signature.png",
                     f"ticket-T-{ticket['id'][:8].upper()}.pdf"]
    with app.app_context():
        from services.files.storage import file_store
        signature_key = db.session.get(Ticket, ticket["id"]).signature["image_key"]
        assert event["attachments"][2]["size"] == len(file_store().open(signature_key))
    page = requests.get(external["url"], timeout=10)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["status"] == \
        "written"


def test_repeat_approve_is_already_and_calls_nothing(client, acme, app, sandbox_server):
    ticket = create(client, acme)
    first = act(client, acme, ticket["id"], "approve", {}).json
    procore = remote(app, acme)
    with app.app_context():
        from services.project_system.projects import clear_caches
        clear_caches()
    calls = len(procore.calls)
    again = act(client, acme, ticket["id"], "approve", {"destination": "daily_log"})
    assert again.status_code == 200
    assert again.json == dict(first, already=True)
    assert len(procore.calls) == calls
    assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1
    assert origin_rows(sandbox_server, "manpower_logs", ticket["id"]) == []


def test_daily_log_destination_writes_a_dated_manpower_entry(client, acme, app, sandbox_server):
    project = acme.project(change_events=False)
    ticket = create(client, acme, project,
                    labor=[{"trade": "Laborer", "hours": 8, "workers": 3, "rate": 50,
                            "costCode": "02-200"},
                           {"trade": "Operator", "hours": 4, "workers": 1.5, "rate": 70,
                            "costCode": "02-200"}])
    response = act(client, acme, ticket["id"], "approve", {"destination": "daily_log"})
    assert response.status_code == 200, response.json
    external = response.json["external"]
    assert external["destination"] == "daily_log" and external["change_event_id"] is None
    assert "not a financial record" in external["note"] and "bills nothing" in external["note"]
    log = remote(app, acme).get_manpower_log(int(project["id"]), external["manpower_log_id"])
    captured = dt.datetime.fromisoformat(ticket["captured_at"].replace("Z", "+00:00"))
    assert log["date"] == captured.astimezone(ZoneInfo("America/Los_Angeles")).date().isoformat()
    assert log["num_workers"] == math.ceil(3 + 1.5) == 5
    assert float(log["num_hours"]) == round((3 * 8 + 1.5 * 4) / 5, 2) == 6.0
    assert f"[ref:ewt-ticket-{ticket['id']}]" in log["notes"]
    assert "Moved the trench 3 m east" in log["notes"] and "Mini excavator" in log["notes"]
    page = requests.get(external["url"], timeout=10)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")


def set_project_zone(sandbox_server, project_id: str, zone_name: str) -> None:
    """Give a sandbox project another time zone, as a project admin would in Procore."""
    with closing(sqlite3.connect(sandbox_server.db_path)) as connection, connection:
        connection.execute("UPDATE projects SET time_zone = ? WHERE id = ?",
                           [zone_name, int(project_id)])


def backdate(app, ticket_id: str, captured_at: dt.datetime) -> None:
    """Set when a ticket was captured, as if the crew had sent it then."""
    with app.app_context():
        db.session.get(Ticket, ticket_id).captured_at = captured_at
        db.session.commit()


@pytest.mark.parametrize(("zone_name", "captured_at", "log_date", "shown"), [
    # 20:30 on 3 June in California is already 4 June in UTC.
    ("Pacific Time (US & Canada)", "2026-06-04T03:30", "2026-06-03",
     "2026-06-03 20:30 PDT (2026-06-04 03:30 UTC)"),
    ("America/Denver", "2026-06-04T03:30", "2026-06-03", "2026-06-03 21:30 MDT"),
    # 05:00 on 4 June in Tokyo is still 3 June in UTC.
    ("Tokyo", "2026-06-03T20:00", "2026-06-04", "2026-06-04 05:00 JST"),
    ("Eastern Time (US & Canada)", "2026-01-15T04:10", "2026-01-14", "2026-01-14 23:10 EST"),
    # A zone nobody knows: the UTC date, and the notes say UTC only.
    ("Mars Standard Time", "2026-06-04T03:30", "2026-06-04", "on 2026-06-04 03:30 UTC (via"),
])
def test_daily_log_is_dated_on_the_jobsite_day(client, acme, app, sandbox_server, zone_name,
                                               captured_at, log_date, shown):
    project = acme.project(change_events=False)
    set_project_zone(sandbox_server, project["id"], zone_name)
    ticket = create(client, acme, project)
    backdate(app, ticket["id"],
             dt.datetime.fromisoformat(captured_at).replace(tzinfo=dt.timezone.utc))
    # The first write lands but its answer is lost; the retry must look on the same day.
    control(sandbox_server, acme).fault(500, after_commit=True)
    assert act(client, acme, ticket["id"], "approve",
               {"destination": "daily_log"}).status_code == 502
    response = act(client, acme, ticket["id"], "approve", {"destination": "daily_log"})
    assert response.status_code == 200, response.json
    (row,) = origin_rows(sandbox_server, "manpower_logs", ticket["id"])
    assert response.json["external"]["manpower_log_id"] == row["id"]
    log = remote(app, acme).get_manpower_log(int(project["id"]), row["id"])
    assert log["date"] == log_date
    assert shown in log["notes"]


def test_change_event_shows_the_capture_time_on_the_jobsite_clock(client, acme, app,
                                                                  sandbox_server):
    project = acme.project()
    ticket = create(client, acme, project)
    backdate(app, ticket["id"], dt.datetime(2026, 6, 4, 3, 30, tzinfo=dt.timezone.utc))
    response = act(client, acme, ticket["id"], "approve")
    assert response.status_code == 200, response.json
    (event,) = origin_rows(sandbox_server, "change_events", ticket["id"])
    assert "on 2026-06-03 20:30 PDT (2026-06-04 03:30 UTC)" in event["description"]


@pytest.mark.parametrize("body", [None, {}, {"destination": "change_event"}])
def test_no_change_event_tool_needs_a_named_daily_log(client, acme, app, sandbox_server, body):
    ticket = create(client, acme, acme.project(change_events=False))
    response = act(client, acme, ticket["id"], "approve", body)
    assert response.status_code == 409
    assert response.json["error"]["code"] == "no_change_events"
    assert stored(app, ticket["id"]).status == "submitted"
    assert origin_rows(sandbox_server, "manpower_logs", ticket["id"]) == []


# ----------------------------------------------------------------- states

def test_state_table(client, acme, app, sandbox_server):
    ticket = create(client, acme)
    tid = ticket["id"]
    rejected = act(client, acme, tid, "reject")
    assert rejected.status_code == 200 and rejected.json["status"] == "rejected"
    assert [(d["action"], d["by"]) for d in rejected.json["decisions"]] == \
        [("rejected", actor(acme))]
    assert "routing" in rejected.json
    again = act(client, acme, tid, "reject")
    assert again.status_code == 409 and again.json["error"]["code"] == "ticket_rejected"
    refused = act(client, acme, tid, "approve")
    assert refused.status_code == 409 and refused.json["error"]["code"] == "ticket_rejected"
    assert origin_rows(sandbox_server, "change_events", tid) == []
    restored = act(client, acme, tid, "restore")
    assert restored.status_code == 200 and restored.json["status"] == "submitted"
    idempotent = act(client, acme, tid, "restore")
    assert idempotent.status_code == 200 and idempotent.json["status"] == "submitted"
    assert [d["action"] for d in idempotent.json["decisions"]] == ["rejected", "restored"]
    assert act(client, acme, tid, "reject").status_code == 200
    approved = act(client, acme, tid, "approve", {"allow_rejected": True})
    assert approved.status_code == 200 and approved.json["status"] == "written"
    assert [d["action"] for d in approved.json["decisions"]] == \
        ["rejected", "restored", "rejected", "approved"]
    for action in ("reject", "restore"):
        response = act(client, acme, tid, action)
        assert response.status_code == 409 and response.json["error"]["code"] == "ticket_written"
    assert len(act(client, acme, tid, "approve").json["decisions"]) == 4
    assert len(origin_rows(sandbox_server, "change_events", tid)) == 1


def test_other_companys_ticket_looks_missing(client, acme, rival):
    ticket = create(client, acme)
    for action in ("approve", "reject", "restore"):
        foreign = act(client, rival, ticket["id"], action)
        missing = act(client, rival, "00000000-0000-4000-8000-000000000000", action)
        assert foreign.status_code == missing.status_code == 404
        assert foreign.json == missing.json


# ----------------------------------------------------------------- lines and routes

def test_routes_are_validated(client, acme, rival):
    ticket = create(client, acme)
    foreign = budget_code_id(client, rival, rival.project()["id"], "02-200.L")
    response = act(client, acme, ticket["id"], "approve", {"routes": {
        "7": foreign, "-1": foreign, "x": foreign, "01": foreign, "0": 999_999_999,
        "1": foreign}})
    assert response.status_code == 400
    error = response.json["error"]
    assert error["code"] == "validation_failed"
    assert {d["field"] for d in error["details"]} == {"routes.-1", "routes.x", "routes.01"}
    # Well-formed, naming what is not there: a line the ticket lacks, budget codes its project lacks.
    response = act(client, acme, ticket["id"], "approve", {"routes": {
        "7": foreign, "0": 999_999_999, "1": foreign}})
    error = response.json["error"]
    assert response.status_code == 409 and error["code"] == "budget_code_not_found"
    assert [d["field"] for d in error["details"]] == ["routes.7", "routes.0", "routes.1"]
    response = act(client, acme, ticket["id"], "approve", {"routes": {"7": foreign}})
    assert response.status_code == 409 and response.json["error"]["code"] == "line_not_found"
    for body, field in (({"routes": {"0": "abc"}}, "routes.0"),
                        ({"routes": {"0": True}}, "routes.0"),
                        ({"allow_unrouted": "yes"}, "allow_unrouted"),
                        ({"destination": "email"}, "destination")):
        bad = act(client, acme, ticket["id"], "approve", body)
        assert bad.status_code == 400 and bad.json["error"]["details"][0]["field"] == field
    assert act(client, acme, ticket["id"], "restore").json["decisions"] == []


def test_unrouted_line_is_refused_then_routed_by_a_person(client, acme, app, sandbox_server):
    project = acme.project()
    ticket = create(client, acme, labor=[{"trade": "Zzyzx wrangler", "hours": 2, "rate": 10}],
                    equipment=[], materials=[])
    assert ticket["routing"][0]["budget_code"] is None
    refused = act(client, acme, ticket["id"], "approve", {})
    assert refused.status_code == 409
    assert refused.json["error"]["code"] == "lines_need_review"
    assert refused.json["error"]["details"] == [
        {"line": 0, "reason": "no budget code", "description": "Zzyzx wrangler — 1 × 2 h"}]
    assert stored(app, ticket["id"]).status == "submitted"
    assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []
    code = budget_code_id(client, acme, project["id"], "02-200.L")
    approved = act(client, acme, ticket["id"], "approve",
                   {"routes": {"0": code}, "require_exact": True})
    assert approved.status_code == 200, approved.json
    line = approved.json["routing"][0]
    assert (line["budget_code_id"], line["exact"], line["needs_review"]) == (code, True, False)
    assert line["reason"] == f"routed by {actor(acme)}"
    event = remote(app, acme).get_change_event(int(project["id"]),
                                               approved.json["external"]["change_event_id"])
    assert event["change_items"][0]["budget_code"]["id"] == code


def test_allow_unrouted_writes_a_line_without_budget_code(client, acme, app):
    ticket = create(client, acme, labor=[{"trade": "Zzyzx wrangler", "hours": 2, "rate": 10}],
                    equipment=[], materials=[])
    both = act(client, acme, ticket["id"], "approve",
               {"allow_unrouted": True, "require_exact": True})
    assert both.status_code == 409
    assert both.json["error"]["details"][0]["reason"] == \
        "not on a confirmed budget code (exact: false)"
    approved = act(client, acme, ticket["id"], "approve", {"allow_unrouted": True})
    assert approved.status_code == 200
    event = remote(app, acme).get_change_event(int(ticket["project_id"]),
                                               approved.json["external"]["change_event_id"])
    assert event["change_items"][0]["budget_code"] is None


def test_require_exact_refuses_a_fallback_code(client, acme):
    ticket = create(client, acme, labor=[{"trade": "Cleaner", "hours": 2, "rate": 10,
                                          "costCode": "01-500"}])
    assert ticket["routing"][0]["budget_code"] == "01-500.O"
    assert ticket["routing"][0]["exact"] is False
    refused = act(client, acme, ticket["id"], "approve", {"require_exact": True})
    assert refused.status_code == 409 and refused.json["error"]["code"] == "lines_need_review"
    assert refused.json["error"]["details"] == [
        {"line": 0, "reason": "not on a confirmed budget code (exact: false)",
         "description": "Cleaner — 1 × 2 h"}]
    assert act(client, acme, ticket["id"], "approve").status_code == 200


# ----------------------------------------------------------------- exactly once

def test_concurrent_approvals_write_one_change_event(app, acme, client, sandbox_server):
    ticket = create(client, acme, photos=[{"name": "a.jpg", "data_url": data_url(jpeg_bytes())}],
                    signature={"name": "Sam", "image": data_url(png_bytes(), "image/png")})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/v1/tickets/{ticket['id']}/approve"
    start = threading.Barrier(10)
    answers: list[requests.Response] = []

    def approve() -> None:
        """Wait for every caller, then approve."""
        start.wait()
        answers.append(requests.post(url, headers=acme.headers, json={}, timeout=60))

    workers = [threading.Thread(target=approve) for _ in range(10)]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert len(answers) == 10
    for answer in answers:
        assert answer.status_code in (200, 409), answer.text
        if answer.status_code == 409:
            assert answer.json()["error"]["code"] == "approval_in_progress"
            assert 1 <= int(answer.headers["Retry-After"]) <= 5
    fresh = [a for a in answers if a.status_code == 200 and not a.json()["already"]]
    assert len(fresh) == 1
    (event,) = origin_rows(sandbox_server, "change_events", ticket["id"])
    with closing(sqlite3.connect(sandbox_server.db_path)) as connection:
        names = [row[0] for row in connection.execute(
            "SELECT filename FROM attachments WHERE owner_kind = 'change_event' AND owner_id = ?",
            [event["id"]])]
    assert sorted(names) == ["photo-01-a.jpg", "signature.png",  # each uploaded once
                             f"ticket-T-{ticket['id'][:8].upper()}.pdf"]
    final = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert final["status"] == "written"
    assert [d["action"] for d in final["decisions"]] == ["approved"]
    assert final["external"] == fresh[0].json()["external"]


def test_write_stored_but_answer_lost_is_found_on_retry(client, acme, app, sandbox_server):
    ticket = create(client, acme, photos=[{"data_url": data_url(jpeg_bytes())}])
    control(sandbox_server, acme).fault(500, after_commit=True, message="Gateway hiccup")
    failed = act(client, acme, ticket["id"], "approve")
    assert failed.status_code == 502
    assert "Gateway hiccup" in failed.json["error"]["message"]
    row = stored(app, ticket["id"])
    assert row.status == "submitted" and row.approval_claim_id is None
    (event,) = origin_rows(sandbox_server, "change_events", ticket["id"])
    retried = act(client, acme, ticket["id"], "approve")
    assert retried.status_code == 200, retried.json
    assert retried.json["external"]["change_event_id"] == event["id"]
    assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1
    attached = remote(app, acme).get_change_event(int(ticket["project_id"]), event["id"])
    assert [a["filename"] for a in attached["attachments"]] == \
        ["photo-01.jpg", f"ticket-T-{ticket['id'][:8].upper()}.pdf"]


def test_retry_at_another_destination_adopts_the_earlier_record(client, acme, sandbox_server):
    ticket = create(client, acme)
    control(sandbox_server, acme).fault(500, after_commit=True)
    assert act(client, acme, ticket["id"], "approve").status_code == 502
    (event,) = origin_rows(sandbox_server, "change_events", ticket["id"])
    retried = act(client, acme, ticket["id"], "approve", {"destination": "daily_log"})
    assert retried.status_code == 200
    assert retried.json["external"]["destination"] == "change_event"
    assert retried.json["external"]["change_event_id"] == event["id"]
    assert origin_rows(sandbox_server, "manpower_logs", ticket["id"]) == []


@pytest.mark.parametrize("status, code", [(422, "project_system_error"),
                                          (500, "project_system_write_unconfirmed")])
def test_refused_write_is_502_with_the_project_systems_message(client, acme, app,
                                                               sandbox_server, status, code):
    ticket = create(client, acme)
    control(sandbox_server, acme).fault(status, message="Budget is locked for edits")
    failed = act(client, acme, ticket["id"], "approve")
    assert failed.status_code == 502 and failed.json["error"]["code"] == code
    assert "Budget is locked for edits" in failed.json["error"]["message"]
    read = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert read["status"] == "submitted" and read["decisions"] == [] and read["external"] is None
    assert stored(app, ticket["id"]).approval_claim_id is None
    assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []
    assert act(client, acme, ticket["id"], "approve").status_code == 200
    assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1


def test_an_unanswered_attachment_is_completed_without_duplicates(client, acme, app, sandbox_server):
    ticket = create(client, acme, photos=[{"name": "a.jpg", "data_url": data_url(jpeg_bytes())},
                                          {"name": "b.jpg", "data_url": data_url(jpeg_bytes())}],
                    signature={"name": "Sam", "image": data_url(png_bytes(), "image/png")})
    control(sandbox_server, acme).fault(503, after_commit=True, methods=["PATCH"],
                                        match="/rest/v1.1/change_events/")
    failed = act(client, acme, ticket["id"], "approve")
    assert failed.status_code == 502
    (event,) = origin_rows(sandbox_server, "change_events", ticket["id"])
    every = ["photo-01-a.jpg", "photo-02-b.jpg", "signature.png",
             f"ticket-T-{ticket['id'][:8].upper()}.pdf"]
    # All the files went in the one PATCH whose answer was lost: they are all there, or none.
    unanswered = remote(app, acme).get_change_event(int(ticket["project_id"]), event["id"])
    assert [a["filename"] for a in unanswered["attachments"]] == every
    assert act(client, acme, ticket["id"], "approve").status_code == 200
    complete = remote(app, acme).get_change_event(int(ticket["project_id"]), event["id"])
    assert [a["filename"] for a in complete["attachments"]] == every  # none sent again
    assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1


def test_crashed_claim_blocks_until_it_expires(client, acme, app, sandbox_server):
    ticket = create(client, acme)
    # A process wrote the change event, then died before recording it or letting go.
    control(sandbox_server, acme).fault(500, after_commit=True)
    assert act(client, acme, ticket["id"], "approve").status_code == 502
    (event,) = origin_rows(sandbox_server, "change_events", ticket["id"])
    with app.app_context():
        row = db.session.get(Ticket, ticket["id"])
        row.approval_claim_id = "00000000-dead-4000-8000-000000000000"
        row.approval_claimed_at = utcnow()
        db.session.commit()
    for action in ("approve", "reject"):
        blocked = act(client, acme, ticket["id"], action)
        assert blocked.status_code == 409
        assert blocked.json["error"]["code"] == "approval_in_progress"
        assert 1 <= int(blocked.headers["Retry-After"]) <= 5
    ttl = app.config["APPROVAL_CLAIM_TTL_S"]
    with time_machine.travel(utcnow() + dt.timedelta(seconds=ttl + 1)):
        approved = act(client, acme, ticket["id"], "approve")
    assert approved.status_code == 200, approved.json
    assert approved.json["external"]["change_event_id"] == event["id"]
    assert approved.json["approved_by"] == actor(acme)
    assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1
    assert stored(app, ticket["id"]).approval_claim_id is None


def test_route_to_a_code_of_another_cost_type_is_not_exact(client, acme, app, sandbox_server):
    """A labor line pointed at a materials code is taken as asked, but is no confirmed code."""
    project = acme.project()
    ticket = create(client, acme, equipment=[], materials=[])
    materials_code = budget_code_id(client, acme, project["id"], "02-200.M")
    refused = act(client, acme, ticket["id"], "approve",
                  {"routes": {"0": materials_code}, "require_exact": True})
    assert refused.status_code == 409 and refused.json["error"]["code"] == "lines_need_review"
    assert refused.json["error"]["details"] == [
        {"line": 0, "reason": "not on a confirmed budget code (exact: false)",
         "description": "Laborer — 3 × 8 h"}]
    assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []
    approved = act(client, acme, ticket["id"], "approve", {"routes": {"0": materials_code}})
    assert approved.status_code == 200, approved.json
    line = approved.json["routing"][0]
    assert (line["budget_code_id"], line["exact"], line["needs_review"]) == \
        (materials_code, False, True)
    assert line["reason"] == (f"routed by {actor(acme)} to 02-200.M, a materials budget code, "
                              "but the line is labor")
