"""The day the work was done: sent with a ticket, kept, and used to date its daily log entry."""
from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from zoneinfo import ZoneInfo

from services.approval import approval_records


def test_a_friday_ticket_sent_on_monday_is_logged_on_friday():
    monday_evening = dt.datetime(2026, 11, 24, 1, 30, tzinfo=dt.timezone.utc)  # Monday 17:30 in LA
    zone = ZoneInfo("America/Los_Angeles")
    friday = SimpleNamespace(captured_at=monday_evening, worked_on=dt.date(2026, 11, 20))
    assert approval_records.log_date(friday, zone) == dt.date(2026, 11, 20)
    # Without a day given, the jobsite's date when it was captured (not UTC's Tuesday).
    unsaid = SimpleNamespace(captured_at=monday_evening, worked_on=None)
    assert approval_records.log_date(unsaid, zone) == dt.date(2026, 11, 23)


def test_the_api_takes_and_shows_worked_on(client, acme):
    body = {"project_id": acme.project()["id"], "description": "Moved trench", "reason": "Gas line",
            "directed_by": "Sam", "worked_on": "2026-11-20"}
    made = client.post("/v1/tickets", headers=acme.headers, json=body)
    assert made.status_code in (200, 201), made.json
    assert made.json["worked_on"] == "2026-11-20"
    # Only YYYY-MM-DD, as the document's `format: date` says: never a count of seconds ("0").
    for wrong in ("Friday", "0", "1763596800", "20261120", "2026-11-20T00:00:00"):
        bad = client.post("/v1/tickets", headers=acme.headers, json={**body, "worked_on": wrong})
        assert bad.status_code == 400, wrong
        assert any(d["field"] == "worked_on" for d in bad.json["error"]["details"])
    plain = client.post("/v1/tickets", headers=acme.headers, json={k: v for k, v in body.items()
                                                                    if k != "worked_on"})
    assert plain.json["worked_on"] is None
