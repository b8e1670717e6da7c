"""The review queue in a real headless Chromium at tablet size."""
from __future__ import annotations

import re

import pytest

from services.accounts import reviewers

pytestmark = pytest.mark.browser

PASSWORD = "correct horse battery"


@pytest.fixture
def reviewer(app, acme) -> str:
    with app.app_context():
        reviewers.create_reviewer(acme.company_id, "pm@acme.example", PASSWORD)
    return "pm@acme.example"


def sign_in(page, live_server, email):
    page.goto(f"{live_server.url}/login")
    page.fill('input[name="email"]', email)
    page.fill('input[name="password"]', PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/queue.*"))


def make_ticket(client, tenant, description="Moved trench 3 m east"):
    return client.post("/v1/tickets", headers=tenant.headers, json={
        "project_id": tenant.project()["id"], "description": description, "reason": "Gas line",
        "directed_by": "Sam Ortiz", "labor": [
            {"trade": "Laborer", "hours": 2, "rate": 50, "costCode": "02-200"},
            {"trade": "Carpenter", "hours": 1, "rate": 60, "costCode": "01-500"},
            {"trade": "Mystery", "hours": 1, "rate": 10}]}).json


def test_new_ticket_appears_in_the_queue(client, acme, reviewer, live_server, tablet):
    page = tablet.new_page()
    page.clock.install()
    sign_in(page, live_server, reviewer)
    assert "Needs review (0)" in page.inner_text("#queue-rows")
    make_ticket(client, acme, "Patched slab at grid C4")
    page.clock.run_for(21_000)  # the queue polls every 20 s
    page.wait_for_selector("text=Patched slab at grid C4")
    assert "Needs review (1)" in page.inner_text("#queue-rows")
    row = page.locator("tr.queue-row").first
    assert "Sam Ortiz" in row.inner_text() and "$170.00" in row.inner_text()


def test_override_create_code_approve_and_open_record(client, acme, reviewer, live_server, tablet):
    ticket = make_ticket(client, acme)
    page = tablet.new_page()
    sign_in(page, live_server, reviewer)
    page.click("text=Moved trench 3 m east")
    page.wait_for_selector("#ticket-panel")
    assert page.locator("tr.unrouted").count() == 1
    # Line 1's cost code lacks a labor budget code: create it from the page.
    page.click("text=Create labor budget code")
    page.wait_for_selector("text=01-500.L is ready")
    assert page.locator('select[name="routes[1]"] option:checked').inner_text().startswith("01-500.L")
    # Line 2 matched nothing: route it by hand.
    options = page.locator('select[name="routes[2]"] option').all_inner_texts()
    page.select_option('select[name="routes[2]"]', label=next(o for o in options if o.startswith("02-200.L")))
    page.check('input[name="destination"][value="change_event"]')
    page.click("text=Approve and write")
    page.wait_for_selector("text=Written to Procore.")
    written = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert written["status"] == "written" and written["approved_by"] == reviewer
    assert [r["budget_code"] for r in written["routing"]] == ["02-200.L", "01-500.L", "02-200.L"]
    with tablet.expect_page() as opened:
        page.click("a.record-link")
    record = opened.value
    record.wait_for_load_state()
    assert "Moved trench 3 m east" in record.content()


def test_choices_survive_every_action_on_the_ticket(client, acme, reviewer, live_server, tablet):
    ticket = make_ticket(client, acme)
    page = tablet.new_page()
    sign_in(page, live_server, reviewer)
    page.goto(f"{live_server.url}/tickets/{ticket['id']}?from=status%3Dsubmitted%26sort%3Dnewest")
    options = page.locator('select[name="routes[2]"] option').all_inner_texts()
    picked = next(o for o in options if o.startswith("02-200.L"))
    page.select_option('select[name="routes[2]"]', label=picked)
    page.check('input[name="destination"][value="daily_log"]')
    page.check('input[name="allow_unrouted"]')

    def kept():
        assert page.is_checked('input[name="destination"][value="daily_log"]')
        assert page.is_checked('input[name="allow_unrouted"]')
        assert page.locator('select[name="routes[2]"] option:checked').inner_text() == picked
        assert page.input_value("#approve-form input[name=from]") == "status=submitted&sort=newest"

    page.click("text=Create labor budget code")
    page.wait_for_selector("text=01-500.L is ready")
    kept()
    page.click("text=Price again from the current rate sheet and markups")
    page.wait_for_selector("text=Priced again")
    kept()
    page.click("text=Send it to be signed")
    page.fill('input[name="name"]', "Sam Ortiz")
    page.fill('input[name="phone"]', "+1 555 123 4567")
    page.click("text=Create the signing link")
    page.wait_for_selector("#new-sign-link")
    kept()
    page.click("text=Approve and write")
    page.wait_for_selector("text=Written to Procore.")
    written = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert written["external"]["destination"] == "daily_log"


def test_reject_and_restore(client, acme, reviewer, live_server, tablet):
    ticket = make_ticket(client, acme)
    page = tablet.new_page()
    sign_in(page, live_server, reviewer)
    page.goto(f"{live_server.url}/tickets/{ticket['id']}")
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
    page.click("summary:has-text('Reject')")
    page.check("input[name=reason_choice][value='Hours or quantities do not match what we saw']")
    page.click("button:has-text('Reject and send back')")
    page.wait_for_selector("text=Rejected and sent back")
    assert dialogs and "Reject this ticket?" in dialogs[0]
    assert "Hours or quantities do not match what we saw" in page.inner_text(".history")
    page.click("text=Restore to the queue")
    page.wait_for_selector("text=Restored to the queue.")
    decisions = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["decisions"]
    actions = [d["action"] for d in decisions]
    assert actions == ["rejected", "restored"]


def test_create_and_revoke_a_key(app, client, acme, live_server, tablet):
    with app.app_context():  # a key acts for the whole company: its admins make them
        reviewers.create_reviewer(acme.company_id, "admin@acme.example", PASSWORD, is_admin=True)
    page = tablet.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    sign_in(page, live_server, "admin@acme.example")
    page.click("nav >> text=API keys")
    page.fill('input[name="name"]', "nightly export")
    page.click("text=Create key")
    secret = page.inner_text("#new-key")
    assert secret.startswith("ewt_")
    page.click("button.copy")
    page.wait_for_selector("button.copy:has-text('Copied')")
    assert client.get("/v1/me", headers={"X-API-Key": secret}).status_code == 200
    page.reload()
    assert secret not in page.content()  # shown once only
    page.click("tr:has-text('nightly export') >> text=Revoke")
    page.wait_for_selector("tr:has-text('nightly export') >> text=revoked")
    assert client.get("/v1/me", headers={"X-API-Key": secret}).status_code == 401


def test_crew_markup_shows_as_text_and_runs_nothing(client, acme, reviewer, live_server, tablet):
    payload = "<img src=x onerror=alert(1)>"
    ticket = make_ticket(client, acme, payload)
    page = tablet.new_page()
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sign_in(page, live_server, reviewer)
    assert payload in page.inner_text("#queue-rows")
    page.goto(f"{live_server.url}/tickets/{ticket['id']}")
    assert page.inner_text("h1.ticket-title") == payload
    assert page.locator("#ticket-panel img[src='x']").count() == 0
    page.wait_for_timeout(200)
    assert dialogs == []


def test_qr_thumbnails_render_on_the_links_page(client, acme, reviewer, live_server, tablet):
    client.post("/v1/links", headers=acme.headers, json={"project_id": acme.project()["id"],
                                                         "label": "North trailer"})
    page = tablet.new_page()
    sign_in(page, live_server, reviewer)
    page.goto(f"{live_server.url}/links")
    image = page.locator("img.qr").first
    image.wait_for()
    page.wait_for_function("img => img.complete", arg=image.element_handle())
    assert image.evaluate("img => img.naturalWidth") > 0


def test_while_an_approval_is_on_its_way_the_page_says_so_and_takes_no_second_tap(
        client, acme, reviewer, live_server, tablet):
    ticket = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": acme.project()["id"], "description": "Cored two holes", "reason": "Gas line",
        "directed_by": "Sam Ortiz",
        "labor": [{"trade": "Laborer", "hours": 2, "rate": 50, "costCode": "02-200"}]}).json
    page = tablet.new_page()
    sign_in(page, live_server, reviewer)
    page.click("text=Cored two holes")
    page.wait_for_selector("#approve-form")
    assert not page.is_visible("#writing-status")
    held = []
    page.route("**/approve", lambda route: held.append(route))  # Procore is slow: no answer yet
    page.click("text=Approve and write")
    page.wait_for_function("() => document.querySelector('#writing-status').offsetParent !== null")
    assert "Writing to Procore" in page.inner_text("#writing-status")
    assert page.locator(".decision-bar button.approve:disabled").count() == 2
    page.locator("text=Approve and next").click(force=True)  # a second tap while it waits
    held[0].continue_()
    page.wait_for_selector("text=Written to Procore.")
    assert len(held) == 1  # a second request would have been held here before the answer
    written = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert written["status"] == "written" and len(written["decisions"]) == 1
