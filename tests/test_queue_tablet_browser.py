"""The queue on a tablet in a real browser: it fits the screen, keeps focus, follows the back button."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect
from sqlalchemy import update

from tests.pile import seed_pile
from tests.test_queue_rows import signed_ticket
from tests.test_review_triage import browser_sign_in

pytestmark = pytest.mark.browser

STATUS_WORDS = {"Needs review", "Written", "Rejected"}


@pytest.fixture
def busy_queue(app, client, acme):
    """A realistic queue: a pile over three projects and four subs, one ticket waiting for a
    signature, one signed with the scope disputed, some written and some sent back."""
    pile = seed_pile(app, acme)
    unsigned = next(t for t in pile if not t.signed)
    client.post(f"/v1/tickets/{unsigned.id}/signature-requests", headers=acme.headers,
                json={"name": "Sam Ortiz", "email": "sam@gc.example"})
    signed_ticket(client, acme, qualifier="verified_scope_disputed")
    from models import Ticket, db
    with app.app_context():
        db.session.execute(update(Ticket).where(Ticket.id.in_([t.id for t in pile[2:6]]))
                           .values(status="written"))
        db.session.execute(update(Ticket).where(Ticket.id.in_([t.id for t in pile[6:9]]))
                           .values(status="rejected"))
        db.session.commit()
    return pile


def fits(page) -> tuple[int, int]:
    """The document's width and the window's: the page must not scroll sideways."""
    return page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")


@pytest.mark.parametrize("size", [(1024, 768), (768, 1024)])
def test_the_queue_fits_a_tablet_with_plain_status_words(app, acme, busy_queue, live_server,
                                                         chromium, size):
    context = chromium.new_context(viewport={"width": size[0], "height": size[1]}, has_touch=True)
    page = context.new_page()
    browser_sign_in(page, live_server, app, acme)
    for status in ("submitted", "all&sort=newest"):  # the newest page has every status
        page.goto(f"{live_server.url}/queue?status={status}")
        width, window = fits(page)
        assert width <= window, (size, status, width)
        assert page.locator("tr.queue-row .ref").first.is_visible(), (size, status)
        last = page.locator("tr.queue-row").first.locator("td").last
        box = last.bounding_box()
        assert box["x"] + box["width"] <= window, (size, status, "last column cut off")
    words = set(page.locator("tr.queue-row td.status").all_inner_texts())
    assert words == STATUS_WORDS, words
    context.close()


def test_the_refresh_keeps_focus_on_the_same_ticket(app, acme, busy_queue, live_server, tablet):
    page = tablet.new_page()
    page.clock.install()
    browser_sign_in(page, live_server, app, acme)
    link = page.locator("tr.queue-row td.description a").nth(3)
    ticket = link.locator("xpath=ancestor::tr").get_attribute("data-ticket")
    link.focus()
    page.evaluate("document.getElementById('queue-rows').dataset.old = '1'")
    page.clock.run_for(21_000)  # the queue's 20-second refresh
    page.locator("#queue-rows:not([data-old])").wait_for(state="attached")
    focused = page.evaluate("""() => { const a = document.activeElement;
        return [a.tagName, a.closest('tr') && a.closest('tr').dataset.ticket]; }""")
    assert focused == ["A", ticket]


def test_a_skip_link_leads_to_the_tickets(app, acme, busy_queue, live_server, tablet):
    page = tablet.new_page()
    browser_sign_in(page, live_server, app, acme)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to the tickets"
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    first = page.locator("tr.queue-row").first.get_attribute("data-ticket")
    assert page.evaluate("document.activeElement.closest('tr.queue-row').dataset.ticket") == first


def test_after_the_back_button_the_filter_boxes_match_the_list(app, acme, busy_queue, live_server,
                                                               tablet):
    from tests.pile import SUBS
    page = tablet.new_page()
    browser_sign_in(page, live_server, app, acme)
    project, sub = busy_queue[1].project_id, SUBS[1]
    page.select_option('select[name="project_id"]', project)
    page.wait_for_url(re.compile(rf".*project_id={project}.*"))
    page.select_option('select[name="sub"]', sub)
    page.wait_for_url(re.compile(r".*sub=.*"))
    # htmx may push the address before it swaps the rows: wait for the rows drawn for the sub
    newest = page.locator(".sorts >> text=Newest first")
    expect(newest).to_have_attribute("hx-get", re.compile(r".*sub=.*"))
    newest.click()
    page.wait_for_url(re.compile(r".*sort=newest.*"))
    filtered = page.url
    page.click(".tabs >> text=All (")
    page.wait_for_url(re.compile(r".*status=all.*"))
    page.locator("tr.queue-row td.description a").first.click()
    page.wait_for_selector("#ticket-panel")
    page.go_back()
    page.wait_for_url(re.compile(r".*status=all.*"))
    page.go_back()
    page.wait_for_url(filtered)
    # htmx puts the boxes back after the URL has changed: wait for them, up to Playwright's limit
    expect(page.locator('select[name="project_id"]')).to_have_value(project)
    expect(page.locator('select[name="sub"]')).to_have_value(sub)
    # The next filter change keeps the project and the sub.
    page.click("summary:has-text('More filters')")
    page.check('input[name="unsigned"]')
    page.wait_for_url(re.compile(r".*unsigned=1.*"))
    query = parse_qs(urlparse(page.url).query)
    assert query["project_id"] == [project] and query["sub"] == [sub], page.url
