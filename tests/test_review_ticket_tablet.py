"""The ticket page on a tablet: evidence before the decision, lines to check, the code picker."""
from __future__ import annotations

import re

import pytest

from support.images import data_url, jpeg_bytes, png_bytes
from tests.test_review_pages import new_ticket, sign_in
from tests.test_review_triage import browser_sign_in


def evidence_ticket(client, tenant):
    return new_ticket(client, tenant, photos=[
        {"data_url": data_url(jpeg_bytes()), "name": "trench.jpg", "taken_at": "2026-06-04T03:30:00Z",
         "coords": {"lat": 37.77491, "lng": -122.41941, "accuracy_m": 8}}],
        signature={"name": "Gene Carter", "role": "GC superintendent",
                   "signed_at": "2026-06-04T03:40:00Z", "image": data_url(png_bytes(), "image/png")})


def codes_of(client, tenant, code):
    found = client.get(f"/v1/projects/{tenant.project()['id']}/cost-codes?q={code}",
                       headers=tenant.headers).json
    return {b["cost_type"]: b["id"] for b in found["data"][0]["budget_codes"]}


def test_picker_offers_the_lines_own_code_first_and_another_type_is_not_exact(app, client, acme):
    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme)
    html = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    first_line = html[html.index('name="routes[0]"'):html.index("</select>", html.index('name="routes[0]"'))]
    groups = re.findall(r'<optgroup label="([^"]+)">', first_line)
    assert groups == ["This line&#39;s cost code", "Labor codes", "Other cost types (not exact)"]
    first_option = re.search(r'<optgroup label="This line[^"]*">\s*<option value="\d+"[^>]*>([^<]+)<',
                             first_line)
    assert first_option.group(1).startswith("02-200.L")
    # A labor line put on a materials code is written as chosen but never counts as exact.
    materials = codes_of(client, acme, "02-200")["materials"]
    guess = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["routing"][1]
    refused = client.post(f"/v1/tickets/{ticket['id']}/approve", headers=acme.headers, json={
        "require_exact": True, "routes": {"1": guess["budget_code_id"], "2": materials}})
    assert refused.status_code == 409 and {d["line"] for d in refused.json["error"]["details"]} == {1, 2}
    done = browser.post(f"/tickets/{ticket['id']}/approve", {
        "destination": "change_event", "confirm[1]": str(guess["budget_code_id"]),
        "routes[2]": str(materials)})
    assert done.status_code == 200, done.get_data(as_text=True)
    routing = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["routing"]
    assert routing[2]["budget_code_id"] == materials and routing[2]["exact"] is False
    assert routing[1]["exact"] is False  # 01-500.O is an 'other' code for a labor line


def test_unconfirmed_lines_are_refused_by_the_page(app, client, acme, sandbox_server):
    from tests.test_approval import origin_rows
    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme,
                        labor=[{"trade": "Laborer", "hours": 1, "rate": 50, "costCode": "01-500"}])
    refused = browser.post(f"/tickets/{ticket['id']}/approve", {"destination": "change_event"})
    assert refused.status_code == 422 and "is marked to check" in refused.get_data(as_text=True)
    assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []


def test_amounts_carry_units_currency_and_subtotals(app, client, acme):
    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme, equipment=[{"description": "Mini excavator", "hours": 3, "rate": 95}],
                        materials=[{"description": "Gravel", "quantity": 4, "unitCost": 12.5}])
    html = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    assert "2 worker-h" in html and "$50.00/h" in html and "3 h" in html and "$95.00/h" in html
    assert "$12.50 each" in html
    subtotals = dict(re.findall(
        r'<th colspan="4" scope="row">(\w+) subtotal</th><td class="num">\$([\d,.]+)', html))
    assert subtotals == {"Labor": "160.00", "Equipment": "285.00", "Materials": "50.00"}
    assert "Total (USD)" in html


@pytest.mark.browser
@pytest.mark.parametrize("size", [{"width": 768, "height": 1024}, {"width": 1024, "height": 768}])
def test_evidence_sits_before_the_decision_on_a_tablet(app, client, acme, live_server, chromium, size):
    ticket = evidence_ticket(client, acme)
    context = chromium.new_context(viewport=size, has_touch=True)
    page = context.new_page()
    browser_sign_in(page, live_server, app, acme)
    page.goto(f"{live_server.url}/tickets/{ticket['id']}")
    evidence = page.locator("#evidence").bounding_box()
    approve = page.locator("button.approve").first.bounding_box()
    beside = evidence["x"] >= approve["x"] + approve["width"] - 1
    assert evidence["y"] < approve["y"] or beside
    text = page.inner_text("#evidence")
    assert "Gene Carter" in text and "GC superintendent" in text and "2026-06-03 20:40 PDT" in text
    assert "Sam" in text  # who directed it
    assert "2026-06-03 20:30 PDT · 37.77491, -122.41941 (within 8 m)" in text
    # The photo opens in a viewer on the page.
    url = page.url
    page.click("#evidence a.photo")
    page.wait_for_selector("#photo-viewer[open]")
    page.wait_for_function("() => document.getElementById('photo-viewer-image').naturalWidth > 0")
    assert page.url == url
    page.click("#photo-viewer >> text=Close")
    page.wait_for_selector("#photo-viewer:not([open])", state="attached")
    context.close()


@pytest.mark.browser
def test_a_check_line_blocks_approve_until_confirmed(app, client, acme, live_server, tablet):
    ticket = new_ticket(client, acme)  # line 2 is a guess to check, line 3 has no code
    page = tablet.new_page()
    browser_sign_in(page, live_server, app, acme)
    page.goto(f"{live_server.url}/tickets/{ticket['id']}")
    approve = page.locator("button.approve").first
    assert approve.is_disabled()
    assert "2 lines to check" in page.inner_text("#check-status")
    page.check('input[name="confirm[1]"]')
    assert approve.is_disabled()
    labels = page.locator('select[name="routes[2]"] option').all_inner_texts()
    page.select_option('select[name="routes[2]"]', label=next(o for o in labels if o.startswith("02-200.M")))
    assert page.locator("tr[data-line='2'] .type-warning").is_visible()
    page.select_option('select[name="routes[2]"]', label=next(o for o in labels if o.startswith("02-200.L")))
    assert not page.locator("tr[data-line='2'] .type-warning").is_visible()
    assert approve.is_enabled()
    page.click("text=Approve and write")
    page.wait_for_selector("text=Written to Procore.")
    written = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert [r["budget_code"] for r in written["routing"]] == ["02-200.L", "01-500.O", "02-200.L"]
