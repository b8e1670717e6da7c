"""Bulk approval from the queue and 'Approve and next' on the ticket page."""
from __future__ import annotations

import re
import threading

import pytest

from tests.pile import SUGGESTED_COMMITMENT, seed_pile
from tests.test_approval import origin_rows, spike_limited
from tests.test_learning import shot
from tests.test_review_pages import PASSWORD, Browser, add_reviewer, csrf_token, sign_in
from tests.test_review_triage import browser_sign_in


@pytest.fixture
def pile(app, acme):
    return seed_pile(app, acme)


def change_event_projects(acme) -> set[str]:
    """The tenant's projects that take change events."""
    return {str(p["id"]) for p in acme.projects if p["change_events"]}


def writable(acme, pile):
    """What bulk approval writes, oldest first: signed tickets, on projects with change events
    when every line is routed, and as daily log entries on projects without them."""
    ce = change_event_projects(acme)
    return [t for t in reversed(pile) if t.signed and (t.clean or t.project_id not in ce)]


def record_rows(sandbox_server, acme, ticket) -> list[dict]:
    """The records written for a ticket: change events, or daily log entries where its project
    has no change events."""
    ce = change_event_projects(acme)
    return origin_rows(sandbox_server, "change_events" if ticket.project_id in ce
                       else "manpower_logs", ticket.id)


def outcomes(html):
    return dict(re.findall(r'data-ticket="([0-9a-f-]+)" data-outcome="(\w+)"', html))


def test_bulk_writes_each_once_and_reports_each(app, client, acme, pile, sandbox_server,
                                                monkeypatch):
    browser = sign_in(app, client, acme)
    ce = change_event_projects(acme)
    chosen = [t for t in writable(acme, pile) if t.project_id in ce][:4]
    to_check = next(t for t in reversed(pile) if not t.clean and t.project_id in ce)
    no_ce = next(t for t in pile if t.project_id not in ce and t.clean and t.signed)
    ids = [t.id for t in chosen] + [to_check.id, no_ce.id]
    confirm = browser.post("/queue/bulk", {"ids": ids, "from": "sort=oldest"}, htmx=True)
    html = confirm.get_data(as_text=True)
    total = sum(t.total for t in [*chosen, no_ce])
    assert f"Write 5 tickets (${total:,.2f}) to Procore?" in html
    assert re.search(r'id="bulk-write">\s*Write 5 to Procore</button>', html)
    # The ticket with a line to check is not in the approval: listed apart, with why.
    held = html[html.index("Left out: open it to check (1)"):html.index('id="bulk-write-form"')]
    assert to_check.id in held and "has no budget code; open the ticket to pick one" in held
    form = html[html.index('id="bulk-write-form"'):]
    assert set(re.findall(r'name="ids" value="([^"]+)"', form[:form.index("</form>")])) == \
        {t.id for t in [*chosen, no_ce]}
    assert html.count("as a daily log entry (its project has no change events") == 1
    assert origin_rows(sandbox_server, "change_events", chosen[0].id) == []  # nothing yet
    # Procore's spike limit is waited out on the sandbox's clock, not the test's time.
    # The confirmation lists each sub's suggested commitment, which writing confirms.
    listed = dict(re.findall(r'name="(suggest\[[^"]+)" value="([^"]+)"', form))
    with spike_limited(app, acme, sandbox_server, monkeypatch) as (_clock, statuses):
        done = browser.post("/queue/bulk/approve", {"ids": ids, "from": "sort=oldest", **listed},
                            htmx=True)
    assert 429 not in statuses
    html = done.get_data(as_text=True)
    assert outcomes(html) == {**{t.id: "written" for t in chosen}, to_check.id: "refused",
                              no_ce.id: "written"}
    assert "5 written, 0 already in Procore, 1 not written" in html
    reasons = re.findall(r'<div class="reason">([^<]*)</div>', html)
    assert any(re.search(r"Line 2 \(Mystery[^)]*\) has no budget code yet", r) for r in reasons), reasons
    assert html.count("Written as a daily log entry") == 1
    for ticket in chosen:
        assert len(origin_rows(sandbox_server, "change_events", ticket.id)) == 1
    assert origin_rows(sandbox_server, "change_events", to_check.id) == []
    # The ticket of a project without change events went in as its page would: a daily log entry.
    assert origin_rows(sandbox_server, "change_events", no_ce.id) == []
    assert len(origin_rows(sandbox_server, "manpower_logs", no_ce.id)) == 1
    # Sent again (a double tap, a reload): nothing is written twice.
    again = browser.post("/queue/bulk/approve", {"ids": ids}, htmx=True).get_data(as_text=True)
    assert {i: o for i, o in outcomes(again).items() if i in {t.id for t in chosen}} == \
        {t.id: "already" for t in chosen}
    for ticket in chosen:
        assert len(origin_rows(sandbox_server, "change_events", ticket.id)) == 1


