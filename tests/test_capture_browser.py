"""The capture page in a real headless Chromium on a phone-sized screen."""
from __future__ import annotations

import io
import json
import re
import shutil
import time
from pathlib import Path

import pytest
from flask import url_for
from PIL import Image
from playwright.sync_api import expect

from models import Ticket, db
from support.capture_page import fill_ticket, sign
from support.images import camera_jpeg

pytestmark = pytest.mark.browser


def wait_for_script(page) -> None:
    """Wait until the capture script has started (it marks the page with the `js` class)."""
    page.wait_for_function("() => document.documentElement.classList.contains('js')")


def open_capture(phone, url: str):
    """A new tab on the phone with the capture page at url open and its script started."""
    page = phone.new_page()
    page.goto(url)
    wait_for_script(page)
    return page


def create_link(client, tenant) -> dict:
    return client.post("/v1/links", headers=tenant.headers,
                       json={"project_id": tenant.project()["id"], "label": "Gate 3"}).json


def queued_keys(page) -> list[str]:
    """Tickets still waiting on the phone or sent back to it."""
    return [key for key in page.evaluate("idbKeyval.keys()")
            if key.startswith(("ticket:", "refused:"))]


def submit_offline(phone, page) -> None:
    """Lose the signal, press Send, and wait until the page says the ticket is kept."""
    phone.set_offline(True)
    page.click("button[type=submit]")
    page.wait_for_selector("#queue-status.saved")


def add_labor_row(page, trade: str, hours: str, rate: str) -> None:
    """Add a second labor line with the + button and fill it."""
    page.click('button.add-row[data-kind="labor"]')
    page.wait_for_selector("#labor-rows > .row:nth-child(2)")
    second = page.locator("#labor-rows > .row").nth(1)
    second.locator('input[name$=".trade"]').fill(trade)
    second.locator('input[name$=".hours"]').fill(hours)
    second.locator('input[name$=".rate"]').fill(rate)


def test_add_line_copies_a_row_on_the_phone_with_no_network(client, acme, live_server, phone):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    page.fill('input[name="labor[0].trade"]', "Concrete finisher")
    page.select_option('select[name="labor[0].hour_type"]', "ot")
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    # One bar or none: a line is added at once, without asking the server for anything.
    phone.set_offline(True)
    for kind in ("labor", "equipment", "materials"):
        page.click(f'button.add-row[data-kind="{kind}"]')
        assert page.locator(f"#{kind}-rows > .row").count() == 2
        # the crew types straight into the new line
        assert page.evaluate(f"document.activeElement.closest('#{kind}-rows > .row:nth-child(2)') !== null")
    assert asked == []
    first, second = page.locator("#labor-rows > .row").nth(0), page.locator("#labor-rows > .row").nth(1)
    trade = second.locator('input[name$=".trade"]')
    assert trade.input_value() == "" and trade.get_attribute("name") != "labor[0].trade"
    assert second.locator("select").input_value() == "st"  # a new line starts on straight time
    assert first.locator('input[name$=".trade"]').input_value() == "Concrete finisher"
    names = page.eval_on_selector_all("#ticket-form [name]", "els => els.map(e => e.name)")
    assert len([n for n in names if n.startswith(("labor[", "equipment[", "materials["))]) == \
        len({n for n in names if n.startswith(("labor[", "equipment[", "materials["))})


def test_rows_rebuilt_after_the_server_sent_the_form_back_start_clean(client, acme, live_server,
                                                                      phone):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    page.fill('input[name="labor[0].trade"]', "Finisher")
    page.fill('input[name="labor[0].hours"]', "2000")
    page.select_option('select[name="labor[0].hour_type"]', "ot")
    # The plain form (as a phone without the script sends it) comes back with its errors.
    with page.expect_navigation():
        page.evaluate("HTMLFormElement.prototype.submit.call(document.getElementById('ticket-form'))")
    wait_for_script(page)
    first = page.locator("#labor-rows > .row").first
    assert first.locator(".error").first.inner_text() or first.locator(".has-error").count()
    fill_ticket(page)
    page.fill('input[name="labor[0].hours"]', "3")
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=20_000)
    page.click("#done [data-record-another]")
    # The next ticket's rows carry none of the sent-back form's values, marks or choices.
    rows = page.locator("#labor-rows > .row")
    assert rows.count() == 1
    assert page.eval_on_selector_all("#ticket-form .rows .error", "es => es.map(e => e.textContent)") \
        == [""] * page.locator("#ticket-form .rows .error").count()
    assert page.locator("#ticket-form .rows .has-error").count() == 0
    assert rows.first.locator("select").input_value() == "st"
    assert rows.first.locator('input[name$=".hours"]').input_value() == ""
    # An empty line the crew added comes back after a reload on straight time, not blank.
    page.click('button.add-row[data-kind="labor"]')
    page.fill('textarea[name="description"]', "Kept while typing")
    wait_for(page, lambda: len((page.evaluate(
        "idbKeyval.get('draft:' + document.getElementById('ticket-form').dataset.token)") or {})
        .get("rows", {}).get("labor", [])) == 2)
    page.reload()
    wait_for_script(page)
    page.wait_for_function("() => document.querySelectorAll('#labor-rows > .row').length === 2")
    assert [page.locator("#labor-rows > .row").nth(i).locator("select").input_value()
            for i in range(2)] == ["st", "st"]


def test_a_phone_browser_without_blob_array_buffer_keeps_its_photos(client, acme, live_server,
                                                                    chromium):
    # Safari before 14 (an iPhone 6 on iOS 12) and Chrome before 76 read files the older way.
    context = chromium.new_context(viewport={"width": 360, "height": 740}, is_mobile=True,
                                   has_touch=True)
    context.add_init_script("delete Blob.prototype.arrayBuffer;")
    try:
        link = create_link(client, acme)
        page = open_capture(context, link["url"])
        assert page.evaluate("typeof Blob.prototype.arrayBuffer") == "undefined"
        fill_ticket(page)
        page.set_input_files("#photo-camera", files=[
            {"name": "old-phone.jpg", "mimeType": "image/jpeg",
             "buffer": exif_jpeg("2026:11:20 14:05:00", ("N", 37, 46, 30), ("W", 122, 25, 12))},
            {"name": "second.jpg", "mimeType": "image/jpeg", "buffer": site_photo(2)}])
        page.wait_for_function("() => document.querySelectorAll('#photo-list img').length === 2",
                               timeout=30_000)
        page.click("button[type=submit]")
        page.wait_for_selector("#done:not([hidden])", timeout=20_000)
        ticket_id = client.get("/v1/tickets", headers=acme.headers).json["data"][0]["id"]
        photos = client.get(f"/v1/tickets/{ticket_id}", headers=acme.headers).json["photos"]
        taken = {photo["name"]: photo["taken_at"] for photo in photos}
        assert taken["old-phone.jpg"].startswith("2026-11-20T14:05:00") and "second.jpg" in taken
    finally:
        context.close()


