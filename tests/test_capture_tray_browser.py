"""The capture page's tray tells the truth in one line at the bottom that never covers the form:
what it says, sampled each second, is held against what the signal really did."""
from __future__ import annotations

import itertools
import re
import time

import pytest
from playwright.sync_api import expect

from support.capture_page import tray_said, watch_tray
from support.network import ticket_upload
from tests.test_capture_browser import (
    add_site_photos,
    create_link,
    fill_ticket,
    open_capture,
    queue_for_a_link_then_revoke_it,
    sign,
    site_photo,
    wait_for_script,
)
from tests.test_capture_signal_browser import KB, through
from tests.test_capture_truth_browser import LANDSCAPE, PORTRAIT, lines_of

pytestmark = pytest.mark.browser


class Seconds:
    """The tray's words each second, with the ticket's bytes the app had by then and whether
    the phone was offline (as the browser was told)."""

    def __init__(self, page, signal) -> None:
        self.page, self.signal = page, signal
        self.offline = False
        self.samples: list[tuple[str, int, bool]] = []

    def run(self, seconds: float, until=None) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.monotonic()
            words = self.page.inner_text("#queue-status")
            self.samples.append((words, self.signal.body_bytes(ticket_upload), self.offline))
            if until is not None and until(words):
                return
            self.page.wait_for_timeout(max(0, 1000 - 1000 * (time.monotonic() - started)))

    def sending_without_bytes(self) -> list:
        """Each second that said "Sending" while no byte of the ticket reached the app in the two
        seconds before. (The phone can tell a drop only once an answer is late: after the bytes
        on their way and the next piece's have had time to cross, 1.7 s at 30 KB/s.)"""
        return [(i, now) for i, (before, _, now) in enumerate(zip(self.samples, self.samples[1:],
                                                                    self.samples[2:], strict=False))
                if re.match(r"\d+ of \d+ photos", now[0]) and now[1] == before[1]]

    def waiting_for_signal_online(self) -> list:
        """Each second that said "Waiting for signal" with the phone online a second already."""
        return [(i, now) for i, (before, now) in enumerate(itertools.pairwise(self.samples))
                if now[0].startswith("Waiting for signal") and not now[2] and not before[2]]


def test_each_second_the_tray_says_what_the_signal_does(client, acme, app, signal, phone):
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    fill_ticket(page)
    signal.set_rates(30 * KB, None)
    page.set_input_files("#photo-gallery", files=[
        {"name": f"site-{i + 1}.jpg", "mimeType": "image/jpeg", "buffer": site_photo(i, 1800, 1350)}
        for i in range(4)])
    page.wait_for_function("() => document.querySelectorAll('#photo-list img').length === 4",
                           timeout=60_000)
    tray = Seconds(page, signal)
    page.click("button[type=submit]")
    tray.run(3)
    # The signal goes, the phone does not know: nothing answers.
    signal.cut()
    tray.run(6)
    said = [words for words, _, _ in tray.samples[-5:]]
    assert any(words.startswith("Trying again in ") for words in said), said
    signal.restore()
    tray.run(3)
    # The signal goes and the phone knows it.
    signal.cut()
    phone.set_offline(True)
    tray.offline = True
    tray.run(4)
    assert tray.samples[-1][0] == "Waiting for signal", tray.samples[-4:]
    signal.restore()
    phone.set_offline(False)
    tray.offline = False
    tray.run(120, until=lambda words: words.startswith("Sent T-"))
    assert tray.samples[-1][0].startswith("Sent T-"), tray.samples[-5:]
    shown = [words for words, _, _ in tray.samples]
    assert any(re.match(r"\d+ of 4 photos", words) for words in shown), shown
    assert not tray.sending_without_bytes(), tray.samples
    assert not tray.waiting_for_signal_online(), tray.samples
    assert all(lines_of(page, "#queue-status") == 1 for _ in [0])


# The page's clock when the form first shows `count` photos.
ALL_SHOWN = """(count) => new MutationObserver((_, observer) => {
  if (document.querySelectorAll('#photo-list img').length >= count) {
    window.allShown = performance.now();
    observer.disconnect();
  }
}).observe(document.getElementById('photo-list'), {childList: true, subtree: true})"""


