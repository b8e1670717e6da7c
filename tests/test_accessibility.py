"""axe-core on the review pages at tablet size: no serious or critical violation."""
from __future__ import annotations

import pytest

from tests.pile import seed_pile
from tests.plugins.browser import AXE
from tests.test_review_pages import new_ticket
from tests.test_review_ticket_tablet import evidence_ticket
from tests.test_review_triage import browser_sign_in

pytestmark = pytest.mark.browser



class OpenRequests:
    """The requests a page has started and not yet seen answered (or failed)."""

    def __init__(self, page) -> None:
        self.count = 0
        page.on("request", self._start)
        page.on("requestfinished", self._end)
        page.on("requestfailed", self._end)

    def _start(self, _request) -> None:
        self.count += 1

    def _end(self, _request) -> None:
        self.count -= 1


def settle(page, requests: OpenRequests) -> None:
    """Wait for the load event and for every request the page has made to be answered. (The
    pages fetch nothing on a timer sooner than the queue's 20 s refresh, so this is all that
    networkidle waited for, without its extra half second of silence per page.)"""
    page.wait_for_load_state("load")
    for _ in range(500):
        if requests.count == 0:
            return
        page.wait_for_timeout(20)
    raise AssertionError(f"{requests.count} request(s) still open after 10 s")


def serious_violations(page, impacts: tuple[str, ...] = ("serious", "critical")) -> list[str]:
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("""async (impacts) => {
        const r = await axe.run(document, {resultTypes: ['violations']});
        return r.violations.filter(v => impacts.includes(v.impact))
            .map(v => v.id + ': ' + v.help + ' @ '
                      + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | '));
    }""", list(impacts))
    return result


def test_the_admin_pages_have_no_violations_at_all(app, client, acme, live_server, axe_tablet):
    client.post("/v1/links", headers=acme.headers, json={"project_id": acme.project()["id"],
                                                         "label": "North trailer"})
    client.post("/v1/webhooks", headers=acme.headers, json={"url": "https://erp.example.com/in"})
    client.post("/v1/share-links", headers=acme.headers, json={"sub": "North trailer"})
    new_ticket(client, acme)  # a delivery waiting on the keys page
    page = axe_tablet.new_page()
    requests = OpenRequests(page)
    browser_sign_in(page, live_server, app, acme)
    found = {}
    for path in ("/links", "/keys", "/reviewers"):
        page.goto(f"{live_server.url}{path}")
        settle(page, requests)
        found[path] = serious_violations(page, ("minor", "moderate", "serious", "critical"))
    assert found == {path: [] for path in found}


def test_review_pages_have_no_serious_violations(app, client, acme, live_server, axe_tablet):
    seed_pile(app, acme, count=30)
    ticket = evidence_ticket(client, acme)
    client.post("/v1/links", headers=acme.headers, json={"project_id": acme.project()["id"],
                                                         "label": "North trailer"})
    refused = new_ticket(client, acme)
    written = new_ticket(client, acme, labor=[{"trade": "Laborer", "hours": 2, "rate": 50,
                                               "costCode": "02-200"}])
    assert client.post(f"/v1/tickets/{written['id']}/approve", headers=acme.headers,
                       json={}).status_code == 200
    assert client.post(f"/v1/tickets/{written['id']}/sync", headers=acme.headers).status_code \
        == 200
    page = axe_tablet.new_page()
    requests = OpenRequests(page)
    browser_sign_in(page, live_server, app, acme)
    found = {}
    for path in ("/queue", f"/tickets/{ticket['id']}", f"/tickets/{refused['id']}", "/links",
                 "/keys", "/queue?status=all&sort=oldest", f"/tickets/{written['id']}",
                 "/queue?not_on_change_order=1"):
        page.goto(f"{live_server.url}{path}")
        settle(page, requests)
        found[path] = serious_violations(page)
    assert found == {path: [] for path in found}
    # axe is really looking: a planted image without a text alternative is found.
    page.evaluate("document.querySelector('main').appendChild(document.createElement('img')).src = '/x.png'")
    assert any(v.startswith("image-alt") for v in serious_violations(page))