def test_fill_add_rows_photo_sign_and_send(client, acme, live_server, phone, app):
    link = create_link(client, acme)
    page = phone.new_page()
    page.goto(link["urls"]["qr"])
    fill_ticket(page)
    add_labor_row(page, "Laborer", "3", "48")
    page.click('button.add-row[data-kind="materials"]')
    page.wait_for_selector('#materials-rows > .row:nth-child(2)')
    page.locator("#materials-rows > .row").nth(1).locator(".remove-row").click()
    assert page.locator("#materials-rows > .row").count() == 1
    page.locator("#materials-rows > .row").first.locator('input[name$=".description"]') \
        .fill("Non-shrink grout")
    page.locator("#materials-rows > .row").first.locator('input[name$=".quantity"]').fill("4")
    page.locator("#materials-rows > .row").first.locator('input[name$=".unitCost"]').fill("21.75")

    with page.expect_request(lambda r: r.method == "PUT" and "/photos/" in r.url,
                             timeout=60_000) as sent:  # the photo goes ahead as soon as it is ready
        page.set_input_files('#photo-gallery', files=[
            {"name": "slab.jpg", "mimeType": "image/jpeg", "buffer": camera_jpeg()}])
        page.wait_for_selector("#photo-list img", timeout=30_000)
    sign(page)
    page.fill('input[name="signature.name"]', "Sam Ortiz")
    page.fill('input[name="signature.role"]', "Superintendent")
    page.get_by_label("Time and materials verified; scope disputed", exact=True).check()
    page.click("button[type=submit]")
    headers = sent.value.all_headers()
    assert headers["content-type"] == "image/jpeg" and int(headers["content-length"]) < 400 * 1024
    page.wait_for_selector("#done:not([hidden])")
    reference = page.inner_text("#done-reference")
    assert reference.startswith("T-")
    assert "Sent" in page.inner_text("#queue-status")

    tickets = client.get("/v1/tickets", headers=acme.headers).json["data"]
    assert len(tickets) == 1
    ticket = client.get(f"/v1/tickets/{tickets[0]['id']}", headers=acme.headers).json
    assert ticket["captured_via"] == "qr" and ticket["link_token"] == link["token"]
    assert ticket["photo_count"] == 1
    assert ticket["signature"]["name"] == "Sam Ortiz"
    assert ticket["signature"]["qualifier"] == "verified_scope_disputed"
    assert ticket["signature"]["signed_via"] == "crew_phone"
    assert [line["trade"] for line in ticket["labor"]] == ["Concrete finisher", "Laborer"]
    assert ticket["materials"][0]["amount"] == 87.0
    assert ticket["total"] == 2 * 3 * 72.5 + 3 * 48 + 87.0
    assert ticket["id"].replace("-", "")[:8].upper() == reference[2:]
    with app.app_context():
        from models import TicketPhoto
        (stored,) = db.session.query(TicketPhoto).all()
        assert max(stored.width, stored.height) == 2048


def test_offline_ticket_is_kept_and_sent_once(client, acme, live_server, phone, app):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    fill_ticket(page)
    submit_offline(phone, page)
    assert page.inner_text("#queue-status") == "Waiting for signal"
    assert "Kept on this phone" in page.inner_text("#kept")
    with app.app_context():
        assert db.session.query(Ticket).count() == 0
    phone.set_offline(False)
    page.wait_for_selector("#queue-status.sent", timeout=20_000)
    assert "Sent" in page.inner_text("#queue-status")
    # Open the page again: nothing is left in the queue to resend.
    page.reload()
    wait_for_script(page)
    page.wait_for_timeout(300)  # let the on-load flush run; it must find nothing
    with app.app_context():
        tickets = db.session.query(Ticket).all()
        assert len(tickets) == 1
        assert tickets[0].client_ref is not None
    assert queued_keys(page) == []


KEPT_PATHS = """async () => {
    const cache = await caches.open('capture-pages-v1');
    return (await cache.keys()).map(request => new URL(request.url).pathname);
}"""


def kept_paths(page) -> list[str]:
    """Paths the capture service worker holds a copy of, in this phone's browser."""
    return page.evaluate(KEPT_PATHS)


def wait_for(page, check, timeout_s: float = 20.0) -> None:
    """Poll a check of browser state (evaluate awaits promises; wait_for_function does not)."""
    for _ in range(int(timeout_s / 0.05)):
        if check():
            return
        page.wait_for_timeout(50)
    raise AssertionError("the service worker did not get there in time")


def wait_until_kept(page) -> None:
    """Wait until the service worker holds the page and its script."""
    path = page.evaluate("location.pathname")
    wait_for(page, lambda: path in kept_paths(page) and "/static/capture.js" in kept_paths(page))


KEPT_ADDRESSES = """async () => {
    const cache = await caches.open('capture-pages-v1');
    return (await cache.keys()).map(request => new URL(request.url)).map(url => url.pathname + url.search);
}"""

KEPT_PAGE = """async (address) => {
    const copy = await (await caches.open('capture-pages-v1')).match(address);
    return copy ? await copy.text() : '';
}"""

PUT_IN_CACHE = """async ([path, text]) => {
    const cache = await caches.open('capture-pages-v1');
    await cache.put(location.origin + path,
                    new Response(text, {headers: {'Content-Type': 'text/javascript'}}));
}"""


PATIENCE_MS = 2000  # the worker's wait for the network in the release test (4 s served)


def serve_worker_with_patience(app, tmp_path, patience_ms: int) -> None:
    """Serve a copy of static/ whose service worker waits patience_ms (not 4 s) for the network
    before it looks for a kept copy, so a test can be slower than its patience quickly."""
    folder = tmp_path / "static-patience"
    shutil.copytree(app.static_folder, folder)
    worker = (folder / "capture-sw.js").read_text()
    assert "var NETWORK_WAIT_MS = 4000;" in worker
    (folder / "capture-sw.js").write_text(
        worker.replace("var NETWORK_WAIT_MS = 4000;", f"var NETWORK_WAIT_MS = {patience_ms};"))
    app.static_folder = str(folder)


def test_a_new_release_never_meets_an_older_copy_of_its_script(client, acme, live_server, phone,
                                                              app, tmp_path):
    serve_worker_with_patience(app, tmp_path, PATIENCE_MS)
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    wait_until_kept(page)
    token = link["token"]
    # What a worker of an earlier release kept: its script by a bare address, and empty rows.
    page.evaluate(PUT_IN_CACHE, ["/static/capture.js", "window.olderCopy = true;"])
    page.evaluate(PUT_IN_CACHE, [f"/c/{token}/rows/labor", "<fieldset></fieldset>"])
    # The next release: its script and its worker changed.
    release = tmp_path / "static"
    shutil.copytree(app.static_folder, release)
    with open(release / "capture.js", "a") as script:
        script.write("\nwindow.nextRelease = true;\n")
    with open(release / "capture-sw.js", "a") as worker:  # code: a comment is minified away
        worker.write("\nself.nextRelease = true;\n")
    app.static_folder = str(release)
    with app.test_request_context():
        address = url_for("static", filename="capture.js")
    assert "?v=" in address and address not in page.evaluate(KEPT_ADDRESSES)
    # On one bar the new page comes in time and its script does not (it takes a second and a half
    # longer than the worker's patience): the worker waits for it rather than run the copy it
    # has. The patience is long enough that a page made on a busy test machine still comes in
    # time (at 500 ms one did not, and the worker rightly showed the kept page).
    serve_static = app.view_functions["static"]

    def slow_script(filename: str):
        if filename == "capture.js":
            time.sleep(PATIENCE_MS / 1000 + 1.5)
        return serve_static(filename=filename)
    app.view_functions["static"] = slow_script
    try:
        page.reload()
        wait_for_script(page)
    finally:
        app.view_functions["static"] = serve_static
    assert page.evaluate("window.nextRelease === true && window.olderCopy === undefined")
    page.click('button.add-row[data-kind="labor"]')
    assert page.locator("#labor-rows > .row").count() == 2
    # One copy of each file is kept, this release's; the new worker dropped the old rows.
    wait_for(page, lambda: [a for a in page.evaluate(KEPT_ADDRESSES)
                            if a.startswith(("/static/capture.js", f"/c/{token}/rows"))] == [address])
    phone.set_offline(True)
    page.reload()
    wait_for_script(page)
    assert page.evaluate("window.nextRelease === true")


def next_release(app, tmp_path, name: str = "static") -> str:
    """Serve a copy of static/ whose capture.js marks itself as the next release; its address."""
    folder = tmp_path / name
    shutil.copytree(app.static_folder, folder)
    with open(folder / "capture.js", "a") as script:
        script.write("\nwindow.nextRelease = true;\n")
    app.static_folder = str(folder)
    with app.test_request_context():
        return url_for("static", filename="capture.js")


def script_address(page) -> str:
    """The address of capture.js on the open page."""
    return page.evaluate("document.querySelector('script[src*=\"capture.js\"]').getAttribute('src')")


