"""A ticket's photos belong to that ticket only: whatever the order of photo uploads, the Send
tap, reloads and the service worker, nothing of a sent (or queued) ticket comes back in the next
form; a correction sends only the photos the office does not hold yet."""
from __future__ import annotations

import pytest

from models import Ticket, db
from support.network import photo_key, ticket_upload
from tests.test_capture_browser import (
    add_site_photos,
    create_link,
    fill_ticket,
    open_capture,
    wait_for,
    wait_for_script,
    wait_until_kept,
)
from tests.test_capture_signal_browser import KB, through

pytestmark = pytest.mark.browser


def tickets_by_description(app) -> dict[str, int]:
    """Each ticket's description and how many photos it holds."""
    with app.app_context():
        db.session.expire_all()
        return {t.description: t.photo_count for t in db.session.query(Ticket).all()}


def draft_photo_count(page) -> int:
    """Photos the phone keeps for the form being written."""
    return page.evaluate("""() => idbKeyval.get('draft-photos:' +
        document.getElementById('ticket-form').dataset.token).then(kept =>
        !kept ? 0 : Array.isArray(kept) ? kept.length : (kept.photos || []).length)""")


def second_ticket_without_photos(page) -> None:
    """The crew writes the next ticket with no photo and sends it."""
    fill_ticket(page)
    page.fill('textarea[name="description"]', "Second ticket, no photos")
    page.click("button[type=submit]")


def photo_going_up(signal) -> bool:
    """A photo is on its way and the server does not hold all of it yet."""
    photos = signal.photos()
    return any(0 < sent < total for sent, total in photos.values())


@pytest.mark.parametrize("then", ["open the link again", "record another", "reload"])
def test_send_while_a_photo_goes_up_leaves_nothing_for_the_next_ticket(
        client, acme, app, signal, phone, then):
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    fill_ticket(page)
    signal.set_rates(15 * KB, None)  # one bar: the photos go up slowly, ahead of the ticket
    add_site_photos(page, 2)
    wait_for(page, lambda: photo_going_up(signal))
    page.click("button[type=submit]")  # Send, a photo still on its way
    page.wait_for_selector("#done:not([hidden])", timeout=90_000)
    signal.set_rates(None, None)
    page.wait_for_timeout(500)  # whatever the page still had in hand settles
    if then == "open the link again":
        page.goto(through(signal, link))
        wait_for_script(page)
    elif then == "record another":
        page.click("#done [data-record-another]")
    else:
        page.reload()
        wait_for_script(page)
    page.wait_for_timeout(500)
    assert page.locator("#photo-list img").count() == 0
    assert draft_photo_count(page) == 0
    second_ticket_without_photos(page)
    page.wait_for_selector("#done:not([hidden])", timeout=30_000)
    assert tickets_by_description(app) == {
        "Cut and patched slab for the plumber's sleeve": 2, "Second ticket, no photos": 0}


def keep_the_draft_as_a_ticket(page, description: str) -> None:
    """The phone kept the ticket but the page went away before it emptied its draft (the
    battery, the camera, a swipe): the draft on the phone still names the kept ticket."""
    page.fill('input[name="captured_by"]', "Lee Park")  # the draft is kept as the crew types
    wait_for(page, lambda: page.evaluate(
        "() => idbKeyval.get('draft:' + document.getElementById('ticket-form').dataset.token)"))
    page.evaluate("""description => {
        const token = document.getElementById('ticket-form').dataset.token;
        return Promise.all([idbKeyval.get('draft:' + token), idbKeyval.get('draft-photos:' + token)])
          .then(([draft, photos]) => idbKeyval.set('ticket:' + draft.client_ref, {
            url: document.getElementById('ticket-form').dataset.submitUrl,
            payload: {client_ref: draft.client_ref, description: description,
                      reason: 'r', directed_by: 'd', labor: [], equipment: [], materials: [],
                      photos: (Array.isArray(photos) ? photos : photos.photos).map(p => ({
                        key: p.key, name: p.name, data_url: p.data_url, taken_at: p.taken_at}))},
            saved_at: new Date().toISOString(), token: token}));
    }""", description)


