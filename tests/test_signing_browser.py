"""Signing from a link on a phone-sized screen in headless Chromium, the crew phone's qualifier and
its "send it to be signed", and axe on the signing pages."""
from __future__ import annotations

import pytest

from models import Ticket, db
from support.images import data_url, jpeg_bytes
from tests.test_accessibility import AXE, OpenRequests, serious_violations, settle
from tests.test_approval import act, create
from tests.test_capture_browser import (
    assert_no_english,
    create_link,
    fill_ticket,
    open_capture,
    sign,
    visible_text,
)

pytestmark = pytest.mark.browser

QUALIFIERS = (("verified", "Time and materials verified", None),
              ("verified_scope_disputed", "Time and materials verified; scope disputed", None),
              ("not_verified", "Not verified", "Crew size not seen on site"))


def signing_url(client, tenant, ticket_id: str, **body) -> str:
    answer = client.post(f"/v1/tickets/{ticket_id}/signature-requests", headers=tenant.headers,
                         json={"name": "Sam Ortiz", "role": "GC superintendent",
                               "phone": "+15551234567", **body})
    assert answer.status_code == 200, answer.json
    return answer.json["url"]


def signature_of(app, ticket_id: str) -> dict | None:
    with app.app_context():
        db.session.expire_all()
        return db.session.get(Ticket, ticket_id).signature


def tap_targets_too_small(page) -> list[str]:
    """Buttons, links, radios' labels and fields smaller than 44 CSS px in either direction."""
    return page.evaluate("""() => [...document.querySelectorAll(
        'button, a.button, .lang-switch a, label.choice, '
        + 'input:not([type=hidden]):not([type=radio]), textarea')]
        .filter(e => e.offsetParent !== null)
        .filter(e => { const r = e.getBoundingClientRect(); return r.height < 44 || r.width < 44; })
        .map(e => e.outerHTML.slice(0, 80))""")


@pytest.mark.parametrize("code,label,reason", QUALIFIERS)
def test_a_signer_signs_on_a_phone_with_each_qualifier(app, client, acme, live_server, phone,
                                                       code, label, reason):
    ticket = create(client, acme, photos=[{"name": "slab.jpg", "data_url": data_url(jpeg_bytes())}])
    page = phone.new_page()
    page.goto(signing_url(client, acme, ticket["id"]))
    page.wait_for_function("() => document.documentElement.classList.contains('js')")
    assert page.inner_text(".work") == ticket["description"]
    page.locator(".sign-photos img").scroll_into_view_if_needed()  # loaded lazily
    page.wait_for_function("() => { const i = document.querySelector('.sign-photos img');"
                           " return i.complete && i.naturalWidth > 0; }")
    assert tap_targets_too_small(page) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= 360  # no sideways scrolling
    # Sending without a drawing or a choice says so and sends nothing.
    page.click("button[type=submit]")
    assert page.inner_text("#image-error") == "Please sign in the box."
    assert page.inner_text("#qualifier-error") == "Please choose one."
    page.get_by_label(label, exact=True).check()
    if reason:
        page.click("button[type=submit]")
        assert page.inner_text("#reason-error") == "Please say why it is not verified."
        page.fill('textarea[name="qualifier_reason"]', reason)
    page.fill('input[name="role"]', "Superintendent")
    sign(page)
    page.click("button[type=submit]")
    page.wait_for_selector("#signed")
    assert label in page.inner_text("#signed")
    stored = signature_of(app, ticket["id"])
    assert stored["qualifier"] == code and stored["qualifier_reason"] == reason
    assert stored["signed_via"] == "signing_link" and stored["role"] == "Superintendent"
    assert "Mobile" in stored["user_agent"] or "Chrome" in stored["user_agent"]
    assert stored["ip_address"] == "127.0.0.1" and len(stored["content_sha256"]) == 64


def test_the_crew_phone_signs_with_a_qualifier_and_sends_another_to_be_signed(
        app, client, acme, live_server, phone):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    fill_ticket(page)
    sign(page)
    page.get_by_label("Not verified", exact=True).check()
    page.click("button[type=submit]")
    assert page.inner_text('[data-error-for="signature.qualifier_reason"]') == \
        "Please say why it is not verified."
    page.fill('input[name="signature.qualifier_reason"]', "Hours not seen")
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])")
    with app.app_context():
        first = db.session.scalars(db.select(Ticket)).one()
        assert first.signature["qualifier"] == "not_verified"
        assert first.signature["qualifier_reason"] == "Hours not seen"
        assert first.signature["signed_via"] == "crew_phone"

    # A second ticket, unsigned: the super isn't here, so the crew sends it to him.
    page.click("#done [data-record-another]")
    page.wait_for_selector("#ticket-form:not([hidden])")
    fill_ticket(page)
    page.fill('textarea[name="description"]', "Patched the slab again")
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])")
    item = page.locator("#my-tickets-list li", has_text="Patched the slab again")
    item.get_by_role("button", name="Send it to be signed").click()
    page.fill('#sign-request-form input[name="name"]', "Sam Ortiz")
    page.fill('#sign-request-form input[name="phone"]', "+1 555 123 4567")
    page.click("#sign-request-send")
    page.wait_for_selector("#sign-request-result:not([hidden])")
    url = page.input_value("#sign-request-url")
    assert "/s/" in url
    assert page.get_attribute("#sign-request-sms", "href").startswith("sms:+15551234567?&body=")
    with app.app_context():
        second = db.session.scalars(db.select(Ticket).where(
            Ticket.description == "Patched the slab again")).one()
    signer = phone.new_page()
    signer.goto(url)
    signer.get_by_label("Time and materials verified", exact=True).check()
    sign(signer)
    signer.click("button[type=submit]")
    signer.wait_for_selector("#signed")
    assert signature_of(app, second.id)["qualifier"] == "verified"