def test_a_new_page_whose_script_did_not_arrive_is_not_kept(client, acme, live_server, phone, app,
                                                          tmp_path):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    wait_until_kept(page)
    before = script_address(page)
    after = next_release(app, tmp_path)
    # After the release, on one bar: the page arrives, its script's connection drops.
    dropped = []

    def drop(route):
        dropped.append(route.request.service_worker is not None)
        route.abort("connectionreset")

    phone.route(f"**{after}", drop)
    page.reload()
    wait_for_script(page)
    # Every try of the worker fails: passing on the page's request, keeping the page (a busy
    # phone may try a third time before the test looks).
    wait_for(page, lambda: len(dropped) >= 2 and all(dropped))
    phone.unroute(f"**{after}")
    # Later, no signal at all: the phone opens the page it kept whole, with its own script.
    phone.set_offline(True)
    page.reload()
    wait_for_script(page)
    assert script_address(page) == before and page.evaluate("window.nextRelease") is None
    assert after not in page.evaluate(KEPT_ADDRESSES)


def test_each_kept_page_keeps_its_own_script_across_a_release(client, acme, live_server, phone,
                                                             app, tmp_path):
    first, second = create_link(client, acme), create_link(client, acme)
    one = open_capture(phone, first["url"])
    wait_until_kept(one)
    two = open_capture(phone, second["url"])
    wait_until_kept(two)
    before = script_address(one)
    after = next_release(app, tmp_path)
    two.reload()  # with signal: the second link's page is kept at the new release
    wait_for_script(two)
    wait_for(two, lambda: after in two.evaluate(KEPT_PAGE, two.evaluate("location.href")))
    assert before in two.evaluate(KEPT_ADDRESSES)  # still named by the first link's kept page
    phone.new_cdp_session(two).send("Network.clearBrowserCache")  # phones let go of it any time
    phone.set_offline(True)
    one.reload()
    wait_for_script(one)
    assert script_address(one) == before and one.evaluate("window.nextRelease") is None
    two.reload()
    wait_for_script(two)
    assert script_address(two) == after and two.evaluate("window.nextRelease") is True


