"""The board in Chromium at tablet size: no accessibility violation, a tap on a bar opens the
queue on as many tickets as the bar says, and print shows the tables without the charts."""
from __future__ import annotations

import re

import pytest
from sqlalchemy import update

from models import Ticket, db
from tests.pile import seed_pile
from tests.test_accessibility import OpenRequests, serious_violations, settle
from tests.test_review_triage import browser_sign_in

pytestmark = pytest.mark.browser


def test_the_board_reads_on_a_tablet_and_a_tap_opens_its_tickets(app, acme, live_server, axe_tablet):
    seeded = seed_pile(app, acme, count=24)
    with app.app_context():  # one written as a change event: its backup package is offered
        db.session.execute(update(Ticket).where(Ticket.id == seeded[1].id).values(
            status="written", on_change_order=False,
            external={"destination": "change_event", "change_event_id": 7, "number": "007"}))
        db.session.commit()
    page = axe_tablet.new_page()
    requests = OpenRequests(page)
    browser_sign_in(page, live_server, app, acme)
    page.click("#board-link")
    page.wait_for_url(re.compile(r".*/board$"))
    settle(page, requests)
    assert serious_violations(page, ("minor", "moderate", "serious", "critical")) == []
    assert page.locator("#board-stage svg a.bar").count() >= 2
    # Every bar can be reached with the keyboard and says what it counts.
    bar = page.locator("#board-sub svg a.bar").first
    label, count = bar.get_attribute("aria-label"), int(bar.get_attribute("data-count"))
    assert re.search(rf": {count} tickets?, \$[\d,]+\.\d\d$", label), label
    box = bar.locator("rect").bounding_box()
    assert box["height"] >= 24  # a finger finds it
    bar.locator("rect").tap()
    page.wait_for_url(re.compile(r".*/queue\?.*stage=outstanding.*"))
    settle(page, requests)
    assert re.search(rf"of {count} tickets?\b", page.locator(".count").first.inner_text())
    assert "From the board" in page.locator("#board-filter").inner_text()
    assert serious_violations(page) == []
    # The filters narrow the board in place.
    page.go_back()
    settle(page, requests)
    page.select_option("#board-filters select[name=sub]", "Bolt Electric")
    page.wait_for_url(re.compile(r".*sub=Bolt.*"))
    settle(page, requests)
    assert {page.locator("#board-sub table tbody th").all_inner_texts()[0]} == {"Bolt Electric"}
    # Printed, the tables stand for the charts.
    page.emulate_media(media="print")
    assert not page.locator("#board-stage svg").is_visible()
    assert page.locator("#board-stage table").is_visible()
    assert not page.locator("header.topbar").is_visible()
    # Links that lead nowhere on paper are left out of it.
    assert not page.get_by_text("Morning e-mail").is_visible()
    assert not page.get_by_text("Backup packages for the owner").is_visible()


def test_a_bar_s_queue_keeps_its_age_when_the_pm_narrows_it(app, acme, live_server, axe_tablet):
    """From a bar of one sub and age, the queue's age chips are the board's, and picking a
    project lists exactly that sub's tickets of that age and project."""
    seeded = seed_pile(app, acme, count=60)
    page = axe_tablet.new_page()
    browser_sign_in(page, live_server, app, acme)
    page.goto(f"{live_server.url}/board")
    cell = page.locator('#board-sub tr[data-row="Bolt Electric"] td[data-age="3_7"] a')
    count = int(cell.inner_text().split(" ·")[0])
    cell.click()
    page.wait_for_url(re.compile(r".*/queue\?.*age=3_7.*"))
    # The queue's age chips are then the board's ages, the bar's one chosen with its count.
    chips = page.locator("#queue-rows .bucket .label").all_inner_texts()
    assert chips == ["0-2 days", "3-7 days", "8-30 days", "Over 30 days"]
    chosen = page.locator("#queue-rows .bucket.chosen")
    assert chosen.locator(".label").inner_text() == "3-7 days"
    assert int(chosen.locator("strong").inner_text()) == count
    assert serious_violations(page) == []
    project = seeded[1].project_id
    page.select_option("#queue-filters select[name=project_id]", project)
    page.wait_for_url(re.compile(rf".*project_id={project}.*"))
    assert "age=3_7" in page.url
    expected = {t.id for t in seeded if t.sub == "Bolt Electric" and t.project_id == project
                and 72 <= t.age_hours < 192}
    page.wait_for_function("document.querySelectorAll('#queue-rows tr.queue-row').length > 0")
    listed = set(page.locator("#queue-rows tr.queue-row").evaluate_all(
        "rows => rows.map(row => row.dataset.ticket)"))
    assert expected and listed == expected
    assert "3-7 days" in page.locator("#board-filter").inner_text()
