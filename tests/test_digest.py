"""The morning digest over a real SMTP server on loopback: one e-mail per reviewer with what waits
(count, dollars, the oldest, overdue signatures, written and not on a change order), none when
nothing waits, none for a reviewer who turned it off or is disabled, once a morning from 7:00 on
the company's clock, and never another company's tickets."""
from __future__ import annotations

import datetime as dt
import re
import threading
from decimal import Decimal

import pytest
import time_machine
from sqlalchemy import update

from models import Company, Reviewer, Ticket, db, short_reference
from services.accounts import reviewers
from services.project_system import projects
from services.reports import digest
from tests import test_accessibility as a11y
from tests.mailbox import smtp_server
from tests.pile import seed_pile
from tests.test_review_pages import PASSWORD, csrf_token, sign_in
from tests.test_review_procore_away import stop_procore
from tests.test_review_triage import browser_sign_in

pytestmark = pytest.mark.live

# 08:00 on the sandbox projects' clock (Pacific, daylight time): the digest is due.
NOW = dt.datetime(2026, 7, 1, 15, 0, tzinfo=dt.timezone.utc)
SEVEN_PDT = dt.datetime(2026, 7, 1, 14, 0, tzinfo=dt.timezone.utc)
PMS = ("pm1@acme.example", "pm2@acme.example")
ALL_IMPACTS = ("minor", "moderate", "serious", "critical")


def add(app, tenant, email: str, *, off: bool = False, disabled: bool = False) -> int:
    """A reviewer of the tenant's company, with the digest turned off or disabled as asked."""
    with app.app_context():
        reviewer = reviewers.create_reviewer(tenant.company_id, email, PASSWORD)
        db.session.execute(update(Reviewer).where(Reviewer.id == reviewer.id).values(
            digest_off=off, disabled_at=NOW if disabled else None))
        db.session.commit()
        return reviewer.id


@pytest.fixture
def waiting(app, acme):
    """Acme's 30 tickets (a few written long ago or lately), its four reviewers, and the
    figures its digest must show, worked out from the tickets themselves."""
    seeded = seed_pile(app, acme, count=30, now=NOW)
    # (captured, written) days ago: the last two written within 30 days, one of them of work
    # recorded over 30 days ago.
    unbilled = {seeded[1].id: (33, 31), seeded[2].id: (41, 40), seeded[3].id: (6, 5),
                seeded[4].id: (45, 10)}
    with app.app_context():
        for ticket_id, (captured, written) in unbilled.items():
            db.session.execute(update(Ticket).where(Ticket.id == ticket_id).values(
                status="written", on_change_order=False,
                captured_at=NOW - dt.timedelta(days=captured),
                approved_at=NOW - dt.timedelta(days=written)))
        db.session.commit()
    review = [t for t in seeded if t.signed and t.id not in unbilled]
    last_overdue_day = NOW.date() - dt.timedelta(days=digest.SIGNATURE_OVERDUE_DAYS)
    overdue = [t for t in seeded if not t.signed and t.id not in unbilled
               and (NOW - dt.timedelta(hours=t.age_hours)).date() <= last_overdue_day]
    old_written = [t for t in seeded if t.id in (seeded[1].id, seeded[2].id)]
    for email in PMS:
        add(app, acme, email)
    add(app, acme, "quiet@acme.example", off=True)
    add(app, acme, "gone@acme.example", disabled=True)
    assert review and overdue and len(old_written) == 2
    return {"review": review, "overdue": overdue, "written": old_written,
            "oldest": max(review, key=lambda t: t.age_hours)}


def figure(tickets) -> str:
    """A count and dollars as the e-mail writes them."""
    count = len(tickets)
    total = sum((t.total for t in tickets), Decimal(0))
    return f"{count} ticket{'s' if count != 1 else ''}, ${total:,.2f}"


def send(runner) -> str:
    """Run `flask digest send` once; its output."""
    result = runner.invoke(args=["digest", "send"])
    assert result.exit_code == 0, result.output
    return result.output


