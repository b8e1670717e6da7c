"""The capture page on a phone's signal: a throttling proxy (support/network.py) between
Chromium and the app counts every byte of the page and its service worker, and cuts the signal
in the middle of things. Nothing the phone holds is lost, the tray says what is really
happening, sending resumes within seconds, and a cut costs only the piece on its way."""
from __future__ import annotations

import itertools
import re
import time
from urllib.parse import urlsplit

import pytest

from models import Ticket, db
from support.images import noise_jpeg
from support.network import photo_key, ticket_upload
from tests.test_capture_browser import (
    add_site_photos,
    create_link,
    fill_ticket,
    open_capture,
    sync_waker,
    wait_for,
    wait_for_script,
    wait_until_kept,
)

pytestmark = pytest.mark.browser

KB = 1000  # the signal's rates are in kilobits and kilobytes of 1,000


def through(signal, link: dict) -> str:
    """The link's address at the proxy: what the phone opens."""
    return signal.url + urlsplit(link["url"]).path


def photos_on_the_ticket(app) -> int:
    """How many photos the one ticket the phone sent holds."""
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        return ticket.photo_count


class Tray:
    """The tray's words sampled against the ticket's bytes the proxy delivered to the app (the
    page's and the service worker's alike), for as long as asked."""

    def __init__(self, page, signal) -> None:
        self.page, self.signal = page, signal
        self.samples: list[tuple[str, int]] = []

    def sample(self) -> str:
        words = self.page.inner_text("#queue-status")
        self.samples.append((words, self.signal.body_bytes(ticket_upload)))
        return words

    def until(self, check, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not check(self.sample()):
            assert time.monotonic() < deadline, self.samples[-5:]
            self.page.wait_for_timeout(25)

    def said_no_signal_while_bytes_moved(self) -> list[tuple[str, int, int]]:
        """Each time the tray said nothing goes ("Waiting for signal", "Trying again in") while
        the ticket's bytes reached the app."""
        still = ("Waiting for signal", "Trying again in")
        return [(words, before, after) for (words, before), (following, after)
                in itertools.pairwise(self.samples)
                if words.startswith(still) and following.startswith(still) and after > before]


def test_a_correction_with_two_new_photos_reaches_the_ticket_across_a_drop(
        client, acme, app, signal, phone):
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    fill_ticket(page)
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])")
    reference = page.inner_text("#done-reference")
    ticket_id = next(t["id"] for t in client.get("/v1/tickets", headers=acme.headers).json["data"])
    client.post(f"/v1/tickets/{ticket_id}/reject", headers=acme.headers,
                json={"reason": "Add photos of the sleeve"})
    page.close()
    page = open_capture(phone, through(signal, link))
    item = page.locator(f"#my-tickets li[data-reference='{reference}']")
    item.wait_for()
    # The tray no longer says "Sent" in green: the office sent it back, with the reason.
    page.wait_for_selector("#queue-status.refused")
    assert page.inner_text("#queue-status") == "Sent back: Add photos of the sleeve"
    item.locator("text=Correct and send again").click()
    signal.set_rates(20 * KB, None)  # one bar: the photos take a while
    add_site_photos(page, 2)
    # The first new photo goes ahead while the crew corrects; the signal drops with the second
    # on its way ...
    def second_going() -> bool:
        photos = list(signal.photos().values())
        return len(photos) == 2 and photos[0][0] >= photos[0][1] and photos[1][0] > 5 * KB
    wait_for(page, second_going)
    signal.cut()
    page.wait_for_timeout(1000)
    signal.restore()
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=60_000)
    # ... and when the phone says "Sent", the ticket holds both new photos.
    with app.app_context():
        ticket = db.session.get(Ticket, ticket_id)
        assert ticket.status == "submitted" and ticket.photos_expected == 2
        assert sorted(p.name for p in ticket.photos) == ["site-1.jpg", "site-2.jpg"]
    assert page.inner_text("#done-reference") == reference
    assert page.inner_text("#queue-status").startswith(f"Sent {reference}")


