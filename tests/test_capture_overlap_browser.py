"""Two uploads of the same photo overlapping in the server, as a loaded server lets them: a
reload while the office still keeps a draft's photo, an answer lost while the office makes the
photo of its last piece. The `hold` fixture holds that step of the first request until the
phone's second one is answered, so the overlap happens every time, with no load and no sleep.
The phone is answered with the photo and says "Sent" at once; a piece the office sends round is
tried again within seconds; a photo the office can never take is named in the tray, with why."""
from __future__ import annotations

import threading

import pytest

from models import StagedPhoto, Ticket, db
from services.capture import evidence
from support.images import noise_jpeg
from tests.test_capture_browser import (
    add_site_photos,
    create_link,
    fill_ticket,
    open_capture,
    wait_for,
    wait_for_script,
    wait_until_kept,
)
from tests.test_capture_ownership_browser import keep_the_draft_as_a_ticket, tickets_by_description
from tests.test_capture_signal_browser import through
from tests.test_photo_pieces import pieces, put_piece

pytestmark = pytest.mark.browser


class PhotoAnswers:
    """Each answer the phone gets to a photo's upload: its path ('drafts' or 'tickets'), status
    and error code, printed as it comes (the test's output names every 409's code)."""

    def __init__(self, page) -> None:
        self.seen: list[tuple[str, int, str | None]] = []
        page.on("response", self._add)

    def _add(self, response) -> None:
        if "/photos/" not in response.url or response.request.method != "PUT":
            return
        code = None
        if response.status >= 400:
            try:
                code = (response.json().get("error") or {}).get("code")
            except Exception:  # noqa: BLE001 - a body that is not JSON has no code
                code = None
        path = "drafts" if "/drafts/" in response.url else "tickets"
        self.seen.append((path, response.status, code))
        print(f"photo PUT on the {path} path answered {response.status} {code or ''}")

    def sent_round(self) -> list[tuple[str, int, str | None]]:
        """The answers that were 409s."""
        return [answer for answer in self.seen if answer[1] == 409]


def tray_says_sent(page) -> bool:
    return "sent" in (page.get_attribute("#queue-status", "class") or "").split()


def queued_ticket(page) -> dict:
    """The one ticket kept on the phone: its reference and its photos' keys and sizes."""
    return page.evaluate("""() => idbKeyval.keys().then(keys => idbKeyval.get(
        keys.find(key => String(key).startsWith('ticket:')))).then(entry => ({
          ref: entry.payload.client_ref,
          photos: entry.payload.photos.map(p => ({key: p.key,
            size: atob(p.data_url.split(',')[1]).length}))}))""")


def kept_offline(phone, page, photos: int) -> None:
    """The crew writes a ticket with photos and presses Send with no signal: it is kept."""
    phone.set_offline(True)
    fill_ticket(page)
    add_site_photos(page, photos)
    page.click("button[type=submit]")
    page.wait_for_selector("#queue-status.saved")


def test_a_reload_while_the_office_still_keeps_a_drafts_photo_sends_at_once(
        client, acme, app, signal, phone, hold):
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    wait_until_kept(page)
    # The office has every byte of the photo sent ahead and is still keeping it (slowly, on a
    # loaded server) when the page reloads and sends the ticket it kept.
    held = hold(evidence, "stage_photo")
    fill_ticket(page)
    add_site_photos(page, 1)
    wait_for(page, held.entered.is_set)
    keep_the_draft_as_a_ticket(page, "Kept while its photo was kept")
    answers = PhotoAnswers(page)
    page.reload()
    wait_for_script(page)
    # The draft's request is held until the ticket's own upload of the photo was answered.
    wait_for(page, lambda: any(path == "tickets" for path, _, _ in answers.seen)
             or tray_says_sent(page), timeout_s=30)
    held.release()
    page.wait_for_selector("#queue-status.sent", timeout=20_000)
    assert answers.sent_round() == [], answers.seen
    held.wait_until_done()
    assert tickets_by_description(app) == {"Kept while its photo was kept": 1}

    def staged() -> int:
        with app.app_context():
            return db.session.query(StagedPhoto).count()
    # The held request kept the photo as staged, then (its own last step) finds the ticket
    # written and moves it there: nothing is left staged once that request has ended.
    wait_for(page, lambda: staged() == 0, timeout_s=10)