def test_a_page_opened_once_opens_and_queues_with_no_signal(client, acme, live_server, phone,
                                                           app):
    link = create_link(client, acme)
    page = open_capture(phone, link["urls"]["sms"])
    wait_until_kept(page)
    # In the trench: no signal, and the browser dropped the tab. The form opens from the copy.
    phone.set_offline(True)
    page.reload()
    wait_for_script(page)
    assert acme.project()["name"] in page.inner_text("h1")
    fill_ticket(page)
    add_labor_row(page, "Laborer", "2", "48")
    # A photo taken down there keeps its time and place: the page reads EXIF itself.
    page.set_input_files("#photo-camera", files=[
        {"name": "trench.jpg", "mimeType": "image/jpeg",
         "buffer": exif_jpeg("2026:11:20 14:05:00", ("N", 37, 46, 30), ("W", 122, 25, 12))}])
    page.wait_for_function("() => document.querySelectorAll('#photo-list img').length === 1",
                           timeout=30_000)
    page.click("button[type=submit]")
    page.wait_for_selector("#queue-status.saved")
    with app.app_context():
        assert db.session.query(Ticket).count() == 0
    phone.set_offline(False)
    page.wait_for_selector("#queue-status.sent", timeout=20_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert [line["trade"] for line in ticket.lines if line["kind"] == "labor"] == \
            ["Concrete finisher", "Laborer"]
        assert ticket.captured_via == "sms"
    photo = client.get(f"/v1/tickets/{ticket.id}", headers=acme.headers).json["photos"][0]
    assert photo["taken_at"].startswith("2026-11-20T14:05:00")
    assert photo["coords"]["lat"] == pytest.approx(37.775, abs=1e-4)


def test_a_revoked_link_loses_its_copy_on_the_phone(client, acme, live_server, phone):
    from playwright.sync_api import Error as PlaywrightError

    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    wait_until_kept(page)
    revoked = client.post(f"/v1/links/{link['token']}/revoke", headers=acme.headers)
    assert revoked.status_code == 200
    answer = page.reload()
    assert answer.status in (404, 410)
    assert "no longer works" in page.inner_text("body")
    wait_for(page, lambda: not any(path.startswith(f"/c/{link['token']}")
                                   for path in kept_paths(page)))
    phone.set_offline(True)
    with pytest.raises(PlaywrightError):
        page.reload()


def stored_keys(page) -> list[str]:
    """Tickets the capture page keeps on the phone to send or fix (not drafts or sent records)."""
    return [key for key in page.evaluate("idbKeyval.keys()")
            if key.startswith(("ticket:", "refused:"))]


def refuse_next_ticket(page, details: list[dict]) -> None:
    """The server refuses the next ticket once with these problems (as a stricter server would)."""
    body = json.dumps({"error": {"code": "validation_failed", "message": "the request has problems",
                                 "details": details}})
    refused = []

    def refuse(route):
        if refused or route.request.method != "POST":
            route.fallback()
            return
        refused.append(route.request.url)
        route.fulfill(status=400, content_type="application/json", body=body)
    page.context.route("**/tickets*", refuse)


def test_a_queued_ticket_the_server_refuses_comes_back_into_the_form(client, acme, live_server,
                                                                     phone, app):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    fill_ticket(page)
    submit_offline(phone, page)
    refuse_next_ticket(page, [{"field": "labor[0].hours",
                               "message": "Input should be less than or equal to 1000"}])
    phone.set_offline(False)
    # Sent when the signal returns, refused: the ticket is back in the form with the reason.
    page.wait_for_selector(".js-form-error:not([hidden])", timeout=20_000)
    assert "Sent back" in page.inner_text("#queue-status")
    assert page.input_value('textarea[name="description"]').startswith("Cut and patched slab")
    assert page.inner_text('[data-error-for="labor[0].hours"]') == "Must be 1,000 or less."
    (key,) = stored_keys(page)
    assert key.startswith("refused:")
    # Closing the tab loses nothing: the ticket opens in the form again.
    page.reload()
    wait_for_script(page)
    page.wait_for_function("() => document.querySelector('textarea[name=description]').value !== ''")
    assert page.input_value('input[name="labor[0].hours"]') == "3"
    assert page.input_value('input[name="directed_by"]') == "Sam Ortiz, GC superintendent"
    page.fill('input[name="labor[0].hours"]', "2.5")
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=20_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert float(ticket.lines[0]["hours"]) == 2.5
    wait_for(page, lambda: stored_keys(page) == [])


def queue_for_a_link_then_revoke_it(client, acme, phone, project: dict | None = None):
    """A signed ticket queued with no signal for a link that is revoked before it is sent."""
    old = client.post("/v1/links", headers=acme.headers,
                      json={"project_id": (project or acme.project())["id"]}).json
    page = open_capture(phone, old["url"])
    fill_ticket(page)
    sign(page)
    page.fill('input[name="signature.name"]', "Sam Ortiz")
    submit_offline(phone, page)
    assert client.post(f"/v1/links/{old['token']}/revoke", headers=acme.headers).status_code == 200
    phone.set_offline(False)
    # Refused with 410 when the signal returns: kept on the phone, not dropped.
    wait_for(page, lambda: [k[:8] for k in stored_keys(page)] == ["refused:"])
    return old, page


def test_a_ticket_queued_for_a_revoked_link_goes_through_a_new_one(client, acme, live_server,
                                                                   phone, app):
    old, page = queue_for_a_link_then_revoke_it(client, acme, phone)
    new = create_link(client, acme)
    page.goto(new["url"])
    page.wait_for_selector("#tray-actions button")
    assert page.inner_text("#queue-status") == "This link was closed by the office"
    assert page.inner_text("#tray-actions button") == "Open it in this form"
    page.click("#tray-actions button")
    assert page.input_value('input[name="labor[0].trade"]') == "Concrete finisher"
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=20_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert ticket.link_token == new["token"]
        assert ticket.description == "Cut and patched slab for the plumber's sleeve"
        assert ticket.signature and ticket.signature["name"] == "Sam Ortiz"
    wait_for(page, lambda: stored_keys(page) == [])


def test_a_ticket_for_a_revoked_link_changes_project_only_when_the_crew_chooses(
        client, acme, live_server, phone, app):
    first, other = acme.project(), acme.project(change_events=False)
    old, page = queue_for_a_link_then_revoke_it(client, acme, phone, first)
    # The revoked link's page says the ticket is still here, not that nothing was saved.
    page.goto(old["url"])
    page.wait_for_selector("#kept-here:not([hidden])")
    text = page.inner_text("main")
    assert "still on this phone" in page.inner_text("#kept-here")
    assert "Cut and patched slab" in page.inner_text("#kept-here")
    assert "Nothing was saved" not in text
    # A link of another project: the ticket is named with its project, and the form stays empty.
    new = client.post("/v1/links", headers=acme.headers, json={"project_id": other["id"]}).json
    page.goto(new["url"])
    page.wait_for_selector("#tray-actions button")
    assert page.inner_text("#queue-status") == "This link was closed by the office"
    page.click("#tray-toggle")
    assert first["name"] in page.inner_text("#phone-tickets")
    choice = page.inner_text("#tray-actions button")
    assert other["name"] in choice
    assert page.input_value('textarea[name="description"]') == ""
    page.reload()  # opening the page again files nothing either
    wait_for_script(page)
    page.wait_for_selector("#tray-actions button")
    with app.app_context():
        assert db.session.query(Ticket).count() == 0
    page.click("#tray-actions button")
    notice = page.inner_text("#project-notice")
    assert first["name"] in notice and other["name"] in notice
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=20_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert ticket.project_id == other["id"] and ticket.link_token == new["token"]
        assert ticket.signature and ticket.signature.get("image") is not None or ticket.signature


def signature_points(page) -> int:
    """How many signature points the pad on screen holds."""
    return page.evaluate("""() => {
        const canvas = document.getElementById('signature-pad');
        const ctx = canvas.getContext('2d');
        const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
        let inked = 0;
        for (let i = 3; i < data.length; i += 4) { if (data[i] > 0) inked++; }
        return inked;
    }""")


def test_a_reload_restores_the_draft_with_its_signature(client, acme, live_server, phone):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    fill_ticket(page)
    add_labor_row(page, "Laborer", "3", "48")
    page.set_input_files('#photo-gallery', files=[
        {"name": "slab.jpg", "mimeType": "image/jpeg", "buffer": camera_jpeg()}])
    page.wait_for_selector("#photo-list img", timeout=30_000)
    sign(page)
    page.fill('input[name="signature.name"]', "Sam Ortiz")
    wait_for(page, lambda: page.evaluate(
        "idbKeyval.get('draft:' + document.getElementById('ticket-form').dataset.token)"
        ".then(d => !!d && d.values['signature.name'] === 'Sam Ortiz' && d.signature"
        " && d.signature.strokes.length > 0)"))
    # Android closed the tab while the camera was open: the page opens again with everything.
    page.close()
    page = open_capture(phone, link["url"])
    page.wait_for_function("() => document.querySelector('textarea[name=description]').value !== ''")
    assert page.input_value('textarea[name="description"]') == "Cut and patched slab for the plumber's sleeve"
    assert page.input_value('input[name="signature.name"]') == "Sam Ortiz"
    rows = page.locator("#labor-rows > .row")
    assert rows.count() == 2
    assert rows.nth(1).locator('input[name$=".trade"]').input_value() == "Laborer"
    assert page.locator("#photo-list img").count() == 1
    assert signature_points(page) > 100
    # The address bar hides on scroll: the window resizes, and the signature stays.
    before = page.evaluate("document.getElementById('signature-pad').width")
    page.set_viewport_size({"width": 360, "height": 680})
    page.set_viewport_size({"width": 400, "height": 740})
    page.wait_for_function(f"() => document.getElementById('signature-pad').width > {before}")
    assert signature_points(page) > 100
    with page.expect_request(lambda r: r.method == "PUT"
                             and r.url.split("?")[0].endswith("/signature")) as sent:
        page.click("button[type=submit]")
    assert sent.value.all_headers()["content-type"] == "image/png"
    assert "name=Sam%20Ortiz" in sent.value.url
    page.wait_for_selector("#done:not([hidden])", timeout=20_000)


def test_a_restored_ticket_keeps_its_signature_through_a_resize(client, acme, live_server, phone,
                                                                 app):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    fill_ticket(page)
    sign(page)
    submit_offline(phone, page)
    refuse_next_ticket(page, [{"field": "description", "message": "Field required"}])
    phone.set_offline(False)
    page.wait_for_selector(".js-form-error:not([hidden])", timeout=20_000)
    assert page.inner_text('[data-error-for="description"]') == "Please fill this in."
    assert signature_points(page) > 100
    page.set_viewport_size({"width": 360, "height": 600})
    page.set_viewport_size({"width": 360, "height": 740})
    assert signature_points(page) > 100
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=20_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert ticket.signature is not None


def test_errors_show_beside_their_fields(client, acme, live_server, phone):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    page.fill('input[name="labor[0].trade"]', "Laborer")
    page.fill('input[name="labor[0].hours"]', "2000")
    page.click("button[type=submit]")
    page.wait_for_selector('.js-form-error:not([hidden])')
    assert page.inner_text('[data-error-for="description"]')
    assert "1,000" in page.inner_text('[data-error-for="labor[0].hours"]')


def test_revoked_link_page(client, acme, live_server, phone):
    link = create_link(client, acme)
    client.post(f"/v1/links/{link['token']}/revoke", headers=acme.headers)
    page = phone.new_page()
    response = page.goto(link["url"])
    assert response.status == 410
    assert "This link no longer works" in page.inner_text("h1")
    assert "Ask your project manager for a new one." in page.inner_text("main")


def in_view(page, selector: str) -> bool:
    """Whether an element is wholly on screen."""
    box = page.locator(selector).bounding_box()
    size = page.viewport_size
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= size["height"] + 1


def test_the_tray_stays_on_screen_and_says_what_happened(client, acme, live_server, phone, app):
    import re

    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    page.wait_for_selector("#queue-status.idle")
    assert page.inner_text("#queue-status") == "Nothing waiting to send."
    fill_ticket(page)
    page.locator("button[type=submit]").scroll_into_view_if_needed()
    assert in_view(page, "#queue-status")
    submit_offline(phone, page)
    # The form is emptied only once the ticket is kept, and the page says so where the crew looks.
    assert in_view(page, "#queue-status") and in_view(page, "#kept")
    assert page.inner_text("#queue-status") == "Waiting for signal"
    assert page.inner_text("#tray-toggle") == "1"
    assert "Kept on this phone" in page.inner_text("#kept")
    seen_while_sending = []

    def watch(route):
        seen_while_sending.append(page.evaluate("document.getElementById('queue-status').textContent"))
        route.fallback()
    phone.route("**/tickets*", watch)
    phone.set_offline(False)
    page.wait_for_selector("#queue-status.sent", timeout=20_000)
    assert seen_while_sending and all("Sending" in text for text in seen_while_sending)
    assert re.fullmatch(r"Sent T-[0-9A-F]{8} \d\d:\d\d( [AP]M)?", page.inner_text("#queue-status"))
    page.click("#tray-toggle")
    (item,) = page.locator("#phone-tickets li").all()
    assert item.get_attribute("data-state") == "sent"
    assert "Cut and patched slab" in item.inner_text() and "Sent T-" in item.inner_text()
    phone.unroute("**/tickets*")

    # The office's storage is full (507): the ticket stays on the phone, in plain words.
    page.click("[data-record-another] >> visible=true")
    fill_ticket(page)
    assert page.input_value('input[name="captured_by"]') == "Lee Park"

    def full(route):
        route.fulfill(status=507, content_type="application/json",
                      body=json.dumps({"error": {"code": "storage_full", "message": "quota"}}))
    phone.route("**/tickets*", full)
    page.click("button[type=submit]")
    page.wait_for_selector("#queue-status.saved")
    # (the service worker may try again at once; the tray says so, then says why it waits)
    expect(page.locator("#queue-status")).to_contain_text(
        re.compile(r"out of space.*Trying again in", re.S))
    assert "Kept on this phone" in page.inner_text("#kept")
    assert [k[:7] for k in stored_keys(page)] == ["ticket:"]
    states = [li.get_attribute("data-state") for li in page.locator("#phone-tickets li").all()]
    assert sorted(states) == ["sent", "waiting"]
    with app.app_context():
        assert db.session.query(Ticket).count() == 1


def test_the_form_is_not_emptied_when_the_phone_cannot_keep_the_ticket(client, acme, live_server,
                                                                        phone, app):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    fill_ticket(page)
    page.evaluate("() => { idbKeyval.set = () => Promise.reject(new Error('the phone is full')); }")
    phone.set_offline(True)
    page.click("button[type=submit]")
    page.wait_for_selector("#queue-status.problem")
    assert "could not keep" in page.inner_text("#queue-status")
    assert page.input_value('textarea[name="description"]').startswith("Cut and patched slab")
    assert page.is_visible("#ticket-form")


def test_the_phone_checks_the_servers_rules_before_keeping_a_ticket(client, acme, live_server,
                                                                    phone, app):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    for name in ("description", "reason", "directed_by"):
        field = page.locator(f'[name="{name}"]')
        assert field.get_attribute("aria-required") == "true"
        assert "*" in page.locator(".field", has=field).locator("span").first.inner_text()
    assert page.locator('.field:has([name="captured_by"]) .req').count() == 0
    page.fill('textarea[name="reason"]', "Sleeve was missed")
    page.fill('input[name="directed_by"]', "   ")
    page.fill('input[name="labor[0].trade"]', "Laborer")
    page.fill('input[name="labor[0].hours"]', "2000")
    page.fill('input[name="labor[0].workers"]', "two")
    phone.set_offline(True)
    page.click("button[type=submit]")
    page.wait_for_selector("#queue-status.problem")
    # Nothing is kept or sent until the marked fields are right, and the words are plain.
    assert stored_keys(page) == []
    assert page.is_hidden("#kept")
    assert page.inner_text('[data-error-for="description"]') == "Please fill this in."
    assert page.inner_text('[data-error-for="directed_by"]') == "Please fill this in."
    assert page.inner_text('[data-error-for="labor[0].hours"]') == "Must be 1,000 or less."
    assert page.inner_text('[data-error-for="labor[0].workers"]') == "Write a number, like 2 or 1.5."
    assert page.inner_text('[data-error-for="reason"]') == ""
    body = page.inner_text("body")
    for developer_words in ("String should", "Field required", "Input should"):
        assert developer_words not in body
    assert page.evaluate("document.activeElement.name") == "description"
    page.fill('textarea[name="description"]', "Patched slab")
    page.fill('input[name="directed_by"]', "Sam Ortiz")
    page.fill('input[name="labor[0].hours"]', "2,5")
    page.fill('input[name="labor[0].workers"]', "2")
    page.click("button[type=submit]")
    page.wait_for_selector("#queue-status.saved")
    phone.set_offline(False)
    page.wait_for_selector("#queue-status.sent", timeout=20_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert float(ticket.lines[0]["hours"]) == 2.5


def test_the_page_checks_with_the_same_schema_the_api_publishes(client, acme):
    """The rules the phone checks are the server's own, as the OpenAPI document states them."""
    import html
    import re

    link = create_link(client, acme)
    page = client.get(f"/c/{link['token']}").get_data(as_text=True)
    embedded = json.loads(html.unescape(re.search(r"data-schema='([^']*)'", page).group(1)))
    document = client.get("/v1/openapi.json").json
    published = document["components"]["schemas"]

    def resolve(node, defs):
        if isinstance(node, dict):
            if "$ref" in node:
                return resolve(defs[node["$ref"].rsplit("/", 1)[1]], defs)
            return {k: resolve(v, defs) for k, v in node.items() if k not in ("title", "description")}
        if isinstance(node, list):
            return [resolve(v, defs) for v in node]
        return node

    assert resolve(embedded, embedded.get("$defs", {}))["properties"] == \
        resolve(published["TicketInput"], published)["properties"]


AXE = (Path(__file__).parent / "vendor" / "axe-core-4.14.1.min.js")


def contrast(first: str, second: str) -> float:
    """WCAG contrast ratio of two CSS rgb() colours."""
    def luminance(colour: str) -> float:
        channels = [int(c) / 255 for c in re.findall(r"\d+", colour)[:3]]
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def serious_axe_problems(page) -> list[str]:
    """axe-core's serious and critical findings on the page as it is now."""
    page.evaluate(AXE.read_text())
    found = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    return [f"{v['id']}: {v['help']} ({len(v['nodes'])})" for v in found["violations"]
            if v["impact"] in ("serious", "critical")]


def test_sun_and_gloves_borders_targets_and_undo(client, acme, live_server, phone):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    white = "rgb(255, 255, 255)"
    for selector in ('textarea[name="description"]', 'input[name="labor[0].hours"]', ".signature-box"):
        border = page.eval_on_selector(selector, "e => getComputedStyle(e).borderTopColor")
        assert contrast(border, white) >= 3, (selector, border)
    page.focus('input[name="directed_by"]')
    ring = page.eval_on_selector('input[name="directed_by"]', "e => getComputedStyle(e).outlineColor")
    assert contrast(ring, white) >= 3
    assert "Sign here" in page.inner_text(".signature-box")
    # Every control the crew taps is at least 48 px each way.
    add_labor_row(page, "Laborer", "3", "48")
    page.set_input_files('#photo-gallery', files=[
        {"name": "slab.jpg", "mimeType": "image/jpeg", "buffer": camera_jpeg()}])
    page.wait_for_selector("#photo-list img", timeout=30_000)
    for control in page.locator("main button:visible, main input:not([type=file]):visible, "
                                "main label.button:visible, main textarea:visible, "
                                "main a:visible, #tray button:visible").all():
        box = control.bounding_box()
        assert box["height"] >= 48 and box["width"] >= 48, control.evaluate("e => e.outerHTML")
    # Removing a line, a photo or the signature can be undone.
    page.locator("#labor-rows > .row").nth(1).locator(".remove-row").click()
    assert page.locator("#labor-rows > .row").count() == 1
    page.click("#undo-bar button")
    assert page.locator("#labor-rows > .row").nth(1).locator('input[name$=".trade"]') \
        .input_value() == "Laborer"
    page.click("#photo-list button")
    assert page.locator("#photo-list img").count() == 0
    page.click("#undo-bar button")
    assert page.locator("#photo-list img").count() == 1
    sign(page)
    inked = signature_points(page)
    page.click("#signature-clear")
    assert signature_points(page) == 0
    page.click("#undo-bar button")
    assert signature_points(page) == inked


def test_crew_pages_have_no_serious_accessibility_problems(client, acme, live_server, chromium):
    link = create_link(client, acme)
    # axe is injected by the test itself, so this context lets the page run it despite the CSP.
    context = chromium.new_context(viewport={"width": 360, "height": 740}, is_mobile=True,
                                   has_touch=True, bypass_csp=True)
    try:
        page = context.new_page()
        page.goto(link["url"])
        wait_for_script(page)
        page.click("button[type=submit]")  # with its errors showing
        page.wait_for_selector("#queue-status.problem")
        assert serious_axe_problems(page) == []
        page.goto(link["poster_url"])
        assert serious_axe_problems(page) == []
        client.post(f"/v1/links/{link['token']}/revoke", headers=acme.headers)
        page.goto(link["url"])
        assert serious_axe_problems(page) == []
    finally:
        context.close()


def exif_jpeg(taken: str, lat: tuple, lng: tuple, color=(120, 90, 60), endian: str = ">",
              original: str | None = None) -> bytes:
    """A camera-like JPEG whose EXIF says when and where it was taken, in either byte order
    (iPhones write big-endian EXIF, many Android cameras little-endian); `original` sets a
    DateTimeOriginal other than `taken` (the file's DateTime)."""
    from PIL.TiffImagePlugin import IFDRational

    image = Image.new("RGB", (1200, 900), color)
    exif = Image.Exif()
    exif.endian = endian
    exif[0x0132] = taken
    exif.get_ifd(0x8769)[0x9003] = taken if original is None else original
    gps = exif.get_ifd(0x8825)
    gps[1], gps[2] = lat[0], tuple(IFDRational(v) for v in lat[1:])
    gps[3], gps[4] = lng[0], tuple(IFDRational(v) for v in lng[1:])
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=85, exif=exif)
    return buffer.getvalue()


def torn_exif_jpeg() -> bytes:
    """A JPEG whose EXIF segment claims more entries than it holds (a file cut or mangled)."""
    plain = io.BytesIO()
    Image.new("RGB", (800, 600), (90, 90, 90)).save(plain, "JPEG", quality=80)
    tiff = b"II*\x00\x08\x00\x00\x00" + (400).to_bytes(2, "little") + b"\x32\x01\x02\x00"
    segment = b"Exif\x00\x00" + tiff
    return (b"\xff\xd8\xff\xe1" + (len(segment) + 2).to_bytes(2, "big") + segment
            + plain.getvalue()[2:])


def test_photos_from_camera_or_gallery_keep_their_time_place_and_work_day(client, acme, live_server,
                                                                          phone, app):
    link = create_link(client, acme)
    fetched: list[str] = []
    phone.on("request", lambda request: fetched.append(request.url)
             if request.service_worker is None else None)
    page = open_capture(phone, link["url"])
    page.wait_for_load_state("networkidle")
    camera, gallery = page.locator("#photo-camera"), page.locator("#photo-gallery")
    assert camera.get_attribute("capture") == "environment" and gallery.get_attribute("capture") is None
    assert camera.get_attribute("multiple") is not None and gallery.get_attribute("multiple") is not None
    today = page.evaluate("new Date().toLocaleDateString('en-CA')")
    assert page.input_value('input[name="worked_on"]') == today
    fill_ticket(page)
    page.fill('input[name="worked_on"]', "2026-11-20")
    page.set_input_files("#photo-gallery", files=[
        {"name": "north.jpg", "mimeType": "image/jpeg",
         "buffer": exif_jpeg("2026:11:20 14:05:00", ("N", 37, 46, 30), ("W", 122, 25, 12))},
        {"name": "south.jpg", "mimeType": "image/jpeg",
         "buffer": exif_jpeg("2026:11:20 15:30:10", ("S", 33, 52, 0), ("E", 151, 12, 36), (40, 80, 20),
                             endian="<")},
        {"name": "torn.jpg", "mimeType": "image/jpeg", "buffer": torn_exif_jpeg()},
        # a camera that leaves DateTimeOriginal blank: its DateTime is the next best
        {"name": "unset.jpg", "mimeType": "image/jpeg", "buffer": exif_jpeg(
            "2026:11:19 09:00:00", ("N", 37, 46, 30), ("W", 122, 25, 12), original="    :  :     ")},
        # a date no calendar has: the photo keeps its file's time
        {"name": "wrong.jpg", "mimeType": "image/jpeg", "buffer": exif_jpeg(
            "2026:00:31 09:00:00", ("N", 37, 46, 30), ("W", 122, 25, 12))}])
    page.wait_for_function("() => document.querySelectorAll('#photo-list img').length === 5",
                           timeout=30_000)
    # The page reads EXIF itself: nothing is fetched for it.
    assert [url for url in fetched if "/static/" in url and "exif" in url] == []
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=20_000)
    tickets = client.get("/v1/tickets", headers=acme.headers).json["data"]
    ticket = client.get(f"/v1/tickets/{tickets[0]['id']}", headers=acme.headers).json
    assert ticket["worked_on"] == "2026-11-20"
    north, south, torn, unset, wrong = sorted(ticket["photos"], key=lambda p: p["name"])
    assert unset["taken_at"].startswith("2026-11-19T09:00:00")
    assert wrong["taken_at"].startswith(today) and wrong["coords"] is not None
    # EXIF that ends mid-way costs the photo its place, not the photo: it keeps its file's time.
    assert torn["coords"] is None and torn["taken_at"].startswith(today)
    assert north["taken_at"].startswith("2026-11-20T14:05:00")
    assert south["taken_at"].startswith("2026-11-20T15:30:10")
    assert north["coords"]["lat"] == pytest.approx(37.775, abs=1e-4)
    assert north["coords"]["lng"] == pytest.approx(-122.42, abs=1e-4)
    assert south["coords"]["lat"] == pytest.approx(-33.866667, abs=1e-4)
    assert south["coords"]["lng"] == pytest.approx(151.21, abs=1e-4)