def test_the_tray_follows_the_service_worker_and_never_says_no_signal_while_it_sends(
        client, acme, app, signal, phone):
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    wait_until_kept(page)
    page.clock.install()
    page.reload()  # the worker controls the page from here on
    wait_for_script(page)
    fill_ticket(page)
    signal.cut()  # before the photos, so none of them can go ahead: the worker sends them
    add_site_photos(page, 2)
    page.click("button[type=submit]")
    page.wait_for_selector("#kept:not([hidden])")
    # (the worker may be trying too, as the browser wakes it: the tray says so until it fails)
    wait_for(page, lambda: page.inner_text("#queue-status").startswith("Trying again in"))
    # The page's own retries wait on its (stopped) clock: the worker is the one that sends.
    page.clock.pause_at(time.time() * 1000 + 1000)
    signal.set_rates(30 * KB, None)
    signal.restore()
    wake = sync_waker(phone.new_cdp_session(page), page, signal.url)
    tray = Tray(page, signal)
    tray.sample()
    wake()
    tray.until(lambda words: words.startswith("Sent T-"))
    assert not tray.said_no_signal_while_bytes_moved(), tray.samples
    shown = [words for words, _ in tray.samples]
    # Progress by the bytes the server acknowledged, photo by photo (those that went ahead
    # while the crew wrote are not sent again).
    assert any(re.match(r"\d of 2 photos, \d+%", words) for words in shown), shown
    # Sent: the "kept on this phone" card gives way to the sent one.
    assert page.locator("#kept").is_hidden() and page.locator("#done").is_visible()
    assert page.inner_text("#done-reference") == page.inner_text("#queue-status").split()[1]
    assert photos_on_the_ticket(app) == 2


def test_with_the_page_open_sending_starts_within_10_s_of_the_signal_returning(
        client, acme, app, signal, phone_without_worker):
    phone = phone_without_worker
    link = create_link(client, acme)
    page = phone.new_page()
    page.clock.install()
    page.goto(through(signal, link))
    wait_for_script(page)
    fill_ticket(page)
    add_site_photos(page, 1)
    wait_for(page, lambda: page.inner_text("#queue-status") == "Nothing waiting to send.")
    signal.cut()  # the phone does not know: no "offline", no "online" to come
    page.click("button[type=submit]")
    page.wait_for_selector("#kept:not([hidden])")
    tray = Tray(page, signal)
    assert tray.sample().startswith("Trying again in")
    for _ in range(4):  # a long outage: the page keeps trying, every few seconds
        page.clock.run_for(8_000)
        page.wait_for_timeout(200)
        tray.sample()
    signal.restore()
    before = signal.uploaded
    page.clock.run_for(10_000)  # no more than 10 s of the page's time with the signal back
    wait_for(page, lambda: signal.uploaded > before, timeout_s=10)
    tray.until(lambda words: words.startswith("Sent T-"))
    assert not tray.said_no_signal_while_bytes_moved(), tray.samples
    assert page.locator("#kept").is_hidden()
    assert photos_on_the_ticket(app) == 1


def test_a_cut_in_the_middle_of_a_photo_at_200_kbps_costs_at_most_5_percent(
        client, acme, app, signal, phone_without_worker):
    phone = phone_without_worker
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    signal.set_rates(200 * KB / 8, None)
    # Grainy photos that stay large once the phone re-encodes them (about 220 KB each): a
    # photo sent whole would lose half of one to the cut, five times what a piece may.
    page.set_input_files("#photo-gallery", files=[
        {"name": f"photo-{i + 1}.jpg", "mimeType": "image/jpeg", "buffer": noise_jpeg(700, 520, i)}
        for i in range(4)])
    fill_ticket(page)

    def halfway() -> bool:
        """A photo is half up, and its piece on the way is half through too."""
        going = signal.seen(lambda r: photo_key(r) is not None and not r.whole)
        photos = signal.photos()
        return any(0.4 < r.body_sent / max(r.body_length, 1) < 0.8
                   and 0.3 < photos[photo_key(r)][0] / photos[photo_key(r)][1] < 0.8
                   for r in going)
    wait_for(page, halfway, timeout_s=120)
    signal.cut()
    page.wait_for_timeout(1500)
    signal.restore()
    page.wait_for_function("() => document.querySelectorAll('#photo-list img').length === 4",
                           timeout=120_000)
    sizes = page.evaluate("() => idbKeyval.get('draft-photos:' + document.getElementById("
                          "'ticket-form').dataset.token).then(kept => kept.photos.map(p => p.size))")
    with page.expect_request(lambda r: r.method == "POST" and "/tickets" in r.url) as text:
        page.click("button[type=submit]")
    own = sum(sizes) + len(text.value.post_data_buffer)
    page.wait_for_selector("#done:not([hidden])", timeout=180_000)
    assert photos_on_the_ticket(app) == 4
    uploaded = signal.body_bytes(ticket_upload)
    assert uploaded <= 1.05 * own, (uploaded, own, sizes)
    # Each photo went up once, and the one cut a piece of it twice at most.
    assert sum(sent > total for sent, total in signal.photos().values()) == 1
    assert all(sent <= total + 48 * KB for sent, total in signal.photos().values())