def test_each_reviewer_gets_one_digest_with_the_count_dollars_and_links(app, acme, rival,
                                                                        runner, waiting):
    seed_pile(app, rival, count=12, now=NOW)  # another company's tickets count nowhere
    add(app, rival, "pm@rival.example")
    with smtp_server() as mailbox, time_machine.travel(NOW, tick=False):
        app.config.update(mailbox.settings(), PUBLIC_BASE_URL="https://tickets.example")
        assert "3 digest(s) sent" in send(runner)
    mine = {m["To"]: m for m in mailbox.messages}
    assert sorted(mine) == sorted([*PMS, "pm@rival.example"])
    body = mine[PMS[0]].get_content()
    assert body == mine[PMS[1]].get_content().replace(*_stop_links(mine[PMS[1]], mine[PMS[0]]))
    assert f"Waiting for you to approve: {figure(waiting['review'])}" in body
    assert f"after the work: {figure(waiting['overdue'])}" in body
    assert f"not on a change order yet: {figure(waiting['written'])}" in body
    oldest = waiting["oldest"]
    (line,) = [line for line in body.splitlines() if "The oldest:" in line]
    assert line.startswith(f"  The oldest: {short_reference(oldest.id)}, Pile ticket")
    assert line.endswith(f"days ago), ${oldest.total:,.2f}")
    assert f"https://tickets.example/tickets/{oldest.id}" in body
    assert "https://tickets.example/queue?stage=review" in body
    written_day = NOW.date() - dt.timedelta(days=digest.UNBILLED_DAYS + 1)
    assert ("https://tickets.example/queue?not_on_change_order=1&written_to="
            f"{written_day.isoformat()}") in body
    overdue_day = NOW.date() - dt.timedelta(days=digest.SIGNATURE_OVERDUE_DAYS)
    assert f"https://tickets.example/queue?unsigned=1&to={overdue_day.isoformat()}" in body
    assert mine[PMS[0]]["Subject"].startswith("Extra-work tickets this morning: "
                                              f"{len(waiting['review'])} to approve")
    # The rival's digest counts the rival's tickets only (12 of them, none of Acme's 30).
    rival_body = mine["pm@rival.example"].get_content()
    counted = sum(int(n) for n in re.findall(r": (\d+) tickets?, \$", rival_body))
    assert 0 < counted <= 12 and "Acme" not in rival_body


def _stop_links(one, other) -> tuple[str, str]:
    """The 'stop' links of two digests, to compare the rest of their bodies."""
    link = re.compile(r"https?://\S+/digest/stop/\S+")
    return link.search(one.get_content()).group(0), link.search(other.get_content()).group(0)


def test_the_queue_lists_what_the_digest_counts(app, acme, waiting):
    """The overdue link's queue is exactly the tickets counted (the queue's own filter)."""
    with app.app_context(), time_machine.travel(NOW, tick=False):
        browser = sign_in(app, app.test_client(), acme, email=PMS[0])
        found = digest.digest_for(acme.company_id)
        page = browser.get("/" + found.overdue.url.split("/", 3)[3]).get_data(as_text=True)
    assert found.overdue.count == len(waiting["overdue"])
    for ticket in waiting["overdue"]:
        assert ticket.id in page
    assert f"of {len(waiting['overdue'])} ticket" in page


def test_the_written_link_lists_exactly_what_the_digest_counts(app, acme, waiting):
    """Tickets written over 30 days ago are listed by when they were written, not recorded."""
    with app.app_context(), time_machine.travel(NOW, tick=False):
        browser = sign_in(app, app.test_client(), acme, email=PMS[0])
        found = digest.digest_for(acme.company_id)
        page = browser.get("/" + found.unbilled.url.split("/", 3)[3]).get_data(as_text=True)
    assert found.unbilled.count == len(waiting["written"]) == 2
    listed = set(re.findall(r'<tr class="queue-row[^"]*" data-ticket="([^"]+)"', page))
    assert listed == {ticket.id for ticket in waiting["written"]}
    assert "of 2 tickets" in page
    assert "Written to Procore on or before" in page


def test_the_approve_link_opens_a_queue_where_they_can_be_approved(app, acme, waiting):
    with app.app_context(), time_machine.travel(NOW, tick=False):
        browser = sign_in(app, app.test_client(), acme, email=PMS[0])
        found = digest.digest_for(acme.company_id)
        page = browser.get("/" + found.review.url.split("/", 3)[3]).get_data(as_text=True)
    assert f"of {found.review.count} tickets" in page
    assert 'id="bulk-approve"' in page and 'name="ids"' in page


def test_nothing_is_sent_when_nothing_waits(app, acme, runner):
    seeded = seed_pile(app, acme, count=6, now=NOW)
    with app.app_context():  # all paid, in a daily log or written lately
        db.session.execute(update(Ticket).where(Ticket.id.in_([t.id for t in seeded[:2]]))
                           .values(status="written", on_change_order=True,
                                   change_orders_approved=True, approved_at=NOW))
        db.session.execute(update(Ticket).where(Ticket.id.in_([t.id for t in seeded[2:4]]))
                           .values(status="written", on_change_order=None, approved_at=NOW))
        db.session.execute(update(Ticket).where(Ticket.id.in_([t.id for t in seeded[4:]]))
                           .values(status="written", on_change_order=False,
                                   approved_at=NOW - dt.timedelta(days=29)))
        db.session.commit()
    add(app, acme, PMS[0])
    with smtp_server() as mailbox, time_machine.travel(NOW, tick=False):
        app.config.update(mailbox.settings())
        assert "0 digest(s) sent" in send(runner)
    assert mailbox.messages == []


