"""Two pieces of a photo on their way at once, meeting a loaded server and a drop: the office
still keeping the first piece when the second arrives (sent round, 409), and the signal cut
while one piece is in the office and the other on the wire. The `hold` fixture holds the office
on the photo's second piece, so each overlap happens every time, with no load and no sleep; the
photo arrives whole within seconds, each byte range sent at most once more than needed."""
from __future__ import annotations

import re
import time

import pytest

from models import Ticket, db
from services.files import photo_uploads
from support.images import noise_jpeg
from support.network import photo_key
from tests.test_capture_browser import (
    create_link,
    fill_ticket,
    open_capture,
    sign,
    wait_for,
)
from tests.test_capture_overlap_browser import PhotoAnswers, queued_ticket
from tests.test_capture_signal_browser import through

pytestmark = pytest.mark.browser

UP_BYTES_S = 15_000  # one bar: a piece takes a second or more, long enough to cut it mid-way


class Gate:
    """photo_uploads.receive as the app calls it; the hold fixture holds this one's first call."""

    def __init__(self) -> None:
        self.receive = photo_uploads.receive


def hold_second_piece(hold, monkeypatch):
    """Hold the office on the first piece that does not start a photo (the second lane's first
    chance to overlap): its bytes have all come, its answer waits until released."""
    gate = Gate()
    original = photo_uploads.receive
    held = hold(gate, "receive")

    def receive(company_id, link_token, upload, raw, header):
        if header and not header.startswith("bytes 0-"):
            return gate.receive(company_id, link_token, upload, raw, header)
        return original(company_id, link_token, upload, raw, header)
    monkeypatch.setattr(photo_uploads, "receive", receive)
    return held


def one_big_photo(phone, page, signal) -> dict:
    """A ticket with one photo of several pieces, kept on the phone with no signal."""
    phone.set_offline(True)
    fill_ticket(page)
    # (grain that does not compress away: the phone keeps it at some 150 KB)
    page.set_input_files("#photo-gallery", files=[
        {"name": "site-1.jpg", "mimeType": "image/jpeg", "buffer": noise_jpeg(600, 450)}])
    page.wait_for_function("() => document.querySelectorAll('#photo-list img').length === 1",
                           timeout=60_000)
    page.click("button[type=submit]")
    page.wait_for_selector("#queue-status.saved")
    (photo,) = queued_ticket(page)["photos"]
    assert photo["size"] > 100_000, photo  # a first piece, then at least two lanes' worth
    signal.set_rates(UP_BYTES_S, None)
    return photo


def held_on_its_second_piece(client, acme, signal, phone, hold, monkeypatch):
    """A capture page through the signal with one big photo kept offline, the office set to hold
    the photo's second piece, then back online: the page, the photo, its answers and the hold,
    once the second piece is held."""
    page = open_capture(phone, through(signal, create_link(client, acme)))
    photo = one_big_photo(phone, page, signal)
    answers = PhotoAnswers(page)
    held = hold_second_piece(hold, monkeypatch)
    phone.set_offline(False)
    wait_for(page, held.entered.is_set, timeout_s=60)
    return page, photo, answers, held


def photo_bytes_sent(signal, key: str) -> int:
    """Body bytes of the photo's pieces that reached the office, a piece sent again counted again."""
    return sum(r.body_sent for r in signal.seen(lambda r: photo_key(r) == key))


def photo_on_the_ticket(app) -> int:
    """How many photos the one ticket holds."""
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        return ticket.photo_count


def test_a_piece_sent_round_while_the_other_lane_is_kept_goes_on_from_the_office(
        client, acme, app, signal, phone_without_worker, hold, monkeypatch):
    # The office keeps the second piece (slowly, on a loaded server) when the third comes: it
    # is sent round, and the phone waits for the second's answer rather than for a minute.
    page, photo, answers, held = held_on_its_second_piece(client, acme, signal, phone_without_worker,
                                                          hold, monkeypatch)
    wait_for(page, lambda: answers.sent_round(), timeout_s=60)
    assert answers.sent_round() == [("tickets", 409, "upload_offset_mismatch")], answers.seen
    started = time.monotonic()
    held.release()
    page.wait_for_selector("#queue-status.sent", timeout=20_000)
    assert time.monotonic() - started < 15
    assert photo_on_the_ticket(app) == 1
    # One piece went twice (the one sent round), nothing more.
    assert photo_bytes_sent(signal, photo["key"]) <= photo["size"] + 40_000, answers.seen