def test_photos_are_shrunk_in_a_worker_while_the_first_goes_up_and_the_tray_says_so(
        client, acme, live_server, phone):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    page.wait_for_selector("#queue-status.idle")
    workers: list[str] = []
    page.on("worker", lambda worker: workers.append(worker.url))
    cdp = phone.new_cdp_session(page)
    cdp.send("Emulation.setCPUThrottlingRate", {"rate": 12})  # an older phone, busy
    watch_tray(page)
    page.evaluate(ALL_SHOWN, 3)
    page.set_input_files("#photo-gallery", files=[
        {"name": f"site-{i + 1}.jpg", "mimeType": "image/jpeg", "buffer": site_photo(i, 2400, 1800)}
        for i in range(3)])
    expect(page.locator("#photo-list img")).to_have_count(3, timeout=90_000)
    said = tray_said(page, before="window.allShown")  # (after it, the last may be up already)
    cdp.send("Emulation.setCPUThrottlingRate", {"rate": 1})
    assert "Preparing photo 1 of 3" in said and "Nothing waiting to send." not in said, said
    assert {words for words in said if words.startswith("Preparing")} <= {
        "Preparing photo 1 of 3", "Preparing photo 2 of 3", "Preparing photo 3 of 3"}
    # Off the page's thread, in the shrinking worker; the first photo went up before the last
    # was shrunk.
    assert any("/static/capture-shrink.js" in url for url in workers), workers
    first_up = page.evaluate("""() => Math.min(...performance.getEntriesByType('resource')
        .filter(entry => entry.name.includes('/photos/')).map(entry => entry.startTime))""")
    assert first_up < page.evaluate("window.allShown")


def test_a_revoked_link_says_so_in_the_tray(client, acme, live_server, phone):
    _, page = queue_for_a_link_then_revoke_it(client, acme, phone)
    page.wait_for_selector("#queue-status.refused", timeout=20_000)
    assert page.inner_text("#queue-status") == "This link was closed by the office"
    page.click("#tray-toggle")
    assert "Sent back" not in page.inner_text("#phone-tickets")
    assert "This link was closed by the office" in page.inner_text("#phone-tickets")


@pytest.mark.parametrize("viewport", [PORTRAIT, LANDSCAPE], ids=["portrait", "landscape"])
def test_the_tray_is_one_line_that_never_covers_the_form(client, acme, live_server, chromium,
                                                         viewport, tmp_path):
    link = create_link(client, acme)
    context = chromium.new_context(viewport=viewport, device_scale_factor=2, is_mobile=True,
                                   has_touch=True)
    try:
        page = context.new_page()
        page.goto(link["url"])
        wait_for_script(page)
        fill_ticket(page)
        add_site_photos(page, 2)
        context.set_offline(True)
        page.wait_for_timeout(300)
        # The longest words the tray says fit whole; longer ones keep to the one line.
        status = page.locator("#queue-status")
        for words in ("11 of 12 photos, 99%, 10 min left", "This link was closed by the office",
                      "11/12 fotos, 99 %, quedan 10 min", "La oficina cerró este enlace",
                      "11 of 12 photos, 99%, 1 min left", "11/12 fotos, 99 %, queda 1 min"):
            page.evaluate("(words) => document.getElementById('queue-status').textContent = words",
                          words)
            assert status.evaluate("box => box.scrollWidth <= box.clientWidth"), words
        page.evaluate("document.getElementById('queue-status').textContent = "
                      "'11 of 12 photos, 99%, 10 min left and a good deal more words than fit'")
        assert lines_of(page, "#queue-status") == 1
        tray = page.locator("#tray").bounding_box()
        # one line: a glove-sized button (48 px) and its margins, whatever the words
        assert tray["height"] <= 68, tray
        # At the very bottom of the page the signature pad and Send sit above the tray.
        sign(page)
        page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        page.wait_for_timeout(200)
        page.screenshot(path=str(tmp_path / f"tray-{viewport['width']}.png"))
        pad = page.locator("#signature-pad").bounding_box()
        send = page.locator("button[type=submit]").bounding_box()
        tray = page.locator("#tray").bounding_box()
        assert pad["y"] + pad["height"] <= tray["y"], (pad, tray)
        assert send["y"] + send["height"] <= tray["y"], (send, tray)
        # Scrolled so the pad's bottom edge shows, the tray is below it, not over it.
        page.locator("#signature-pad").scroll_into_view_if_needed()
        page.evaluate("document.getElementById('queue-status').textContent = 'Waiting for signal'")
        page.screenshot(path=str(tmp_path / f"pad-{viewport['width']}.png"))
        pad = page.locator("#signature-pad").bounding_box()
        tray = page.locator("#tray").bounding_box()
        assert pad["y"] + pad["height"] <= tray["y"] + 1, (pad, tray)
    finally:
        context.close()