def test_none_before_seven_on_the_companys_clock_then_once_that_morning(app, acme, runner,
                                                                       waiting, monkeypatch):
    reads = []
    read_projects = projects.remote_projects
    monkeypatch.setattr(projects, "remote_projects",
                        lambda *args, **kwargs: reads.append(args) or read_projects(*args, **kwargs))
    with smtp_server() as mailbox, time_machine.travel(SEVEN_PDT - dt.timedelta(minutes=1),
                                                       tick=False) as clock:
        app.config.update(mailbox.settings())
        assert "0 digest(s) sent" in send(runner)  # 06:59 in California, 13:59 UTC
        assert mailbox.messages == []
        clock.move_to(SEVEN_PDT)
        assert "2 digest(s) sent" in send(runner)
        asked = len(reads)
        for minutes in (15, 30, 300):  # the timer every 15 minutes, the rest of the day
            clock.move_to(SEVEN_PDT + dt.timedelta(minutes=minutes))
            assert "0 digest(s) sent" in send(runner)
        assert len(reads) == asked  # the day decided, Procore is not asked again
        stop_procore(app)  # the zone kept on the company keeps the mornings
        clock.move_to(SEVEN_PDT + dt.timedelta(days=1, minutes=-1))
        assert "0 digest(s) sent" in send(runner)  # the next day, 06:59 there
        clock.move_to(SEVEN_PDT + dt.timedelta(days=1))
        assert "2 digest(s) sent" in send(runner)
    assert sorted(m["To"] for m in mailbox.messages) == sorted(PMS * 2)
    with app.app_context():
        assert db.session.get(Company, acme.company_id).time_zone == "America/Los_Angeles"


def test_two_runs_at_once_send_each_digest_once(app, acme, waiting):
    with smtp_server() as mailbox:
        app.config.update(mailbox.settings())
        results: list[list[int]] = []

        def run() -> None:
            with app.app_context():
                results.append(digest.send_due(NOW))
        runs = [threading.Thread(target=run) for _ in range(2)]
        for thread in runs:
            thread.start()
        for thread in runs:
            thread.join(60)
        assert sorted(m["To"] for m in mailbox.messages) == sorted(PMS)
    assert sorted(sum(results, [])) == sorted(_ids(app, PMS))


def _ids(app, emails) -> list[int]:
    with app.app_context():
        return [db.session.scalar(db.select(Reviewer.id).where(Reviewer.email == email))
                for email in emails]


def test_a_digest_that_could_not_go_goes_at_the_next_run(app, acme, runner, waiting):
    with smtp_server() as mailbox, time_machine.travel(NOW, tick=False):
        app.config.update(mailbox.settings())
        app.config["MAIL_PORT"] = 1  # nothing listens there
        assert "0 digest(s) sent" in send(runner)
        app.config.update(mailbox.settings())
        assert "2 digest(s) sent" in send(runner)
    assert len(mailbox.messages) == 2


def test_nothing_is_sent_without_a_mail_server(app, acme, runner, waiting):
    with time_machine.travel(NOW, tick=False):
        assert "e-mail is not set up" in send(runner)
    with app.app_context():
        assert all(r.digest_sent_on is None for r in db.session.scalars(db.select(Reviewer)))


def test_the_stop_link_turns_it_off_with_one_button_and_no_sign_in(app, acme, runner, waiting):
    with smtp_server() as mailbox, time_machine.travel(NOW, tick=False) as clock:
        app.config.update(mailbox.settings())
        send(runner)
        message = next(m for m in mailbox.messages if m["To"] == PMS[0])
        url = re.search(r"(http://\S+/digest/stop/\S+)", message.get_content()).group(1)
        path = "/" + url.split("://", 1)[1].split("/", 1)[1]
        client = app.test_client()
        page = client.get(path)
        assert page.status_code == 200 and "Stop these e-mails" in page.get_data(as_text=True)
        assert not _reviewer(app, PMS[0]).digest_off  # opening the link changes nothing
        # the link is a credential and the page names the reviewer: kept by no cache, sent to
        # no other site, its refusal too
        forged = client.get(path[:-2] + "xx")
        assert forged.status_code == 404 and page.headers["Cache-Control"] == "no-store"
        assert page.headers["Referrer-Policy"] == forged.headers["Referrer-Policy"] == "no-referrer"
        assert client.post(path[:-2] + "xx", data={
            "csrf_token": csrf_token(page.get_data(as_text=True))}).status_code == 404
        done = client.post(path, data={"csrf_token": csrf_token(page.get_data(as_text=True))})
        assert done.status_code == 200 and "no more morning e-mails" in done.get_data(as_text=True)
        assert done.headers["Cache-Control"] == "no-store"
        assert _reviewer(app, PMS[0]).digest_off
        clock.move_to(NOW + dt.timedelta(days=1))
        assert "1 digest(s) sent" in send(runner)
    assert [m["To"] for m in mailbox.messages[2:]] == [PMS[1]]