def test_fewer_taps_remembered_name_signer_and_last_crew(client, acme, live_server, phone, app):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    fill_ticket(page)
    # The signer is usually who told the crew to do it.
    assert page.input_value('input[name="signature.name"]') == "Sam Ortiz, GC superintendent"
    add_labor_row(page, "Laborer", "3", "48")
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=20_000)
    page.click("#done [data-record-another]")
    # The next ticket keeps the foreman's name and offers the same crew.
    assert page.input_value('input[name="captured_by"]') == "Lee Park"
    assert page.input_value('textarea[name="description"]') == ""
    assert page.locator("#labor-rows > .row").count() == 1
    page.click("#same-as-last")
    rows = page.locator("#labor-rows > .row")
    assert rows.count() == 2
    assert [rows.nth(i).locator('input[name$=".trade"]').input_value() for i in range(2)] == \
        ["Concrete finisher", "Laborer"]
    assert rows.nth(0).locator('input[name$=".workers"]').input_value() == "2"
    # A signer the crew typed is not overwritten by a later change to "who told you".
    page.fill('input[name="directed_by"]', "Ana (GC)")
    assert page.input_value('input[name="signature.name"]') == "Ana (GC)"
    page.fill('input[name="signature.name"]', "Ana Ruiz")
    page.fill('input[name="directed_by"]', "Ana Ruiz, GC")
    assert page.input_value('input[name="signature.name"]') == "Ana Ruiz"
    # Reopening the page (a new day): the name is still there.
    page.goto(link["url"])
    wait_for_script(page)
    page.wait_for_function("() => document.querySelector('input[name=captured_by]').value !== ''")
    assert page.input_value('input[name="captured_by"]') == "Lee Park"


