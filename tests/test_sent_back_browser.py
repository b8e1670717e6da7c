"""A ticket sent back with a reason shows on the phone that sent it, and is corrected there."""
from __future__ import annotations

import pytest

from tests.test_capture_browser import create_link, fill_ticket, open_capture

pytestmark = pytest.mark.browser


def test_reason_reaches_the_phone_and_the_crew_resends_the_same_ticket(client, acme, live_server,
                                                                        phone, chromium):
    link = create_link(client, acme)
    page = open_capture(phone, link["urls"]["qr"])
    fill_ticket(page)
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])")
    reference = page.inner_text("#done-reference")
    ticket = next(t for t in client.get("/v1/tickets", headers=acme.headers).json["data"]
                  if t["description"].startswith("Cut and patched slab"))
    client.post(f"/v1/tickets/{ticket['id']}/reject", headers=acme.headers,
                json={"reason": "Hours do not match the daily report"})
    # The phone that sent it sees it sent back with the reason.
    page = open_capture(phone, link["urls"]["qr"])
    item = page.locator(f"#my-tickets li[data-reference='{reference}']")
    item.wait_for()
    assert "sent back: Hours do not match the daily report" in item.inner_text()
    # Someone else with the same link sees nothing of it.
    other_phone = chromium.new_context(viewport={"width": 360, "height": 740}, is_mobile=True,
                                       has_touch=True)
    other = open_capture(other_phone, link["urls"]["qr"])
    other.wait_for_load_state("networkidle")
    assert other.locator("#my-tickets li").count() == 0 and other.locator("#my-tickets").is_hidden()
    other_phone.close()
    # Correct it and send it again: the same ticket, back in the queue, its history kept.
    item.locator("text=Correct and send again").click()
    assert page.input_value('input[name="labor[0].hours"]') == "3"
    page.fill('input[name="labor[0].hours"]', "2")
    page.click("button[type=submit]")
    page.wait_for_selector("#done:not([hidden])")
    assert page.inner_text("#done-reference") == reference
    again = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert again["status"] == "submitted" and again["labor"][0]["hours"] == 2
    assert [(d["action"], d["reason"]) for d in again["decisions"]] == [
        ("rejected", "Hours do not match the daily report"), ("resubmitted", "version 2")]
    assert len([t for t in client.get("/v1/tickets", headers=acme.headers).json["data"]
                if t["description"].startswith("Cut and patched slab")]) == 1
    page = open_capture(phone, link["urls"]["qr"])
    page.locator(f"#my-tickets li[data-reference='{reference}']").wait_for()
    assert "with the project manager" in page.inner_text("#my-tickets")
