"""Where a written ticket stands in Procore, read back from the live sandbox: the sync endpoint,
the ticket page's read of a stale record, the scheduled command within Procore's rate limit,
deleted or void records, and the queue's "written, not on a change order"."""
from __future__ import annotations

import datetime as dt
import re
import sqlite3
import time
from contextlib import closing

import pytest
import time_machine

from models import Ticket, db, utcnow
from services.project_system import projects
from tests.conftest import ConnectedTenant
from tests.test_approval import act, control, create, origin_rows, remote
from tests.test_review_pages import sign_in

pytestmark = pytest.mark.live


def written(client, tenant: ConnectedTenant, **extra) -> dict:
    """A ticket approved into a change event, as the API answers it then."""
    ticket = create(client, tenant, **extra)
    answer = act(client, tenant, ticket["id"], "approve")
    assert answer.status_code == 200, answer.json
    return answer.json


def sync(client, tenant: ConnectedTenant, ticket_id: str):
    """POST /v1/tickets/{id}/sync."""
    return client.post(f"/v1/tickets/{ticket_id}/sync", headers=tenant.headers)


def stored(app, ticket_id: str) -> Ticket:
    """The ticket row as stored now."""
    with app.app_context():
        ticket = db.session.get(Ticket, ticket_id)
        db.session.expunge(ticket)
        return ticket


def propose_on_commitment(sandbox_server, ticket: dict, vendor: str) -> dict:
    """Put every line of a ticket's change event on the vendor's one subcontract of the project,
    as a PM picks the sub's vendor and subcontract line by line in Procore; that commitment."""
    with closing(sqlite3.connect(sandbox_server.db_path)) as connection:
        connection.row_factory = sqlite3.Row
        found = dict(connection.execute(
            "SELECT commitments.* FROM commitments JOIN vendors ON vendors.id = "
            "commitments.vendor_id WHERE vendors.name = ? AND commitments.project_id = ? AND "
            "commitments.kind = 'work_order'", [vendor, int(ticket["project_id"])]).fetchone())
        with connection:
            connection.execute("UPDATE change_items SET vendor_id = ?, contract_id = ? WHERE "
                               "change_event_id = ?", [found["vendor_id"], found["id"],
                                                       ticket["external"]["change_event_id"]])
    return found


def test_sync_shows_a_closed_change_event_on_a_commitment_change_order(
        app, client, acme, sandbox_server):
    """Open and on no change order when written; once the PM closes it in Procore and puts its
    lines on the sub's commitment change order, sync answers both, read back from Procore."""
    ticket = written(client, acme)
    event_id = ticket["external"]["change_event_id"]
    first = sync(client, acme, ticket["id"])
    assert first.status_code == 200, first.json
    assert first.json["external"]["status"] == "Open"
    assert first.json["external"]["change_orders"] == []
    assert first.json["external"]["deleted"] is False
    assert first.json["status"] == "written"
    read_at = dt.datetime.fromisoformat(first.json["external"]["status_read_at"])

    procore = control(sandbox_server, acme)
    propose_on_commitment(sandbox_server, ticket, "Apex Concrete, Inc.")
    procore.set_change_event_status(int(ticket["project_id"]), event_id, "Closed")
    procore.put_on_change_orders(event_id, "commitment", "pending", title="Apex extra work")
    answer = sync(client, acme, ticket["id"])
    assert answer.status_code == 200, answer.json
    external = answer.json["external"]
    assert external["status"] == "Closed" and external["deleted"] is False
    assert external["change_orders"] == [{"kind": "commitment", "number": "CCO-001",
                                          "title": "Apex extra work", "status": "pending"}]
    assert dt.datetime.fromisoformat(external["status_read_at"]) >= read_at
    # The same as the ticket reads afterwards, and the ticket itself is unchanged.
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["external"] == \
        external
    assert answer.json["status"] == "written" and answer.json["routing"] == ticket["routing"]
    assert stored(app, ticket["id"]).change_orders_approved is False
    # The ticket page says it in a PM's words.
    html = sign_in(app, client, acme).get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    assert "Status in Procore: Closed. On commitment change order CCO-001 “Apex extra work” " \
           "(pending)." in html
    # Once the change order is approved in Procore the claim is paid: no longer outstanding.
    procore.put_on_change_orders(event_id, "commitment", "approved")
    assert sync(client, acme, ticket["id"]).status_code == 200
    assert stored(app, ticket["id"]).change_orders_approved is True
    procore.close()