def test_the_office_can_keep_prices_and_cost_codes_off_the_crews_form(client, acme, live_server,
                                                                       phone, app):
    assert client.get("/v1/capture-settings", headers=acme.headers).json == {"crew_enters_prices": True}
    assert client.put("/v1/capture-settings", headers=acme.headers,
                      json={"crew_enters_prices": "no"}).status_code == 400
    changed = client.put("/v1/capture-settings", headers=acme.headers,
                         json={"crew_enters_prices": False})
    assert changed.status_code == 200 and changed.json == {"crew_enters_prices": False}
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    page.click('button.add-row[data-kind="equipment"]')
    page.wait_for_selector("#equipment-rows > .row:nth-child(2)")
    for hidden in ("rate", "unitCost", "costCode"):
        assert page.locator(f'input[name$=".{hidden}"]').count() == 0
    assert page.locator("#cost-codes").count() == 0
    page.fill('textarea[name="description"]', "Cut and patched slab")
    page.fill('textarea[name="reason"]', "Sleeve was missed")
    page.fill('input[name="directed_by"]', "Sam Ortiz")
    page.fill('input[name="labor[0].trade"]', "Laborer")
    page.fill('input[name="labor[0].hours"]', "3")
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=20_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert ticket.lines[0]["trade"] == "Laborer" and ticket.lines[0].get("rate") is None


def site_photo(index: int, width: int = 1200, height: int = 900) -> bytes:
    """A small, plain site photo (the phone re-encodes a 1200 x 900 one to a few tens of
    kilobytes, a 640 x 480 one to about 9 KB)."""
    from PIL import ImageDraw

    image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    draw = ImageDraw.Draw(image)
    x, y = width / 1200, height / 900  # the same picture at any size
    draw.rectangle([x * (80 + index * 40), y * 100, x * (500 + index * 30), y * 600],
                   fill=(30 + index * 15, 90, 160))
    draw.ellipse([x * 600, y * (200 + index * 20), x * 1000, y * 700], fill=(150, 120 + index * 8, 60))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