def _reviewer(app, email: str) -> Reviewer:
    with app.app_context():
        db.session.expire_all()
        return db.session.scalar(db.select(Reviewer).where(Reviewer.email == email))


def test_a_reviewer_turns_it_off_and_on_from_the_morning_e_mail_page(app, acme, runner, waiting):
    with smtp_server() as mailbox, time_machine.travel(NOW, tick=False) as clock:
        browser = sign_in(app, app.test_client(), acme, email=PMS[1])
        queue = browser.get("/queue").get_data(as_text=True)  # the PM's own address leads there
        assert f'<a class="who" href="/digest" title="Your morning e-mail">{PMS[1]}</a>' in queue
        assert 'href="/digest"' in browser.get("/board").get_data(as_text=True)
        page = browser.get("/digest").get_data(as_text=True)
        assert "You get this e-mail" in page and "Morning e-mail" in page
        off = browser.post("/digest", data={"digest": "off"}).get_data(as_text=True)
        assert "no more morning e-mails" in off and _reviewer(app, PMS[1]).digest_off
        app.config.update(mailbox.settings())
        assert "1 digest(s) sent" in send(runner)
        assert browser.post("/digest", data={"digest": "on"}).status_code == 200
        assert not _reviewer(app, PMS[1]).digest_off
        clock.move_to(NOW + dt.timedelta(days=1))
        assert "2 digest(s) sent" in send(runner)
    assert [m["To"] for m in mailbox.messages] == [PMS[0], *PMS]


def test_the_page_says_when_on_which_clock_and_that_no_e_mail_goes_without_a_server(
        app, acme, waiting):
    with time_machine.travel(NOW, tick=False):
        browser = sign_in(app, app.test_client(), acme, email=PMS[0])
        with app.app_context():
            db.session.execute(update(Company).where(Company.id == acme.company_id)
                               .values(time_zone="America/Los_Angeles"))
            db.session.commit()
        app.config.pop("MAIL_SERVER", None)
        page = browser.get("/digest").get_data(as_text=True)
        assert "not set up to send e-mail" in page
        with smtp_server() as mailbox:
            app.config.update(mailbox.settings())
            page = browser.get("/digest").get_data(as_text=True)
    assert "not set up to send e-mail" not in page
    assert "At 7:00 PDT each morning" in page


@pytest.mark.browser
def test_the_morning_e_mail_pages_pass_axe(app, acme, live_server, axe_tablet):
    """The page a reviewer turns it off and on from, and the page a stop link opens, before and
    after its button, at tablet size: no violation at all."""
    page = axe_tablet.new_page()
    requests = a11y.OpenRequests(page)
    browser_sign_in(page, live_server, app, acme)
    with app.app_context():
        reviewer = db.session.scalar(db.select(Reviewer).where(Reviewer.company_id == acme.company_id))
        app.config["PUBLIC_BASE_URL"] = live_server.url
        stop = digest.stop_url(reviewer.id)
    found = {}
    page.goto(f"{live_server.url}/digest")
    a11y.settle(page, requests)
    found["digest"] = a11y.serious_violations(page, ALL_IMPACTS)
    page.click("text=Stop the morning e-mail")
    page.wait_for_selector("text=Send me the morning e-mail")
    found["digest, turned off"] = a11y.serious_violations(page, ALL_IMPACTS)
    page.click("text=Send me the morning e-mail")
    page.wait_for_selector("text=Stop the morning e-mail")
    assert not _reviewer(app, reviewer.email).digest_off
    page.context.clear_cookies()  # the stop link needs no sign-in
    page.goto(stop)
    a11y.settle(page, requests)
    found["stop"] = a11y.serious_violations(page, ALL_IMPACTS)
    page.click("text=Stop these e-mails")
    page.wait_for_selector("text=will get no more morning e-mails")
    found["stopped"] = a11y.serious_violations(page, ALL_IMPACTS)
    assert found == {name: [] for name in found}
    assert _reviewer(app, reviewer.email).digest_off