def test_bulk_ignores_other_companies_tickets(app, client, acme, rival, pile, sandbox_server):
    theirs = client.post("/v1/tickets", headers=rival.headers, json={
        "project_id": rival.project()["id"], "description": "Theirs", "reason": "r",
        "directed_by": "d", "labor": [{"trade": "Laborer", "hours": 1, "rate": 5,
                                       "costCode": "02-200"}]}).json
    browser = sign_in(app, client, acme)
    html = browser.post("/queue/bulk/approve", {"ids": [theirs["id"]]}, htmx=True).get_data(as_text=True)
    assert outcomes(html) == {}
    assert origin_rows(sandbox_server, "change_events", theirs["id"]) == []


@pytest.mark.browser
def test_bulk_approve_ten_clean_tickets_in_the_browser(app, acme, pile, live_server, tablet,
                                                       sandbox_server, monkeypatch):
    page = tablet.new_page()
    browser_sign_in(page, live_server, app, acme)
    chosen = [t for t in writable(acme, pile) if t.project_id in change_event_projects(acme)][:10]
    page.goto(f"{live_server.url}/queue?project_id={chosen[0].project_id}&sort=oldest")
    shown = set(page.locator("tr.queue-row").evaluate_all("rows => rows.map(r => r.dataset.ticket)"))
    assert {t.id for t in chosen} <= shown
    for ticket in chosen:
        page.check(f"input[name=ids][value='{ticket.id}']")
    total = sum(t.total for t in chosen)
    assert page.inner_text("#bulk-summary") == f"10 selected · ${total:,.2f}"
    page.click("#bulk-approve")
    page.wait_for_selector(f"text=Write 10 tickets (${total:,.2f}) to Procore?")
    # Procore's spike limit is waited out on the sandbox's clock, not the test's time.
    with spike_limited(app, acme, sandbox_server, monkeypatch) as (_clock, statuses):
        page.click("#bulk-write")
        page.wait_for_selector(".bulk-results progress")  # a bar, and each result as it lands
        page.wait_for_selector("text=10 written, 0 already in Procore, 0 not written")
    assert 429 not in statuses
    page.wait_for_function("() => !document.querySelector('#queue-rows').contains("
                           "document.querySelector('.bulk-confirm'))")
    assert page.locator(".bulk-results li[data-outcome=written]").count() == 10
    for ticket in chosen:
        assert len(origin_rows(sandbox_server, "change_events", ticket.id)) == 1
    # The written tickets left 'Needs review'.
    assert not shown & {t.id for t in chosen} & set(
        page.locator("tr.queue-row").evaluate_all("rows => rows.map(r => r.dataset.ticket)"))


@pytest.mark.browser
def test_select_all_clean_on_this_page(app, acme, pile, live_server, tablet):
    page = tablet.new_page()
    browser_sign_in(page, live_server, app, acme)
    page.click("text=Select all ready on this page")
    ticked = set(page.locator("input[name=ids]:checked").evaluate_all("els => els.map(e => e.value)"))
    on_page = set(page.locator("tr.queue-row").evaluate_all("rows => rows.map(r => r.dataset.ticket)"))
    assert ticked == {t.id for t in writable(acme, pile)} & on_page and ticked


@pytest.mark.browser
def test_approve_and_next_follows_the_queue_order(app, acme, pile, live_server, tablet,
                                                  sandbox_server):
    page = tablet.new_page()
    browser_sign_in(page, live_server, app, acme)
    page.click(".sorts >> text=Newest first")
    page.wait_for_url(re.compile(r".*sort=newest.*"))
    ordered = [t.id for t in pile]
    # the newest, of a sub whose commitment needs no confirmation
    first = [t for t in writable(acme, pile) if t.sub not in SUGGESTED_COMMITMENT][-1]
    following = ordered[ordered.index(first.id) + 1]
    page.click(f"tr[data-ticket='{first.id}'] td.description a")
    page.wait_for_selector("#ticket-panel")
    page.click("text=Approve and next")
    page.wait_for_url(re.compile(rf".*/tickets/{following}\?.*"))
    page.wait_for_selector("text=was written to Procore. This is the next ticket.")
    assert len(origin_rows(sandbox_server, "change_events", first.id)) == 1
    page.click("text=Back to the queue")
    page.wait_for_url(re.compile(r".*sort=newest.*"))


