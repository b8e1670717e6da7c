"""Faults of the project system at every step of an approval: never a duplicate, never lost."""
from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from support.images import data_url, jpeg_bytes, png_bytes
from tests.test_approval import act, control, create, origin_rows, remote, stored

# (label, fault settings, expected status of the faulted approve)
FAULTS = [
    ("refused before anything is stored", {"status": 500, "message": "Internal hiccup"}, 502),
    ("stored, then the answer lost", {"status": 500, "after_commit": True}, 502),
    ("attachment upload fails", {"status": 503, "methods": ["PATCH"], "match": "change_events/"}, 502),
    ("attachment stored, answer lost", {"status": 502, "after_commit": True, "methods": ["PATCH"],
                                        "match": "change_events/"}, 502),
    ("timeout after the record is stored", {"status": 500, "after_commit": True, "delay_s": 2.0}, 502),
    ("timeout before anything is stored", {"status": 500, "delay_s": 2.0}, 502),
    ("dropped connection after storing", {"status": 0, "after_commit": True}, 502),
    ("dropped connection", {"status": 0}, 502),
    # Procore answers 429 before doing anything: the write is repeated after the wait.
    ("rate limited", {"status": 429, "retry_after": 1, "message": "You have surpassed the max"}, 200),
    ("rate limited on the upload", {"status": 429, "retry_after": 3, "match": "/uploads"}, 200),
    ("rate limited on the attachment", {"status": 429, "retry_after": 2, "methods": ["PATCH"],
                                        "match": "change_events/"}, 200),
    ("upload refused", {"status": 503, "match": "/uploads"}, 502),
]


def use_fake_sleep(app, tenant) -> list[float]:
    """Make the tenant's client record its waits instead of sleeping; returns the record."""
    client = remote(app, tenant)
    waits: list[float] = []
    client.sleep = waits.append
    return waits


def attachments(sandbox_server, change_event_id: int) -> list[str]:
    """File names attached to a change event in the sandbox."""
    with closing(sqlite3.connect(sandbox_server.db_path)) as connection:
        rows = connection.execute("SELECT filename FROM attachments WHERE owner_kind = 'change_event' "
                                  "AND owner_id = ?", [change_event_id])
        return [row[0] for row in rows]


@pytest.mark.parametrize("label, fault, first_status", FAULTS, ids=[f[0] for f in FAULTS])
def test_fault_then_retry_writes_exactly_once(client, acme, app, sandbox_server, label, fault,
                                              first_status):
    app.config["PROJECT_SYSTEM_READ_TIMEOUT_S"] = 1
    app.config["PROJECT_SYSTEM_READ_RETRIES"] = 0
    ticket = create(client, acme, photos=[{"name": "a.jpg", "data_url": data_url(jpeg_bytes(30, 20))},
                                          {"name": "b.jpg", "data_url": data_url(jpeg_bytes(20, 30))}],
                    signature={"name": "Sam", "image": data_url(png_bytes(), "image/png")})
    waits = use_fake_sleep(app, acme)
    switches = control(sandbox_server, acme)
    switches.fault(count=1, **fault)
    first = act(client, acme, ticket["id"], "approve", {})
    assert first.status_code == first_status, (label, first.json)
    if first.status_code == 502:
        # Each of these was sent and not settled: it may be there, so it is not "refused".
        assert first.json["error"]["code"] == "project_system_write_unconfirmed", label
        assert stored(app, ticket["id"]).status == "submitted"
        assert stored(app, ticket["id"]).approval_claim_id is None  # released, approvable again
        second = act(client, acme, ticket["id"], "approve", {})
        assert second.status_code == 200, (label, second.json)
    switches.close()
    assert waits == ([fault["retry_after"]] if fault["status"] == 429 else []), label
    written = stored(app, ticket["id"])
    assert written.status == "written"
    assert [d.action for d in written.decisions] == ["approved"]
    rows = origin_rows(sandbox_server, "change_events", ticket["id"])
    assert len(rows) == 1, label
    assert rows[0]["id"] == written.external["change_event_id"]
    names = attachments(sandbox_server, rows[0]["id"])
    assert sorted(names) == sorted(set(names)) and len(names) == 4, (label, names)
    assert f"ticket-T-{ticket['id'][:8].upper()}.pdf" in names, (label, names)  # the document, once
    again = act(client, acme, ticket["id"], "approve", {})
    assert again.json["already"] is True
    assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1


def test_a_long_pause_asked_by_the_project_system_is_not_waited_out(client, acme, app,
                                                                    sandbox_server):
    """Procore's hourly limit: the approval answers at once with the wait, writes nothing."""
    from tests.test_review_pages import sign_in

    ticket = create(client, acme)
    waits = use_fake_sleep(app, acme)
    switches = control(sandbox_server, acme)
    switches.fault(429, count=2, retry_after=300, message="You have surpassed the max")
    first = act(client, acme, ticket["id"], "approve", {})
    assert first.status_code == 503 and first.json["error"]["code"] == "project_system_busy"
    assert first.headers["Retry-After"] == "300" and waits == []
    assert stored(app, ticket["id"]).status == "submitted"
    assert stored(app, ticket["id"]).approval_claim_id is None
    assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []
    page = sign_in(app, client, acme).post(f"/tickets/{ticket['id']}/approve",
                                           {"destination": "change_event"})
    assert "Procore is busy" in page.get_data(as_text=True)
    assert "try again in about 5 minutes" in page.get_data(as_text=True)
    switches.close()
    assert act(client, acme, ticket["id"], "approve", {}).status_code == 200
    assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1