def test_a_reload_between_keeping_and_clearing_the_draft_brings_nothing_back(
        client, acme, app, signal, phone):
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    wait_until_kept(page)
    fill_ticket(page)
    add_site_photos(page, 2)
    wait_for(page, lambda: len(signal.photos()) == 2 and all(
        sent >= total for sent, total in signal.photos().values()))
    keep_the_draft_as_a_ticket(page, "Kept before the page went")
    page.reload()
    wait_for_script(page)
    page.wait_for_selector("#queue-status.sent", timeout=30_000)
    assert page.locator("#photo-list img").count() == 0
    assert page.input_value('textarea[name="description"]') == ""
    second_ticket_without_photos(page)
    page.wait_for_selector("#done:not([hidden])", timeout=30_000)
    assert tickets_by_description(app) == {
        "Kept before the page went": 2, "Second ticket, no photos": 0}


def test_send_offline_while_photos_are_held_then_the_worker_sends(client, acme, app, signal,
                                                                   phone):
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    wait_until_kept(page)
    page.reload()
    wait_for_script(page)
    fill_ticket(page)
    signal.set_rates(15 * KB, None)
    add_site_photos(page, 2)
    wait_for(page, lambda: photo_going_up(signal))
    signal.cut()
    phone.set_offline(True)
    page.click("button[type=submit]")
    page.wait_for_selector("#kept:not([hidden])")
    page.click("#kept [data-record-another]")
    page.wait_for_timeout(300)
    assert page.locator("#photo-list img").count() == 0
    signal.set_rates(None, None)
    signal.restore()
    phone.set_offline(False)
    page.wait_for_selector("#queue-status.sent", timeout=60_000)
    page.reload()
    wait_for_script(page)
    assert page.locator("#photo-list img").count() == 0
    second_ticket_without_photos(page)
    page.wait_for_selector("#done:not([hidden])", timeout=30_000)
    assert tickets_by_description(app) == {
        "Cut and patched slab for the plumber's sleeve": 2, "Second ticket, no photos": 0}


def tray_list_states(page) -> list[str]:
    """The states of the phone's tickets as the tray's list shows them."""
    return page.eval_on_selector_all("#phone-tickets li", "items => items.map(i => i.dataset.state)")


def test_a_correction_sends_only_the_photo_the_office_does_not_hold(client, acme, app, signal,
                                                                     phone):
    from tests.test_capture_browser import site_photo

    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    fill_ticket(page)
    add_site_photos(page, 3)
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=60_000)
    reference = page.inner_text("#done-reference")
    ticket_id = next(t["id"] for t in client.get("/v1/tickets", headers=acme.headers).json["data"])
    client.post(f"/v1/tickets/{ticket_id}/reject", headers=acme.headers,
                json={"reason": "Add a photo of the sleeve"})
    page.close()
    page = open_capture(phone, through(signal, link))
    item = page.locator(f"#my-tickets li[data-reference='{reference}']")
    item.locator("text=Correct and send again").wait_for()
    signal.set_rates(60 * KB, None)
    before = signal.body_bytes(ticket_upload)
    seen_before = len(signal.seen())
    item.locator("text=Correct and send again").click()
    page.wait_for_timeout(1500)  # nothing goes up for the photos the office holds
    assert signal.body_bytes(ticket_upload) == before
    page.set_input_files("#photo-gallery", files=[
        {"name": "sleeve.jpg", "mimeType": "image/jpeg", "buffer": site_photo(7)}])
    page.wait_for_function("() => document.querySelectorAll('#photo-list img').length === 4")
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=60_000)
    new_keys = {photo_key(r) for r in signal.seen()[seen_before:] if photo_key(r)}
    assert len(new_keys) == 1, new_keys
    (new_key,) = new_keys
    size = signal.photos()[new_key][1]
    uploaded = signal.body_bytes(ticket_upload) - before
    assert uploaded <= 1.1 * size, (uploaded, size)
    with app.app_context():
        ticket = db.session.get(Ticket, ticket_id)
        assert ticket.status == "submitted" and ticket.photo_count == 4
        assert [p.name for p in sorted(ticket.photos, key=lambda p: p.position)] == \
            ["site-1.jpg", "site-2.jpg", "site-3.jpg", "sleeve.jpg"]
    # The card, the tray and the tray's list all say it was sent, now and after a reload.
    assert page.inner_text("#done-reference") == reference
    assert page.inner_text("#queue-status").startswith(f"Sent {reference}")
    page.click("#tray-toggle")
    wait_for(page, lambda: tray_list_states(page) == ["sent"])
    page.reload()
    wait_for_script(page)
    page.locator(f"#my-tickets li[data-reference='{reference}']").wait_for()
    wait_for(page, lambda: "with the project manager" in page.inner_text("#my-tickets"))
    page.click("#tray-toggle")
    wait_for(page, lambda: tray_list_states(page) == ["sent"])
    assert page.inner_text("#queue-status").startswith(f"Sent {reference}")
