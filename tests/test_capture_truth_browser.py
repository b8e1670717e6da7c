"""The capture page tells the crew the truth on a real phone screen: every form of a link opens
with no signal, only actions that can work are offered, counts read as words, short status
lines stay one line, and the signature pad keeps every stroke with the phone on its side."""
from __future__ import annotations

import itertools

import pytest

from models import Ticket, db
from tests.test_capture_browser import (
    KEPT_ADDRESSES,
    create_link,
    fill_ticket,
    open_capture,
    submit_offline,
    wait_for,
    wait_for_script,
    wait_until_kept,
)

pytestmark = pytest.mark.browser

VIA = {"plain": "link", "qr": "qr", "sms": "sms"}
PORTRAIT = {"width": 390, "height": 844}
LANDSCAPE = {"width": 844, "height": 390}


def test_any_form_of_a_link_opens_offline_once_another_was_opened(client, acme, live_server,
                                                                  phone, app):
    page = phone.new_page()
    pairs = list(itertools.permutations(VIA, 2))
    assert len(pairs) == 6
    for opened, later in pairs:
        link = create_link(client, acme)
        page.goto(link["urls"][opened])
        wait_for_script(page)
        wait_until_kept(page)
        phone.set_offline(True)
        # In the trench the crew taps the text message after scanning the poster (or so on).
        page.goto(link["urls"][later])
        wait_for_script(page)
        assert acme.project()["name"] in page.inner_text("h1"), (opened, later)
        assert page.evaluate("location.href") == link["urls"][later]
        form = page.locator("#ticket-form")
        assert form.get_attribute("data-via") == VIA[later], (opened, later)
        assert form.get_attribute("data-submit-url").endswith(f"/tickets?via={VIA[later]}")
        phone.set_offline(False)
    # The last one sends a ticket kept with no signal: it says which form the crew opened.
    fill_ticket(page)
    submit_offline(phone, page)
    phone.set_offline(False)
    page.wait_for_selector("#queue-status.sent", timeout=20_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert ticket.captured_via == VIA[pairs[-1][1]]


def test_a_sent_back_ticket_offers_no_signing_link(client, acme, live_server, phone):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    fill_ticket(page)
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])")
    reference = page.inner_text("#done-reference")
    item = page.locator(f"#my-tickets li[data-reference='{reference}']")
    item.wait_for()
    # With the project manager and unsigned: it can be sent to be signed.
    assert item.locator(".ask-signature").inner_text() == "Send it to be signed"
    ticket = client.get("/v1/tickets", headers=acme.headers).json["data"][0]
    client.post(f"/v1/tickets/{ticket['id']}/reject", headers=acme.headers,
                json={"reason": "Hours do not match the daily report"})
    page = open_capture(phone, link["url"])
    item = page.locator(f"#my-tickets li[data-reference='{reference}']")
    item.locator("text=Correct and send again").wait_for()
    # Sent back, it cannot be signed until it is corrected: nothing offers it.
    assert item.locator(".ask-signature").count() == 0


def lines_of(page, selector: str) -> int:
    """How many lines the text of an element takes on screen."""
    return page.evaluate("""(selector) => {
        const range = document.createRange();
        range.selectNodeContents(document.querySelector(selector));
        const tops = new Set([...range.getClientRects()].map(rect => Math.round(rect.top)));
        return tops.size;
    }""", selector)


def share_of_screen(page, selector: str) -> float:
    """The part of the screen's height an element takes."""
    return page.locator(selector).bounding_box()["height"] / page.viewport_size["height"]


def test_counts_read_as_words_in_spanish_and_status_lines_stay_short(client, acme, live_server,
                                                                     chromium):
    link = create_link(client, acme)
    context = chromium.new_context(viewport={"width": 360, "height": 740}, device_scale_factor=2,
                                   is_mobile=True, has_touch=True, locale="es-MX")
    try:
        page = context.new_page()
        page.goto(link["url"])
        wait_for_script(page)
        page.wait_for_selector("#queue-status.idle")
        assert page.inner_text("#queue-status") == "Nada pendiente de enviar."
        assert lines_of(page, "#queue-status") == 1
        context.set_offline(True)
        said = []
        for description in ("Se cortó la losa", "Se movió la zanja"):
            page.fill('textarea[name="description"]', description)
            page.fill('textarea[name="reason"]', "Faltó la camisa del plomero")
            page.fill('input[name="directed_by"]', "Sam Ortiz")
            page.click("button[type=submit]")
            page.wait_for_selector("#kept:not([hidden])")
            page.wait_for_selector("#queue-status.saved")
            said.append((page.inner_text("#queue-status"), page.inner_text("#tray-toggle")))
            page.click("#kept [data-record-another]")
        # With no signal the tray says so in one line; how many wait is on the list's button.
        assert said == [("Esperando señal", "1"), ("Esperando señal", "2")]
        assert lines_of(page, "#queue-status") == 1
        # The tray keeps to a small part of the screen, upright or turned sideways.
        assert share_of_screen(page, "#tray") < 0.25
        page.set_viewport_size(LANDSCAPE)
        assert share_of_screen(page, "#tray") < 0.25
    finally:
        context.close()