class Uploads:
    """Every ticket upload the phone makes (page and service worker): sizes, answers, overlap."""

    def __init__(self, context):
        self.requests: list = []
        self.in_flight = 0
        self.most_at_once = 0
        self.answers: dict = {}
        context.on("request", self._start)
        context.on("requestfinished", self._finish)
        context.on("requestfailed", self._fail)

    @staticmethod
    def counts(request) -> bool:
        return request.method in ("POST", "PUT") and ("/tickets" in request.url or "/drafts/" in request.url)

    def _start(self, request):
        if self.counts(request):
            self.requests.append(request)
            self.in_flight += 1
            self.most_at_once = max(self.most_at_once, self.in_flight)

    def _finish(self, request):
        if self.counts(request):
            self.in_flight -= 1
            response = request.response()
            self.answers[id(request)] = response.status if response else None

    def _fail(self, request):
        if self.counts(request):
            self.in_flight -= 1
            self.answers[id(request)] = None

    @staticmethod
    def size(request) -> int:
        length = request.all_headers().get("content-length")
        return int(length) if length else len(request.post_data_buffer or b"")

    def photo_keys(self) -> list[str]:
        return [r.url.split("/photos/")[1].split("?")[0] for r in self.requests if "/photos/" in r.url]


def throttle(phone, page, up_kbps: int, down_kbps: int, latency_ms: int):
    """CDP network throttling on the phone's page (kilobits per second, as Lighthouse states it)."""
    cdp = phone.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {
        "offline": False, "latency": latency_ms,
        "uploadThroughput": up_kbps * 1000 / 8, "downloadThroughput": down_kbps * 1000 / 8})
    return cdp


def add_site_photos(page, count: int, width: int = 1200, height: int = 900) -> None:
    page.set_input_files("#photo-gallery", files=[
        {"name": f"site-{i + 1}.jpg", "mimeType": "image/jpeg",
         "buffer": site_photo(i, width, height)} for i in range(count)])
    page.wait_for_function(f"() => document.querySelectorAll('#photo-list img').length === {count}",
                           timeout=60_000)


def test_a_12_photo_ticket_goes_through_at_200_kbps_up(client, acme, live_server, phone, app):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    uploads = Uploads(phone)
    throttle(phone, page, up_kbps=200, down_kbps=300, latency_ms=300)
    # VGA photos (about 9 KB each once the phone re-encodes them, against about 35 KB at
    # 1200 x 900): each still takes over half a second on this link, with its 300 ms latency.
    add_site_photos(page, 12, 640, 480)
    # The photos go ahead one by one while the crew keeps writing.
    page.wait_for_function("() => /\\d+ of 12 photos/.test("
                           "document.getElementById('queue-status').textContent)", timeout=60_000)
    fill_ticket(page)
    sign(page)
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=240_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert ticket.photo_count == 12 and ticket.photos_expected == 12
        assert ticket.signature is not None
    # One small upload per part, none of them the whole ticket, each sent once.
    keys = uploads.photo_keys()
    assert len(keys) == 12 and len(set(keys)) == 12
    assert max(uploads.size(r) for r in uploads.requests) < 400 * 1024
    assert uploads.most_at_once <= 2  # two pieces on their way at most, half a round apart