def test_a_cut_with_both_lanes_on_their_way_resumes_where_the_office_stands(
        client, acme, app, signal, phone_without_worker, hold, monkeypatch):
    page, photo, answers, held = held_on_its_second_piece(client, acme, signal, phone_without_worker,
                                                          hold, monkeypatch)

    def on_the_wire():
        return [r for r in signal.seen(lambda r: photo_key(r) == photo["key"])
                if r.range_first > 0 and 0 < r.body_sent < r.body_length]
    # The second piece is in the office, the third half on the wire: the signal drops.
    wait_for(page, on_the_wire, timeout_s=60)
    signal.cut()
    # The office keeps the second piece, its answer lost; the phone still thinks it lacks it.
    held.wait_until_done()
    started = time.monotonic()
    signal.restore()
    page.wait_for_selector("#queue-status.sent", timeout=20_000)
    # Within the signal's back-off and a few pieces, never the office's minute.
    assert time.monotonic() - started < 15
    assert photo_on_the_ticket(app) == 1
    # The phone asked where the office stands (a piece sent round names it) and went on from
    # there: the kept second piece was not sent again.
    assert ("tickets", 409, "upload_offset_mismatch") in answers.seen, answers.seen
    assert photo_bytes_sent(signal, photo["key"]) <= photo["size"] + 60_000, answers.seen


def hold_a_photos_last_piece(hold, monkeypatch):
    """Hold the office on the first piece that ends a photo without starting it: its bytes have
    all come, and the office makes the photo of them only once released."""
    gate = Gate()
    original = photo_uploads.receive
    held = hold(gate, "receive")

    def receive(company_id, link_token, upload, raw, header):
        piece = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", header or "")
        if piece and int(piece[1]) > 0 and int(piece[2]) + 1 == int(piece[3]):
            return gate.receive(company_id, link_token, upload, raw, header)
        return original(company_id, link_token, upload, raw, header)
    monkeypatch.setattr(photo_uploads, "receive", receive)
    return held


def kept_with_big_photos(phone, page, sizes: list[tuple[int, int]]) -> list[str]:
    """A signed ticket with photos of grain of these sizes (two pieces or more each), kept on
    the phone with no signal; the photos' keys in the phone's order."""
    phone.set_offline(True)
    fill_ticket(page)
    page.set_input_files("#photo-gallery", files=[
        {"name": f"site-{i + 1}.jpg", "mimeType": "image/jpeg", "buffer": noise_jpeg(*size, i)}
        for i, size in enumerate(sizes)])
    page.wait_for_function(f"() => document.querySelectorAll('#photo-list img').length === {len(sizes)}",
                           timeout=60_000)
    sign(page)
    page.click("button[type=submit]")
    page.wait_for_selector("#queue-status.saved")
    return [photo["key"] for photo in queued_ticket(page)["photos"]]


def test_the_next_photo_leaves_while_the_office_makes_the_one_before_and_keeps_their_order(
        client, acme, app, signal, phone_without_worker, hold, monkeypatch):
    phone = phone_without_worker
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    # (the second about 70 KB: a first piece and its last)
    first, second = kept_with_big_photos(phone, page, [(600, 450), (400, 300)])
    signal.set_rates(60_000, None)
    held = hold_a_photos_last_piece(hold, monkeypatch)
    phone.set_offline(False)
    wait_for(page, held.entered.is_set, timeout_s=60)
    # The first photo's last bytes are in the office, which has not made the photo yet: the
    # link does not wait for it, the second photo's first piece goes meanwhile.
    wait_for(page, lambda: signal.seen(lambda r: photo_key(r) == second and r.whole), timeout_s=30)
    # Its last piece (a second of this link) waits for the first photo to be made, so the
    # office keeps the photos in the phone's order.
    page.wait_for_timeout(2500)
    assert not signal.seen(lambda r: photo_key(r) == second and r.completes)
    held.release()
    page.wait_for_selector("#queue-status.sent", timeout=30_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        # The second photo's last piece waited for the first photo: the order is the phone's.
        assert [photo.client_key for photo in ticket.photos] == [first, second]


def test_the_signature_leaves_while_the_office_makes_the_last_photo(
        client, acme, app, signal, phone_without_worker, hold, monkeypatch):
    phone = phone_without_worker
    link = create_link(client, acme)
    page = open_capture(phone, through(signal, link))
    kept_with_big_photos(phone, page, [(600, 450)])
    signal.set_rates(60_000, None)
    held = hold_a_photos_last_piece(hold, monkeypatch)
    phone.set_offline(False)
    wait_for(page, held.entered.is_set, timeout_s=60)
    # (the signature's PUT, whole in the office, while the photo is still being made)
    wait_for(page, lambda: signal.seen(lambda r: r.method == "PUT" and r.whole
                                       and r.path.split("?")[0].endswith("/signature")), timeout_s=30)
    held.release()
    page.wait_for_selector("#queue-status.sent", timeout=30_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert ticket.photo_count == 1 and ticket.signature is not None