def ink(page, band: float = 0.0) -> dict:
    """The signature pad's inked device pixels (those in its lowest `band` part of the height
    when given) and the lowest inked row, in CSS pixels from the pad's top."""
    return page.evaluate("""(band) => {
        const canvas = document.getElementById('signature-pad');
        const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        const from = Math.floor(canvas.height * (1 - band));
        let inked = 0, lowest = -1;
        for (let i = 3; i < data.length; i += 4) {
            if (data[i] === 0) continue;
            const row = Math.floor((i - 3) / 4 / canvas.width);
            lowest = Math.max(lowest, row);
            if (!band || row >= from) inked++;
        }
        return {inked, lowest: lowest / (canvas.height / canvas.offsetHeight),
                height: canvas.offsetHeight};
    }""", band)


DRAFT_STROKES = """async () => {
    const draft = await idbKeyval.get('draft:' + document.getElementById('ticket-form').dataset.token);
    return draft && draft.values.captured_by === 'Lee Park' ? draft.signature.strokes : null;
}"""


def stroke_along_the_bottom(page) -> None:
    """Draw a line 6 CSS pixels above the pad's bottom edge, across most of its width."""
    box = page.locator("#signature-pad").bounding_box()
    y = box["y"] + box["height"] - 6
    assert page.evaluate("([x, y]) => document.elementFromPoint(x, y).id",
                         [box["x"] + box["width"] / 2, y]) == "signature-pad"
    page.mouse.move(box["x"] + 15, y)
    page.mouse.down()
    for step in range(1, 15):
        page.mouse.move(box["x"] + 15 + step * (box["width"] - 30) / 14, y)
    page.mouse.up()


def test_the_signature_pad_keeps_every_stroke_with_the_phone_on_its_side(client, acme,
                                                                           live_server, chromium):
    link = create_link(client, acme)
    context = chromium.new_context(viewport=PORTRAIT, device_scale_factor=3, is_mobile=True,
                                   has_touch=True)
    try:
        page = context.new_page()
        page.goto(link["url"])
        wait_for_script(page)
        page.locator("#signature-pad").scroll_into_view_if_needed()
        stroke_along_the_bottom(page)
        drawn = ink(page)
        assert drawn["inked"] > 100 and drawn["lowest"] > drawn["height"] - 12
        # Turned sideways the pad gets wider and no taller: the line stays whole on it.
        width = page.evaluate("document.getElementById('signature-pad').width")
        page.set_viewport_size(LANDSCAPE)
        page.wait_for_function(f"() => document.getElementById('signature-pad').width > {width}")
        turned = ink(page)
        assert turned["inked"] > 0.8 * drawn["inked"]
        assert turned["height"] - 12 < turned["lowest"] < turned["height"]
        # With the undo bar in the tray too, the whole pad fits above the tray ...
        page.click("#signature-clear")
        page.wait_for_selector("#undo-bar:not([hidden])")
        page.evaluate("""() => {
            const pad = document.getElementById('signature-pad').getBoundingClientRect();
            window.scrollBy(0, pad.bottom - document.getElementById('tray').getBoundingClientRect().top);
        }""")
        pad = page.locator("#signature-pad").bounding_box()
        tray = page.locator("#tray").bounding_box()
        assert pad["y"] >= 0 and pad["y"] + pad["height"] <= tray["y"] + 1
        # ... and a line along its bottom edge is drawn and kept, turned back upright too (the
        # whole line, made smaller to fit the narrower pad).
        stroke_along_the_bottom(page)
        bottom = ink(page, band=0.1)
        assert bottom["inked"] > 100 and bottom["lowest"] > bottom["height"] - 12
        page.set_viewport_size(PORTRAIT)
        page.wait_for_function(f"() => document.getElementById('signature-pad').width === {width}")
        assert ink(page)["inked"] > 0.3 * bottom["inked"]
        page.fill('input[name="captured_by"]', "Lee Park")  # the draft is kept as the crew types
        wait_for(page, lambda: page.evaluate(DRAFT_STROKES) is not None)
        points = [point for stroke in page.evaluate(DRAFT_STROKES) for point in stroke["points"]]
        size = page.evaluate("[document.getElementById('signature-pad').offsetWidth,"
                             " document.getElementById('signature-pad').offsetHeight]")
        assert all(0 <= p["x"] <= size[0] and 0 <= p["y"] <= size[1] for p in points)
        assert max(p["x"] for p in points) > 0.8 * size[0]
    finally:
        context.close()


def test_a_links_language_is_kept_with_no_signal(client, acme, live_server, phone):
    link = create_link(client, acme)
    page = phone.new_page()
    page.goto(link["url"] + "?lang=en")  # the crew opens it in English first
    wait_for_script(page)
    wait_until_kept(page)
    path = page.evaluate("location.pathname")
    # The other language is kept with it, so a Spanish link opens in Spanish with no signal.
    wait_for(page, lambda: path + "?lang=es" in page.evaluate(KEPT_ADDRESSES))
    phone.set_offline(True)
    page.goto(link["url"] + "?lang=es")
    wait_for_script(page)
    assert page.evaluate("document.documentElement.lang") == "es"
    assert page.inner_text("button[type=submit]") == "Enviar boleta"
    # The crew's pages were last in Spanish: the plain link opens in Spanish too.
    page.goto(link["url"])
    wait_for_script(page)
    assert page.evaluate("document.documentElement.lang") == "es"
    page.goto(link["url"] + "?lang=en")
    wait_for_script(page)
    assert page.evaluate("document.documentElement.lang") == "en"
    phone.set_offline(False)