def test_bulk_wait_answer_reads_the_rate_limit_without_taking_a_call(app, client, acme):
    from tests.test_approval import remote

    # Signed in without opening the queue, whose reads of Procore would answer the budget too.
    form = client.get("/login").get_data(as_text=True)
    assert client.post("/login", data={"csrf_token": csrf_token(form), "password": PASSWORD,
                                       "email": add_reviewer(app, acme)}).status_code == 302
    browser = Browser(client, "")
    assert browser.get("/queue/bulk/wait").json == {"wait_s": 0}
    budget = remote(app, acme).budget
    budget.done(0, remote(app, acme).clock() + 6.2)  # Procore said: no call left for 6.2 s
    assert browser.get("/queue/bulk/wait").json == {"wait_s": 7}
    assert browser.get("/queue/bulk/wait").json == {"wait_s": 7}  # asking takes nothing
    budget.done(3, remote(app, acme).clock() + 16.2)  # the next window has calls to spare
    assert browser.get("/queue/bulk/wait").json == {"wait_s": 0}


@pytest.mark.browser
def test_bulk_says_when_it_waits_for_procores_rate_limit(app, acme, pile, live_server, tablet,
                                                        sandbox_server, monkeypatch):
    from tests.test_approval import control, remote

    # This test is about the wait a PM sees: the company's client holds its first wait for the
    # rate limit until the page has been read, then skips it (the app's SkippingClock moves
    # Procore's clock on), so no test time goes to Procore's 10 s window.
    procore = remote(app, acme)
    skip, waits, page_read = procore.sleep, [], threading.Event()

    def held_sleep(seconds: float) -> None:
        waits.append(seconds)
        page_read.wait(timeout=60)  # bounded: a test that failed before reading lets it go
        skip(seconds)

    monkeypatch.setattr(procore, "sleep", held_sleep)
    page = tablet.new_page()
    browser_sign_in(page, live_server, app, acme)
    chosen = [t for t in writable(acme, pile) if t.project_id in change_event_projects(acme)][:3]
    page.goto(f"{live_server.url}/queue?project_id={chosen[0].project_id}&sort=oldest")
    for ticket in chosen:
        page.check(f"input[name=ids][value='{ticket.id}']")
    page.click("#bulk-approve")
    page.wait_for_selector("#bulk-write")
    control(sandbox_server, acme).set_spike_limit(10)  # a few calls per 10 s: bulk must wait
    try:
        page.click("#bulk-write")
        title = page.locator(".bulk-progress-title")
        waiting = re.compile(
            r"Writing \d of 3 to Procore… Waiting for Procore's rate limit \((\d+) s\)")
        page.wait_for_function("() => /Waiting for Procore's rate limit \\(\\d+ s\\)/.test("
                               "document.querySelector('.bulk-progress-title').textContent)",
                               timeout=15000)
        shot(page, "bulk-waiting-tablet")
        # While they are written, the rows offer no other approval over them.
        assert page.locator("#bulk-approve").is_disabled()
        assert page.locator("#bulk-form input[name=ids]:checked").count() == 0
        assert page.locator("#bulk-form button:enabled").count() == 0
        seconds = int(waiting.search(title.inner_text()).group(1))
        assert 1 <= seconds <= 10
        assert waits and 0 < waits[0] <= 10  # the client was waiting for Procore's window
        page_read.set()
        page.wait_for_selector("text=3 written, 0 already in Procore, 0 not written",
                               timeout=60000)
        assert "Waiting" not in title.inner_text()
        for ticket in chosen:
            assert len(origin_rows(sandbox_server, "change_events", ticket.id)) == 1
    finally:
        page_read.set()  # the held wait never outlives the test


def test_all_ready_in_a_filter_with_none_ready_says_why_not_to_choose_others(app, client, acme,
                                                                            pile):
    browser = sign_in(app, client, acme)
    ce = change_event_projects(acme)
    project = next(t.project_id for t in pile if not t.clean and t.project_id in ce)
    assert not any(t.clean for t in pile if t.project_id == project)  # a line to check on each
    html = browser.post("/queue/bulk", {"all_ready": "1", "from": f"project_id={project}"},
                        htmx=True).get_data(as_text=True)
    assert "No ticket in this filter can be written from the queue" in html
    assert "choose tickets that need review" not in html and 'id="bulk-write"' not in html