def test_the_crew_is_told_plainly_when_its_ticket_went_on_before_the_signing_link(
        app, client, acme, live_server, phone):
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    fill_ticket(page)
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])")
    with app.app_context():
        ticket_id = db.session.scalars(db.select(Ticket.id)).one()
    assert act(client, acme, ticket_id, "approve", {}).status_code == 200  # the office was quicker
    page.locator("#my-tickets-list li").get_by_role("button", name="Send it to be signed").click()
    page.fill('#sign-request-form input[name="name"]', "Sam Ortiz")
    page.fill('#sign-request-form input[name="phone"]', "+1 555 123 4567")
    page.click("#sign-request-send")
    page.wait_for_function("() => document.getElementById('sign-request-error').textContent")
    assert page.inner_text("#sign-request-error") == \
        "This ticket was already sent on, so it can no longer be signed."
    assert page.is_hidden("#sign-request-result")


def test_the_crew_asks_only_for_its_own_tickets(app, client, acme, rival):
    link = create_link(client, acme)
    sent = client.post(f"/c/{link['token']}/tickets", json={
        "client_ref": "phone-ref-0001", "description": "d", "reason": "r", "directed_by": "x"})
    assert sent.status_code == 200
    other = create(client, acme)  # a ticket of the same company, not sent through this link
    with app.app_context():
        other_ref = db.session.get(Ticket, other["id"]).client_ref
    for ref in ("phone-ref-0002", other_ref or "none-here", None):
        refused = client.post(f"/c/{link['token']}/signature-requests",
                              json={"client_ref": ref, "name": "Sam", "phone": "+15551234567"})
        assert refused.status_code == 404 and refused.json["error"]["code"] == "ticket_not_found"
    made = client.post(f"/c/{link['token']}/signature-requests",
                       json={"client_ref": "phone-ref-0001", "name": "Sam", "phone": "+15551234567"})
    assert made.status_code == 200 and "/s/" in made.json["url"] and made.json["emailed"] is False
    mine = client.post(f"/c/{link['token']}/mine", json={"client_refs": ["phone-ref-0001"]}).json
    assert mine["data"][0]["awaiting_signature"] is True
    client.post(f"/v1/links/{link['token']}/revoke", headers=acme.headers)
    gone = client.post(f"/c/{link['token']}/signature-requests",
                       json={"client_ref": "phone-ref-0001", "name": "Sam", "phone": "+15551234567"})
    assert gone.status_code == 410


def test_signing_pages_have_no_serious_violations(app, client, acme, live_server, chromium):
    if not AXE.exists():
        pytest.fail("axe-core is not installed; `make axe` installs it")
    context = chromium.new_context(viewport={"width": 360, "height": 740}, is_mobile=True,
                                   has_touch=True, bypass_csp=True)
    try:
        ticket = create(client, acme, description="Se movió la zanja 3 m", reason="Línea de gas",
                        directed_by="Sam Ortiz", captured_by="Lee Park",
                        labor=[{"trade": "Ayudante", "hours": 8, "workers": 3, "rate": 55.5}],
                        equipment=[{"description": "Miniexcavadora", "hours": 4, "rate": 95}],
                        materials=[{"description": "Grava", "quantity": 3, "unitCost": 41.25}],
                        photos=[{"name": "losa.jpg", "data_url": data_url(jpeg_bytes())}])
        page = context.new_page()
        requests = OpenRequests(page)
        found = {}
        for language in ("en", "es"):
            url = signing_url(client, acme, ticket["id"], language=language)
            page.goto(url)
            settle(page, requests)
            found[f"page {language}"] = serious_violations(page)
        assert_no_english(visible_text(page), "signing page")
        page.goto(live_server.url + "/s/" + "A" * 43)
        found["unknown"] = serious_violations(page)
        page.goto(url)
        page.get_by_label("Tiempo y materiales verificados", exact=True).check()
        sign(page)
        page.click("button[type=submit]")
        page.wait_for_selector("#signed")
        found["signed"] = serious_violations(page)
        assert_no_english(visible_text(page), "signed page")
        assert found == {name: [] for name in found}
    finally:
        context.close()


def test_the_crew_is_told_plainly_when_its_ticket_has_enough_signing_links(
        app, client, acme, live_server, phone):
    app.config["CAPTURE_OPEN_SIGNATURE_REQUESTS"] = 0  # as if three were already waiting
    link = create_link(client, acme)
    page = open_capture(phone, link["url"])
    fill_ticket(page)
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])")
    page.locator("#my-tickets-list li").get_by_role("button", name="Send it to be signed").click()
    page.fill('#sign-request-form input[name="name"]', "Sam Ortiz")
    page.fill('#sign-request-form input[name="phone"]', "+1 555 123 4567")
    page.click("#sign-request-send")
    page.wait_for_function("() => document.getElementById('sign-request-error').textContent")
    assert page.inner_text("#sign-request-error") == ("This ticket already has signing links "
                                                      "waiting. Send one you made, or ask the "
                                                      "project manager.")
    assert page.is_hidden("#sign-request-result")
