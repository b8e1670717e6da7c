"""Procore unreachable: the review pages answer quickly from what they last knew, with a banner."""
from __future__ import annotations

import re
import time

import pytest

from tests.pile import SUGGESTED_COMMITMENT, procore_reads_settled, seed_pile
from tests.test_review_pages import sign_in
from tests.test_review_triage import browser_sign_in

BUDGET = 2.0  # seconds a page may take while Procore is away


@pytest.fixture
def pile(app, acme):
    return seed_pile(app, acme)


def stop_procore(app):
    """Point the company's connection at a port nothing listens on, and let every cached answer
    go stale (it stays as the last one known)."""
    from services.project_system import projects
    app.config["SANDBOX_URL"] = "http://127.0.0.1:9"
    with app.app_context():
        projects.expire_caches()


def timed(browser, path):
    start = time.monotonic()
    response = browser.get(path)
    return response, time.monotonic() - start


def noticed_away(app, acme) -> bool:
    """Whether the pages' background read has found Procore away (it ends within moments
    when nothing listens on its port)."""
    from services.project_system import projects
    deadline = time.monotonic() + 5
    with app.app_context():
        while projects.away_since(acme.company_id) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return projects.away_since(acme.company_id) is not None


def test_queue_and_ticket_answer_quickly_from_what_was_known(app, client, acme, pile):
    browser = sign_in(app, client, acme)
    before = browser.get("/queue").get_data(as_text=True)
    browser.get(f"/tickets/{pile[1].id}")  # the pages have read names, codes and capabilities
    assert "Procore is not answering" not in before
    stop_procore(app)
    response, took = timed(browser, "/queue")  # what was known, at once; a fresh read goes on
    assert response.status_code == 200 and took < BUDGET, took
    # That fresh read is refused at once: this very page says so, not only the next one.
    assert "Procore is not answering; approvals will wait" in response.get_data(as_text=True)
    assert noticed_away(app, acme)
    response, took = timed(browser, "/queue")
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and took < BUDGET, took
    assert "Procore is not answering; approvals will wait" in html and 'data-procore="down"' in html
    names = re.findall(r'<td class="project"><span class="clip"[^>]*>([^<]*)</span>', html)
    assert names and all(not name.isdigit() for name in names)  # names, not ids
    assert "of 60 tickets" in html
    response, took = timed(browser, f"/tickets/{pile[1].id}")
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and took < BUDGET, took
    assert "Procore is not answering; approvals will wait" in html and "02-200.L" in html
    # One clock: the queue's banner reads the jobsite's, as a ticket page on that site does.
    since = re.search(r"not answered since ([^(]+) \(", browser.get("/queue").get_data(
        as_text=True)).group(1)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} [A-Z]{3,4}", since) and "UTC" not in since
    assert any(f"not answered since {since} (" in browser.get(f"/tickets/{t.id}").get_data(
        as_text=True) for t in pile[:3])
    # The filter that needs the codes still answers in time.
    response, took = timed(browser, "/queue?to_check=1")
    assert took < BUDGET and f"of {sum(1 for t in pile if not t.clean)} ticket" in \
        response.get_data(as_text=True)


def test_nothing_known_yet_still_answers_in_time(app, client, acme, pile):
    from services.project_system import projects
    browser = sign_in(app, client, acme)
    stop_procore(app)
    with app.app_context():
        projects.clear_caches()  # as in a process that never read anything
    response, took = timed(browser, "/queue")
    assert response.status_code == 200 and took < BUDGET, took
    assert "Procore is not answering; approvals will wait" in response.get_data(as_text=True)


def test_approval_while_away_says_so_and_stays_available(app, client, acme, pile, sandbox_server):
    from tests.test_approval import origin_rows
    browser = sign_in(app, client, acme)
    target = next(t for t in pile if t.clean and t.signed and t.project_id == pile[1].project_id
                  and t.sub not in SUGGESTED_COMMITMENT)
    browser.get(f"/tickets/{target.id}")
    stop_procore(app)
    app.config["PROJECT_SYSTEM_READ_RETRIES"] = 0
    refused = browser.post(f"/tickets/{target.id}/approve", {"destination": "change_event"})
    html = refused.get_data(as_text=True)
    assert "Procore cannot be reached right now. Nothing was written" in html
    assert "Approve and write" in html  # still there to retry
    assert origin_rows(sandbox_server, "change_events", target.id) == []


