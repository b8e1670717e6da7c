"""Every message a PM sees on the review pages is in plain words."""
from __future__ import annotations

import html as htmllib
import re

from tests.test_review_pages import new_ticket, sign_in

# What a PM must never read: field paths, API parameters, HTTP verbs, exception names.
JARGON = re.compile(r"routes|destination|daily_log|change_event\b|allow_unrouted|allow_rejected|"
                    r"require_exact|exact: false|\bGET\b|\bPOST\b|/rest/|Error\b|Exception|"
                    r"labor\[|equipment\[|materials\[|`|HTTP|project system")


def visible_text(page_html: str) -> str:
    """The text a person reads: no tags, no attribute values."""
    return htmllib.unescape(re.sub(r"<[^>]+>", " ", page_html))


def assert_plain(page_html: str):
    text = visible_text(page_html)
    found = JARGON.findall(text)
    assert not found, (found, text)


def test_refusals_and_warnings_are_plain(app, client, acme):
    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme, labor=[  # the Mystery line has no rate and no budget code
        {"trade": "Laborer", "hours": 2, "rate": 50, "costCode": "02-200"},
        {"trade": "Laborer", "hours": 1, "rate": 50, "costCode": "01-500"},
        {"trade": "Mystery", "hours": 1}])
    page = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    assert "Labor line 3 (Mystery) has no rate" in visible_text(page)
    assert_plain(page)
    refused = browser.post(f"/tickets/{ticket['id']}/approve", {"destination": "change_event"})
    assert refused.status_code == 422
    text = visible_text(refused.get_data(as_text=True))
    assert "2 lines need a check before this can be written. Nothing was written." in text
    assert re.search(r"Line 2 \(Laborer[^)]*\) is marked to check: confirm its budget code or "
                     r"pick another", text)
    assert re.search(r"Line 3 \(Mystery[^)]*\) has no budget code yet: pick one", text)
    assert_plain(refused.get_data(as_text=True))


def test_the_only_destination_is_preselected_and_explained(app, client, acme):
    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme, project_id=acme.project(False)["id"])
    page = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    assert re.search(r'value="daily_log"[^>]* checked', page)
    assert "the only way to record this ticket there is a daily log entry" in page
    assert_plain(page)
    refused = browser.post(f"/tickets/{ticket['id']}/approve", {"destination": "",
                                                                "allow_unrouted": "on"})
    assert "does not use change events in Procore" in visible_text(refused.get_data(as_text=True))
    assert_plain(refused.get_data(as_text=True))


def test_procore_unreachable_is_said_plainly(app, client, acme):
    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme, labor=[{"trade": "Laborer", "hours": 2, "rate": 50,
                                             "costCode": "02-200"}])
    app.config["SANDBOX_URL"] = "http://127.0.0.1:9"  # nothing listens on the discard port
    app.config["PROJECT_SYSTEM_CONNECT_TIMEOUT_S"] = 1
    app.config["PROJECT_SYSTEM_READ_RETRIES"] = 0
    with app.app_context():
        from services.project_system import projects
        projects.clear_caches()
    refused = browser.post(f"/tickets/{ticket['id']}/approve", {"destination": "change_event"})
    text = visible_text(refused.get_data(as_text=True))
    assert "Procore cannot be reached right now. Nothing was written" in text
    assert_plain(refused.get_data(as_text=True))
    page = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    assert_plain(page)


def test_a_write_procore_did_not_confirm_is_not_called_unwritten(app, client, acme, sandbox_server):
    from tests.test_approval import control, origin_rows

    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme, labor=[{"trade": "Laborer", "hours": 2, "rate": 50,
                                             "costCode": "02-200"}])
    browser.get(f"/tickets/{ticket['id']}")
    # Procore keeps the change event, and its answer is lost on the way back.
    control(sandbox_server, acme).fault(0, after_commit=True)
    refused = browser.post(f"/tickets/{ticket['id']}/approve", {"destination": "change_event"})
    text = visible_text(refused.get_data(as_text=True))
    assert "may already be in Procore" in text and "never written twice" in text
    assert "Nothing was written" not in text
    assert_plain(refused.get_data(as_text=True))
    assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1
    again = browser.post(f"/tickets/{ticket['id']}/approve", {"destination": "change_event"})
    assert "Written to Procore" in visible_text(again.get_data(as_text=True))
    assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1


def test_a_chosen_budget_code_gone_from_procore_is_said_per_line(app, client, acme):
    """A page's pick that Procore no longer has (the API's 409 budget_code_not_found) is named
    by its line, in plain words."""
    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme, labor=[{"trade": "Laborer", "hours": 2, "rate": 50,
                                              "costCode": "02-200"}])
    refused = browser.post(f"/tickets/{ticket['id']}/approve", {
        "destination": "change_event", "routes[0]": "999999999"})
    assert refused.status_code == 422
    text = visible_text(refused.get_data(as_text=True))
    assert "1 chosen budget code can no longer be used. Nothing was written." in text
    assert "Line 1 has a budget code that can no longer be used: pick another" in text
    assert_plain(refused.get_data(as_text=True))