def test_a_lost_answer_while_the_office_makes_the_photo_sends_at_once(
        client, acme, app, signal, phone_without_worker, hold):
    phone = phone_without_worker
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    kept_offline(phone, page, 2)
    answers = PhotoAnswers(page)
    # The first photo's last piece came and the office is making the photo of it when the
    # signal drops: the piece was kept, its answer is lost.
    held = hold(evidence, "put_photo")
    phone.set_offline(False)
    wait_for(page, held.entered.is_set, timeout_s=30)
    signal.cut()
    signal.restore()
    wait_for(page, lambda: answers.sent_round() or tray_says_sent(page), timeout_s=30)
    held.release()
    page.wait_for_selector("#queue-status.sent", timeout=20_000)
    assert answers.sent_round() == [], answers.seen
    held.wait_until_done()
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert ticket.photo_count == 2
        assert len({p.client_key for p in ticket.photos}) == 2


def test_a_piece_the_office_sends_round_is_tried_again_within_seconds(
        client, acme, app, signal, phone_without_worker, hold):
    phone = phone_without_worker
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    kept_offline(phone, page, 1)
    kept = queued_ticket(page)
    (photo,) = kept["photos"]
    # Other bytes under the photo's key are whole in the office and being kept: the phone's
    # piece is sent round (409) until they are refused, then its photo goes from byte 0.
    other = noise_jpeg(600, 600, seed=3)[:photo["size"]]
    assert len(other) == photo["size"]
    url = f"/c/{link['token']}/drafts/{kept['ref']}/photos/{photo['key']}"
    parts = pieces(other)
    for part in parts[:-1]:
        assert put_piece(client, url, part).status_code == 202
    held = hold(evidence, "stage_photo")
    last = threading.Thread(target=lambda: put_piece(app.test_client(), url, parts[-1]))
    last.start()
    assert held.entered.wait(30)
    answers = PhotoAnswers(page)
    phone.set_offline(False)
    wait_for(page, lambda: answers.sent_round() or tray_says_sent(page), timeout_s=30)
    assert answers.sent_round()[0] == ("tickets", 409, "upload_offset_mismatch"), answers.seen
    held.wait_until_done()
    last.join(30)
    # The next try comes within the signal's back-off (2 s), not after the office's minute.
    page.wait_for_selector("#queue-status.sent", timeout=15_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert [p.client_key for p in ticket.photos] == [photo["key"]]


def test_a_photo_the_office_can_never_take_is_named_in_the_tray_with_why(
        client, acme, app, signal, phone_without_worker, hold):
    phone = phone_without_worker
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    kept_offline(phone, page, 1)
    # The project manager approves the ticket while its photo is still being made.
    held = hold(evidence, "put_photo")
    phone.set_offline(False)
    wait_for(page, held.entered.is_set, timeout_s=30)
    (ticket,) = client.get("/v1/tickets", headers=acme.headers).json["data"]
    assert client.post(f"/v1/tickets/{ticket['id']}/approve", headers=acme.headers,
                       json={}).status_code == 200
    held.release()
    page.wait_for_selector("#queue-status.sent", timeout=20_000)
    said = page.inner_text("#queue-status")
    assert "1 photo could not be used. Sent back: site-1.jpg (the ticket was already accepted)." \
        in said, said
    # The tray's list says it too, after a reload.
    page.reload()
    wait_for_script(page)
    page.click("#tray-toggle")
    item = page.locator("#phone-tickets li").first
    item.wait_for()
    assert "Sent back: site-1.jpg (the ticket was already accepted)." in item.inner_text()