def test_sync_refuses_what_has_no_record(app, client, acme, rival):
    """A ticket not written is 409 ticket_not_written; another company's is not found."""
    ticket = create(client, acme)
    refused = sync(client, acme, ticket["id"])
    assert refused.status_code == 409 and refused.json["error"]["code"] == "ticket_not_written"
    assert stored(app, ticket["id"]).record_read_at is None
    theirs = written(client, rival)
    assert sync(client, acme, theirs["id"]).status_code == 404
    assert sync(client, acme, "no-such-ticket").status_code == 404


def test_sync_while_procore_is_away_answers_its_error_and_keeps_what_was_known(
        app, client, acme, sandbox_server):
    """Procore answering 503 is the usual 502 project_system_unavailable; the last read stays,
    and the page's "Read it again" says so in a PM's words."""
    ticket = written(client, acme)
    assert sync(client, acme, ticket["id"]).status_code == 200
    before = stored(app, ticket["id"])
    browser = sign_in(app, client, acme)
    control(sandbox_server, acme).fault(503, count=5, methods=["GET"])
    away = sync(client, acme, ticket["id"])
    assert away.status_code == 502, away.json
    assert away.json["error"]["code"] == "project_system_unavailable"
    page = browser.post(f"/tickets/{ticket['id']}/sync", {}, htmx=True)
    assert page.status_code == 422
    assert "Procore could not be read just now, so this shows what was last read from it." in \
        page.get_data(as_text=True)
    after = stored(app, ticket["id"])
    assert (after.record_status, after.record_read_at) == (before.record_status,
                                                           before.record_read_at)


def test_deleted_or_void_in_procore_shows_and_the_ticket_is_never_written_again(
        app, client, acme, sandbox_server):
    """A change event voided or deleted in Procore shows so on the API and the page; the ticket
    stays written: restore is refused and approving again writes nothing."""
    voided, deleted = written(client, acme), written(client, acme)
    project = int(voided["project_id"])
    control(sandbox_server, acme).set_change_event_status(
        project, voided["external"]["change_event_id"], "Void")
    with app.app_context():
        remote(app, acme).delete_change_event(project, deleted["external"]["change_event_id"])
    void_state = sync(client, acme, voided["id"]).json["external"]
    assert void_state["status"] == "Void" and void_state["deleted"] is False
    deleted_state = sync(client, acme, deleted["id"]).json["external"]
    assert deleted_state["deleted"] is True
    browser = sign_in(app, client, acme)
    for ticket, words in ((voided, "This change event is void in Procore."),
                          (deleted, "This change event was deleted in Procore.")):
        html = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
        assert words in html and "it is never written twice" in html
        refused = act(client, acme, ticket["id"], "restore")
        assert refused.status_code == 409 and refused.json["error"]["code"] == "ticket_written"
        assert "never restored nor written again" in refused.json["error"]["message"]
        again = act(client, acme, ticket["id"], "approve")
        assert again.status_code == 200 and again.json["already"] is True
        assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1
        assert stored(app, ticket["id"]).status == "written"
    assert "(its record is deleted there)" in act(
        client, acme, deleted["id"], "restore").json["error"]["message"]
    written_tab = browser.get("/queue?status=written").get_data(as_text=True)
    assert "void in Procore" in written_tab and "deleted in Procore" in written_tab
    gone = browser.post(f"/tickets/{deleted['id']}/restore", {}, htmx=True)
    assert gone.status_code == 422 and "already in Procore" in gone.get_data(as_text=True)


def test_the_ticket_page_reads_a_stale_record_again_and_not_a_fresh_one(
        app, client, acme, sandbox_server):
    """Opened within 15 minutes of the last read, the page calls nothing; opened after, it
    reads the record again (in the background, waiting briefly) and keeps what it says."""
    ticket = written(client, acme)
    assert sync(client, acme, ticket["id"]).json["external"]["status"] == "Open"
    read_at = stored(app, ticket["id"]).record_read_at
    control(sandbox_server, acme).set_change_event_status(
        int(ticket["project_id"]), ticket["external"]["change_event_id"], "Closed")
    browser = sign_in(app, client, acme)
    with time_machine.travel(read_at + dt.timedelta(minutes=14), tick=False):
        html = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
        with app.app_context():
            projects.wait_for_background_reads(30)
    assert "Status in Procore: Open." in html
    assert stored(app, ticket["id"]).record_read_at == read_at  # nothing was read
    later = read_at + dt.timedelta(minutes=16)
    with time_machine.travel(later, tick=False):
        browser.get(f"/tickets/{ticket['id']}")
        with app.app_context():
            projects.wait_for_background_reads(30)
    fresh = stored(app, ticket["id"])
    assert fresh.record_read_at == later and fresh.record_status == "Closed"
    # An action's answer (here, signing links' panel after reading again) never reads itself.
    with time_machine.travel(later + dt.timedelta(minutes=16), tick=False):
        browser.post(f"/tickets/{ticket['id']}/reprice", {}, htmx=True)
        with app.app_context():
            projects.wait_for_background_reads(30)
    assert stored(app, ticket["id"]).record_read_at == later
    html = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    assert "Status in Procore: Closed. Not on a change order yet." in html