def test_a_drop_in_the_middle_resumes_without_resending_what_the_server_holds(
        client, acme, live_server, phone_without_worker, app):
    phone = phone_without_worker
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    uploads = Uploads(phone)
    # One DevTools session sets both the signal and its speed (mixing it with the context's own
    # offline switch let the page see the signal return before the network did).
    cdp = phone.new_cdp_session(page)
    cdp.send("Network.enable")

    def signal(present: bool) -> None:
        cdp.send("Network.emulateNetworkConditions", {
            "offline": not present, "latency": 150,
            "uploadThroughput": 1600 * 1000 / 8, "downloadThroughput": 1600 * 1000 / 8})

    signal(False)  # written with no signal: everything goes when the signal returns
    fill_ticket(page)
    add_site_photos(page, 6)
    own_bytes = sum(page.evaluate("() => idbKeyval.get('draft-photos:' + document.getElementById("
                                  "'ticket-form').dataset.token).then(kept => kept.photos.map(p => p.size))"))
    page.click("button[type=submit]")
    page.wait_for_selector("#queue-status.saved")
    answered = []
    page.on("response", lambda r: answered.append(r.url) if "/photos/" in r.url else None)
    signal(True)
    wait_for(page, lambda: len(answered) >= 3, timeout_s=60)
    signal(False)  # the signal drops with photo 4 on its way
    page.wait_for_selector("#queue-status.saved", timeout=30_000)
    signal(True)
    page.wait_for_selector("#queue-status.sent", timeout=60_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert ticket.photo_count == 6
    keys = uploads.photo_keys()
    # Photos go a piece at a time: every piece the server answered went up once, but for the
    # one cut off by the drop, so the photos cost their own bytes and one piece more at most.
    answered_puts = [r for r in uploads.requests
                     if "/photos/" in r.url and uploads.answers.get(id(r)) is not None]
    assert len(set(keys)) == 6
    photo_bytes = sum(uploads.size(r) for r in answered_puts)
    biggest = max(uploads.size(r) for r in answered_puts)
    assert photo_bytes <= own_bytes + biggest
    assert uploads.most_at_once <= 2  # two pieces on their way at most, half a round apart


def sync_waker(cdp, page, origin: str):
    """A function that wakes the page's service worker as the browser does when signal returns
    (a Background Sync event)."""
    registrations = []
    cdp.on("ServiceWorker.workerRegistrationUpdated",
           lambda event: registrations.extend(event["registrations"]))
    cdp.send("ServiceWorker.enable")
    wait_for(page, lambda: any(not r["isDeleted"] for r in registrations))
    registration = next(r for r in registrations if not r["isDeleted"])
    return lambda: cdp.send("ServiceWorker.dispatchSyncEvent", {
        "origin": origin, "registrationId": registration["registrationId"],
        "tag": "send-tickets", "lastChance": False})


def test_the_page_and_the_service_worker_never_upload_at_the_same_time(client, acme, live_server,
                                                                       phone, app):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    wait_until_kept(page)
    page.reload()  # now the worker controls the page
    wait_for_script(page)
    uploads = Uploads(phone)
    fill_ticket(page)
    add_site_photos(page, 3)
    submit_offline(phone, page)
    cdp = throttle(phone, page, up_kbps=400, down_kbps=400, latency_ms=150)
    wake = sync_waker(cdp, page, live_server.url)
    phone.set_offline(False)  # the page starts sending on "online" ...
    wake()  # ... and the browser wakes the worker too
    page.wait_for_selector("#queue-status.sent", timeout=60_000)
    wait_for(page, lambda: uploads.in_flight == 0)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert ticket.photo_count == 3
    assert uploads.most_at_once <= 2  # two pieces on their way at most, half a round apart
    # Each photo was taken by the server once (one cut off by the drop may have started twice).
    taken = [r.url.split("/photos/")[1].split("?")[0] for r in uploads.requests
             if "/photos/" in r.url and uploads.answers.get(id(r)) == 200]
    assert len(set(uploads.photo_keys())) == 3 and sorted(set(taken)) == sorted(taken)


def english_words() -> list[re.Pattern]:
    """Every English phrase of the crew pages that has a Spanish translation, as patterns."""
    from babel.messages.pofile import read_po

    catalog_path = Path(__file__).parent.parent / "translations" / "es" / "LC_MESSAGES" / "messages.po"
    with catalog_path.open("rb") as handle:
        catalog = read_po(handle)
    patterns = []
    for message in catalog:
        if not message.id or message.string == message.id:
            continue
        for english in (message.id if isinstance(message.id, tuple) else (message.id,)):
            for fragment in re.split(r"\{\w+\}|%\(\w+\)[sd]", english):
                fragment = fragment.strip(" .:;()+")
                if len(fragment) >= 4:
                    patterns.append(re.compile(r"(?<!\w)" + re.escape(fragment) + r"(?!\w)"))
    return patterns


def assert_no_english(page_text: str, where: str) -> None:
    found = [p.pattern for p in english_words() if p.search(page_text)]
    assert not found, f"English on the Spanish {where}: {found}"


def visible_text(page) -> str:
    """What the crew can read, including labels the screen reader says (aria-label)."""
    return page.evaluate("""() => document.body.innerText + '\\n' + [...document.querySelectorAll(
        '[aria-label]')].map(e => e.getAttribute('aria-label')).join('\\n')""")


def test_every_crew_page_in_spanish_has_no_english(client, acme, live_server, chromium, app):
    link = create_link(client, acme)
    context = chromium.new_context(viewport={"width": 360, "height": 740}, is_mobile=True,
                                   has_touch=True, locale="es-MX")
    try:
        page = context.new_page()
        page.goto(link["url"])
        wait_for_script(page)
        assert page.get_attribute("html", "lang") == "es"
        assert_no_english(visible_text(page), "capture page")
        page.fill('input[name="labor[0].trade"]', "Ayudante")
        page.fill('input[name="labor[0].hours"]', "2000")
        page.click("button[type=submit]")
        page.wait_for_selector("#queue-status.problem")
        assert page.inner_text('[data-error-for="description"]') == "Por favor complete este campo."
        assert page.inner_text('[data-error-for="labor[0].hours"]') == "Debe ser 1000 o menos."
        assert_no_english(visible_text(page), "capture page with errors")
        page.fill('textarea[name="description"]', "Se cortó y parchó la losa")
        page.fill('textarea[name="reason"]', "Faltó la camisa del plomero")
        page.fill('input[name="directed_by"]', "Sam Ortiz")
        page.fill('input[name="labor[0].hours"]', "2,5")
        page.set_input_files("#photo-gallery", files=[
            {"name": "losa.jpg", "mimeType": "image/jpeg", "buffer": site_photo(1)}])
        page.wait_for_selector("#photo-list img")
        page.click("#photo-list button")
        page.wait_for_selector("#undo-bar:not([hidden])")
        assert_no_english(visible_text(page), "undo bar")
        page.click("#undo-bar button")
        sign(page)
        context.set_offline(True)
        page.click("button[type=submit]")
        # The service worker may try too; the tray never says "Sending" with no signal.
        expect(page.locator("#queue-status")).to_have_text("Esperando señal")
        page.evaluate("""navigator.serviceWorker.dispatchEvent(
            new MessageEvent("message", {data: {type: "sending"}}))""")
        assert page.inner_text("#queue-status") == "Esperando señal"
        assert_no_english(visible_text(page), "kept ticket")
        context.set_offline(False)
        page.wait_for_selector("#queue-status.sent", timeout=30_000)
        assert page.inner_text("#queue-status").startswith("Enviada T-")
        page.click("#tray-toggle")
        assert_no_english(visible_text(page), "tray with this phone's tickets")
        with app.app_context():
            (ticket,) = db.session.query(Ticket).all()
            assert float(ticket.lines[0]["hours"]) == 2.5
        page.goto(link["poster_url"])
        assert_no_english(visible_text(page), "poster")
        # A ticket kept for a link that is then revoked: the revoked page, in Spanish.
        page.goto(link["url"])
        wait_for_script(page)
        page.fill('textarea[name="description"]', "Segunda boleta")
        page.fill('textarea[name="reason"]', "Extra")
        page.fill('input[name="directed_by"]', "Sam")
        context.set_offline(True)
        page.click("button[type=submit]")
        page.wait_for_selector("#queue-status.saved")
        client.post(f"/v1/links/{link['token']}/revoke", headers=acme.headers)
        context.set_offline(False)
        wait_for(page, lambda: [k[:8] for k in stored_keys(page)] == ["refused:"])
        page.goto(link["url"])
        page.wait_for_selector("#kept-here:not([hidden])")
        assert "sigue en este teléfono" in page.inner_text("#kept-here")
        assert_no_english(visible_text(page), "revoked link page")
    finally:
        context.close()
    # The plain form (no JavaScript) answers in Spanish too: its errors and its done page.
    other = create_link(client, acme)
    spanish = {"Accept-Language": "es-MX,es;q=0.9"}
    form = {"description": "Zanja", "reason": "Tubería de gas", "directed_by": "Sam",
            "labor[0].trade": "Ayudante", "labor[0].hours": "-2"}
    bad = client.post(f"/c/{other['token']}/tickets", data=form, headers=spanish)
    assert bad.status_code == 400 and "Debe ser 0 o más." in bad.get_data(as_text=True)
    assert_no_english(re.sub(r"<[^>]+>", " ", bad.get_data(as_text=True)), "plain form errors")
    done = client.post(f"/c/{other['token']}/tickets", data={**form, "labor[0].hours": "2"},
                       headers=spanish)
    text = re.sub(r"<[^>]+>", " ", done.get_data(as_text=True))
    assert "Referencia" in text and "0 fotos adjuntas." in text
    assert_no_english(text, "plain form done page")


def test_the_language_switch_and_its_memory(client, acme, live_server, phone):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    assert page.get_attribute("html", "lang") == "en"
    with page.expect_navigation():
        page.click('.lang-switch a[lang="es"]')
    wait_for_script(page)
    assert page.get_attribute("html", "lang") == "es"
    assert page.inner_text("button[type=submit]") == "Enviar boleta"
    page.goto(link["url"])  # remembered on this phone
    wait_for_script(page)
    assert page.inner_text("button[type=submit]") == "Enviar boleta"
    with page.expect_navigation():
        page.click('.lang-switch a[lang="en"]')
    wait_for_script(page)
    assert page.inner_text("button[type=submit]") == "Send ticket"


def test_photos_go_ahead_while_the_crew_keeps_writing(client, acme, live_server, phone, app):
    from models import StagedPhoto

    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    uploads = Uploads(phone)
    add_site_photos(page, 3)
    page.fill('textarea[name="description"]', "Cut and patched slab")  # typing goes on meanwhile

    def staged() -> int:
        with app.app_context():
            return db.session.query(StagedPhoto).count()
    wait_for(page, lambda: staged() == 3)
    page.click("#photo-list li:nth-child(2) button")  # one is dropped before sending
    fill_ticket(page)
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=30_000)
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert ticket.photo_count == 2 and ticket.photos_expected == 2
        assert [p.name for p in sorted(ticket.photos, key=lambda p: p.position)] == \
            ["site-1.jpg", "site-3.jpg"]
    # Each photo went up once (a piece at a time), ahead of the ticket; sending the ticket
    # sent only its text.
    photo_puts = [r for r in uploads.requests if "/photos/" in r.url]
    assert all("/drafts/" in r.url for r in photo_puts) and len(set(uploads.photo_keys())) == 3
    pieces = [(r.url, r.headers.get("content-range")) for r in photo_puts]
    assert len(pieces) == len(set(pieces))
    assert uploads.most_at_once <= 2  # two pieces on their way at most, half a round apart


UNUSABLE_PHOTO = {
    "not an image": (400, {"code": "validation_failed", "message": "the photo could not be used",
                           "details": [{"field": "photo[0].data_url",
                                        "message": "photo 1: not a JPEG, PNG or WebP image"}]}),
    "no room": (409, {"code": "photos_full", "message": "a ticket holds at most 12 photos",
                      "details": [{"field": "photos", "message": "at most 0 more photo(s) fit"}]}),
}


@pytest.mark.parametrize("refusal", sorted(UNUSABLE_PHOTO))
def test_a_photo_the_server_cannot_use_is_named_in_the_tray(client, acme, live_server, phone, app,
                                                            refusal):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    status, error = UNUSABLE_PHOTO[refusal]

    def unusable(route):
        route.fulfill(status=status, content_type="application/json",
                      body=json.dumps({"error": error}))
    phone.route("**/photos/*name=site-2.jpg*", unusable)
    add_site_photos(page, 2)
    fill_ticket(page)
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])", timeout=30_000)
    assert "1 photo could not be used." in page.inner_text("#queue-status")
    with app.app_context():
        (ticket,) = db.session.query(Ticket).all()
        assert ticket.photo_count == 1