@pytest.mark.browser
def test_queue_with_procore_stopped_answers_fast_and_backs_off(app, acme, pile, live_server, tablet):
    page = tablet.new_page()
    browser_sign_in(page, live_server, app, acme)  # the queue has been read once with Procore up
    stop_procore(app)
    page.clock.install()
    start = time.monotonic()
    page.goto(f"{live_server.url}/queue")  # what was known, at once; a fresh read goes on
    assert time.monotonic() - start < BUDGET
    assert noticed_away(app, acme)
    page.reload()
    assert "Procore is not answering; approvals will wait" in page.inner_text(".procore-down", timeout=2000)
    from tests.test_learning import shot
    shot(page, "queue-procore-away-tablet")
    started, finished, overlap = [], [], []

    def on_request(request):
        if "/queue" in request.url and request.headers.get("hx-request"):
            started.append(request.url)
            overlap.append(len(started) - len(finished))
    page.on("request", on_request)
    page.on("requestfinished", lambda r: finished.append(r.url)
            if "/queue" in r.url and r.headers.get("hx-request") else None)
    page.clock.run_for(21_000)
    assert started == []  # away: the first refresh waits 40 s, not 20
    refreshed_after(page, 20_000)
    assert page.locator("#queue-rows .procore-down").count() == 1
    assert len(started) == 1
    page.clock.run_for(41_000)
    assert len(started) == 1  # then 80 s
    refreshed_after(page, 40_000)
    assert len(started) == 2 and max(overlap) == 1


def refreshed_after(page, ms: int) -> None:
    """Run the page's clock `ms` ahead and wait until the queue's refresh has been swapped in
    (its next one is scheduled from then: a response's headers come before that)."""
    page.evaluate("() => { document.getElementById('queue-rows').dataset.drawn = 'before'; }")
    with page.expect_response(lambda r: "/queue" in r.url):
        page.clock.run_for(ms)
    page.wait_for_function("() => document.getElementById('queue-rows').dataset.drawn !== 'before'",
                           polling=50)


def test_a_bulk_approval_that_finds_procore_away_says_so_on_the_queue(app, client, acme, pile,
                                                                     sandbox_server):
    from tests.test_approval import origin_rows
    browser = sign_in(app, client, acme)
    target = next(t for t in pile if t.clean and t.signed and t.sub not in SUGGESTED_COMMITMENT)
    # The queue's reads end with Procore answering (on a loaded machine a first read can take
    # longer than a page waits for it, which the page tells as Procore away until it ends).
    browser.get("/queue")
    procore_reads_settled(app, acme)
    html = browser.post("/queue/bulk", {"ids": [target.id]}, htmx=True).get_data(as_text=True)
    assert "Procore is not answering" not in html
    app.config["SANDBOX_URL"] = "http://127.0.0.1:9"  # what the pages read is still fresh
    app.config["PROJECT_SYSTEM_READ_RETRIES"] = 0
    done = browser.post("/queue/bulk/approve", {"ids": [target.id]}, htmx=True)
    html = done.get_data(as_text=True)
    assert "0 written" in html and "Procore is not answering; approvals will wait" in html
    assert "Procore is not answering" in browser.get("/queue").get_data(as_text=True)
    assert origin_rows(sandbox_server, "change_events", target.id) == []


def test_a_first_read_slower_than_a_page_waits_is_not_told_as_procore_away(app, client, acme,
                                                                           pile, sandbox_server):
    from services.project_system import projects
    from tests.test_approval import control
    browser = sign_in(app, client, acme)
    procore_reads_settled(app, acme)
    with app.app_context():
        projects.clear_caches()  # as in a process that never read anything: a deploy, a restart
    # Each call slower than a page waits for a first answer, well within a call's timeout.
    procore = control(sandbox_server, acme)
    procore.set_latency(1000 * (projects.PAGE_WAIT_S + 0.8))
    html = browser.get("/queue").get_data(as_text=True)
    assert 'title="The budget codes could not be read"' in html  # drawn before Procore answered
    assert "Procore is not answering" not in html
    procore_reads_settled(app, acme)  # (the slow reads end, answered)
    procore.set_latency(None)
    for _ in range(5):  # the reads the first page could not start come with the next pages
        html = browser.get("/queue").get_data(as_text=True)
        assert "Procore is not answering" not in html
        procore_reads_settled(app, acme)
    assert 'title="The budget codes could not be read"' not in html