@pytest.mark.alone  # measures how long the page waits: nothing else may load the machine
def test_a_slow_procore_never_makes_the_ticket_page_wait_long(app, client, acme,
                                                              sandbox_server):
    """Procore taking 4 s an answer: a stale ticket's page opens after at most a brief wait with
    what was known, and the read goes on behind it, kept for the next time the page opens."""
    ticket = written(client, acme)
    assert sync(client, acme, ticket["id"]).status_code == 200
    read_at = stored(app, ticket["id"]).record_read_at
    procore = control(sandbox_server, acme)
    procore.set_change_event_status(int(ticket["project_id"]),
                                    ticket["external"]["change_event_id"], "Pending")
    browser = sign_in(app, client, acme)
    procore.set_latency(4000)
    later = read_at + dt.timedelta(minutes=20)
    try:
        with time_machine.travel(later, tick=False):
            started = time.monotonic()
            html = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
            took = time.monotonic() - started
            with app.app_context():
                projects.wait_for_background_reads(30)
    finally:
        procore.set_latency(None)
    assert took < 3.5, took  # PAGE_WAIT_S (1.2 s), not Procore's 4 s
    assert "Status in Procore: Open." in html
    assert stored(app, ticket["id"]).record_status == "Pending"
    assert "Status in Procore: Pending." in browser.get(
        f"/tickets/{ticket['id']}").get_data(as_text=True)


def test_the_command_reads_a_page_of_tickets_longest_unread_first_within_the_rate_limit(
        app, client, acme, sandbox_server, monkeypatch):
    """`project-system sync --limit 6` reads the six tickets never read (not the one read just
    now), its calls paced by Procore's spike limit (4 calls in 10 s here): it waits for the
    window's reset (on the sandbox's clock, skipped) and never meets a 429."""
    control(sandbox_server, acme).set_spike_limit(4)
    tickets = [written(client, acme) for _ in range(7)]
    read_just_now = tickets[3]
    assert sync(client, acme, read_just_now["id"]).status_code == 200
    procore = remote(app, acme)
    statuses: list[int] = []
    monkeypatch.setattr(procore, "observer", lambda answer, _body: statuses.append(
        answer.status_code))
    waited = procore.clock.skipped
    result = app.test_cli_runner().invoke(args=["project-system", "sync", "--limit", "6"])
    assert result.exit_code == 0, result.output
    assert "6 record(s) read, 0 refused" in result.output
    assert statuses == [200] * 6  # one read a ticket, none refused
    assert procore.clock.skipped - waited >= 5  # it waited for Procore's window to reset
    others = [t for t in tickets if t is not read_just_now]
    assert all(stored(app, t["id"]).record_status == "Open" for t in others)
    assert stored(app, read_just_now["id"]).record_read_at < min(
        stored(app, t["id"]).record_read_at for t in others)


def test_the_command_leaves_a_company_whose_procore_is_away_for_the_next_run(
        app, client, acme, rival, sandbox_server):
    """One company's Procore away leaves its tickets unread for a later run, and never holds
    the others back: the next run goes on to them."""
    ours, theirs = written(client, acme), written(client, rival)
    control(sandbox_server, acme).fault(503, count=10, methods=["GET"])
    runner = app.test_cli_runner()
    first = runner.invoke(args=["project-system", "sync", "--limit", "1"])
    assert "0 record(s) read" in first.output
    assert f"company {acme.company_id}: left for the next run (project_system_unavailable)" \
        in first.output
    assert stored(app, ours["id"]).record_read_at is None
    second = runner.invoke(args=["project-system", "sync", "--limit", "1"])
    assert "1 record(s) read, 0 refused" in second.output
    assert stored(app, theirs["id"]).record_status == "Open"
    assert stored(app, ours["id"]).record_read_at is None