def test_the_kept_card_says_no_signal_only_when_the_phone_is_offline(client, acme, app, signal,
                                                                    phone):
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link) + "?lang=es")
    page.wait_for_selector("#queue-status.idle")
    fill_ticket(page)
    signal.cut()  # the phone has signal as far as it knows; nothing answers
    page.click("button[type=submit]")
    page.wait_for_selector("#kept:not([hidden])", timeout=30_000)
    said = page.inner_text("#kept")
    assert "Todavía no hubo respuesta" in said and "No hay señal" not in said, said
    page.click("#kept [data-record-another]")
    fill_ticket(page)
    phone.set_offline(True)
    page.click("button[type=submit]")
    page.wait_for_selector("#kept:not([hidden])", timeout=30_000)
    said = page.inner_text("#kept")
    assert "No hay señal" in said and "Todavía no hubo respuesta" not in said, said


def test_the_tray_says_how_far_the_photos_are_and_the_time_left(client, acme, app, signal, phone):
    from models import Ticket, db
    from support.network import photo_key

    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    fill_ticket(page)
    signal.set_rates(15 * KB, None)
    watch_tray(page)
    page.set_input_files("#photo-gallery", files=[
        {"name": f"site-{i + 1}.jpg", "mimeType": "image/jpeg", "buffer": site_photo(i, 1800, 1350)}
        for i in range(4)])
    # Photos go ahead as they are shrunk; halfway through the second, the signal goes.
    status = page.locator("#queue-status")
    expect(status).to_have_text(re.compile(r"^1 of 4 photos"), timeout=60_000)
    signal.cut()
    page.wait_for_timeout(3000)
    signal.restore()
    expect(status).to_have_text("Nothing waiting to send.", timeout=120_000)
    shown = tray_said(page)
    overall = [words for words in shown if re.match(r"\d of 4 photos", words)]
    pattern = r"(\d) of 4 photos, (\d+)%(, \d+ min left)?"
    assert overall and all(re.fullmatch(pattern, words) for words in overall), shown
    # Overall progress by what the office acknowledged never goes back, even across the cut;
    # the time left is said once the signal is measured, until all is there.
    said = [(int(m[1]), int(m[2])) for m in (re.fullmatch(pattern, w) for w in overall)]
    assert said == sorted(said), said
    assert any("left" in words for words in overall), overall
    assert said[-1][0] >= 3, overall  # (the tray moves on to "Nothing waiting" once all is there)
    # Each photo arrived whole after the cut: the ticket sent now holds all four.
    assert len({photo_key(r) for r in signal.seen(lambda r: r.completes and photo_key(r))}) == 4
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=60_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert ticket.photo_count == 4


def test_on_a_slow_signal_the_tray_keeps_the_photos_progress_between_answers(client, acme, app,
                                                                              signal, phone):
    # At 64 kbps a piece takes two seconds and the office answers each once it is whole: between
    # two answers the photos are still going up, and the tray says how far they are.
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    fill_ticket(page)
    signal.set_rates(8 * KB, None)
    page.set_input_files("#photo-gallery", files=[
        {"name": f"site-{i + 1}.jpg", "mimeType": "image/jpeg", "buffer": site_photo(i, 3000, 2250)}
        for i in range(3)])
    tray = Seconds(page, signal)
    tray.run(60, until=lambda words: re.match(r"\d of 3 photos, \d+%, ", words) is not None)
    tray.samples.clear()  # from the first answer that measured the signal
    tray.run(60, until=lambda words: words == "Nothing waiting to send.")
    said = [words for words, _, _ in tray.samples[:-1]]
    assert len(said) >= 10, tray.samples  # (the photos take some 18 s at 8 KB/s)
    progress = [words for words in said if re.match(r"\d of 3 photos, \d+%", words)]
    # Progress in 12 of 13 seconds on a quiet machine, 12 of 18 on a loaded one (the office
    # answers a photo's last piece once it has made the photo); it was 4 of 13 when "Waiting
    # for an answer" came a second after each answer.
    assert len(progress) >= 0.5 * len(said), said
    assert not tray.sending_without_bytes(), tray.samples
