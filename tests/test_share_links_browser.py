"""A sub's live log on a phone in Chromium: axe-core finds no serious violation in English or
Spanish, and the office pages back through the log and downloads its CSV and a document."""
from __future__ import annotations

import pytest

from models import short_reference
from tests.test_accessibility import AXE, OpenRequests, serious_violations, settle
from tests.test_approval import act, create

pytestmark = pytest.mark.browser


@pytest.fixture
def phone(chromium):
    """A phone-sized context that lets the test inject axe past the Content-Security-Policy."""
    if not AXE.exists():
        pytest.fail("axe-core is not installed; `make axe` installs it")
    context = chromium.new_context(viewport={"width": 360, "height": 740}, has_touch=True,
                                   bypass_csp=True, accept_downloads=True, locale="es-MX")
    yield context
    context.close()


def test_the_sub_reads_its_log_on_a_phone(app, client, acme, live_server, phone):
    sent_back = create(client, acme, sub="Apex Concrete")
    act(client, acme, sent_back["id"], "reject", {"reason": "Faltan las horas del viernes"})
    for i in range(26):
        client.post("/v1/tickets", headers=acme.headers, json={
            "project_id": acme.project()["id"], "description": f"Trabajo {i}", "reason": "r",
            "directed_by": "d", "sub": "Apex Concrete",
            "labor": [{"trade": "Laborer", "hours": 1, "rate": 50, "costCode": "02-200"}]})
    made = client.post("/v1/share-links", headers=acme.headers, json={"sub": "Apex Concrete"}).json
    url = live_server.url + "/l/" + made["url"].rsplit("/l/", 1)[1]
    page = phone.new_page()
    requests = OpenRequests(page)
    page.goto(url)
    settle(page, requests)
    assert page.locator("html").get_attribute("lang") == "es"
    assert page.get_by_role("heading", level=1).inner_text() == "Boletas de Apex Concrete"
    assert serious_violations(page) == []
    assert page.locator("article.share-ticket").count() == 25
    # Nothing is wider than the phone.
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    page.get_by_role("link", name="Más antiguas").click()
    settle(page, requests)
    older = page.locator("article.share-ticket")
    assert older.count() == 2
    card = page.locator(f"#ticket-{short_reference(sent_back['id'])}")
    assert "Faltan las horas del viernes" in card.inner_text() and "Devuelto" in card.inner_text()
    assert serious_violations(page) == []
    with page.expect_download() as csv_download:
        page.get_by_role("link", name="Descargar todas como hoja de cálculo (CSV)").click()
    assert csv_download.value.suggested_filename.endswith(".csv")
    with page.expect_download() as document:
        card.get_by_role("link").click()
    assert document.value.suggested_filename == f"ticket-{short_reference(sent_back['id'])}.pdf"
    # In English once the office switches.
    page.get_by_role("link", name="English").click()
    settle(page, requests)
    assert page.get_by_role("heading", level=1).inner_text() == "Tickets of Apex Concrete"
    assert serious_violations(page) == []