def test_the_queue_lists_written_tickets_not_on_a_change_order(app, client, acme,
                                                               sandbox_server):
    """'Written, not on a change order' lists written change events on none, with the age
    since written and their count and dollars; not those on one, nor unwritten tickets."""
    billed, waiting = written(client, acme), written(client, acme)
    create(client, acme)  # submitted, not written
    logged = create(client, acme, acme.project(change_events=False))
    daily = act(client, acme, logged["id"], "approve", {"destination": "daily_log"}).json
    daily_state = sync(client, acme, daily["id"]).json["external"]
    assert daily_state["status"] is not None and daily_state["change_orders"] == []
    control(sandbox_server, acme).put_on_change_orders(
        billed["external"]["change_event_id"], "prime", "pending", title="Owner PCO")
    for ticket in (billed, waiting):
        assert sync(client, acme, ticket["id"]).status_code == 200
    with app.app_context():  # written three days ago
        db.session.get(Ticket, waiting["id"]).approved_at = utcnow() - dt.timedelta(days=3, hours=1)
        db.session.commit()
    browser = sign_in(app, client, acme)
    html = browser.get("/queue?not_on_change_order=1").get_data(as_text=True)
    rows = set(re.findall(r'<tr class="queue-row[^"]*" data-ticket="([^"]+)"', html))
    assert rows == {waiting["id"]}  # not the billed, the submitted nor the daily log entry
    assert f"Written, not on a change order (1 · ${float(waiting['total']):,.2f})" in html
    assert "written 3 d ago" in html
    assert "Open; not on a change order yet" in html
    # The tab is there from every view, with the same count and dollars.
    queue = browser.get("/queue").get_data(as_text=True)
    assert f"Written, not on a change order (1 · ${float(waiting['total']):,.2f})" in queue
    # Programs read the same list, and its CSV.
    listed = client.get("/v1/tickets?not_on_change_order=true", headers=acme.headers).json
    assert [t["id"] for t in listed["data"]] == [waiting["id"]] and listed["total"] == 1
    csv = client.get("/v1/tickets/export.csv?not_on_change_order=true", headers=acme.headers)
    assert waiting["id"][:8].upper() in csv.get_data(as_text=True).upper()
    assert billed["id"][:8].upper() not in csv.get_data(as_text=True).upper()
    # The written tab shows where each stands in Procore.
    written_tab = browser.get("/queue?status=written").get_data(as_text=True)
    assert "on prime change order PCO-001 “Owner PCO” (pending)" in written_tab
    # Change events written before the service read them back count as not on one yet.
    from flask_migrate import downgrade, upgrade
    with app.app_context():
        db.session.remove()
        downgrade(revision="0032")
        upgrade()
    again = browser.get("/queue?not_on_change_order=1").get_data(as_text=True)
    assert set(re.findall(r'<tr class="queue-row[^"]*" data-ticket="([^"]+)"', again)) == \
        {billed["id"], waiting["id"]}


@pytest.mark.browser
@pytest.mark.parametrize("size", [(1024, 768), (768, 1024)])
def test_a_pm_finds_the_unbilled_tickets_on_a_tablet(app, client, acme, sandbox_server,
                                                     live_server, chromium, size):
    """From the queue, the tab 'Written, not on a change order' lists what is not billed yet,
    fitting the tablet; the ticket it opens says where it stands in Procore."""
    from tests.test_queue_tablet_browser import fits
    from tests.test_review_triage import browser_sign_in

    waiting = written(client, acme)
    assert sync(client, acme, waiting["id"]).status_code == 200
    context = chromium.new_context(viewport={"width": size[0], "height": size[1]},
                                   has_touch=True)
    page = context.new_page()
    browser_sign_in(page, live_server, app, acme)
    page.click("#unbilled-tab")
    page.wait_for_url(re.compile(r".*not_on_change_order=1.*"))
    row = page.locator(f"tr.queue-row[data-ticket='{waiting['id']}']")
    assert row.locator("td.in-procore").inner_text() == "Open; not on a change order yet"
    assert re.fullmatch(r"written \d+ min ago", row.locator(".written-age").inner_text())
    width, window = fits(page)
    assert width <= window, (size, width)
    box = row.locator("td").last.bounding_box()
    assert box["x"] + box["width"] <= window, (size, "last column cut off")
    row.locator(f"#open-{waiting['id']}").click()
    page.wait_for_selector("p.in-procore")
    assert page.inner_text("p.in-procore").startswith(
        "Status in Procore: Open. Not on a change order yet. Read ")
    context.close()
