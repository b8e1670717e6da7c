"""The review pages over HTTP: sign-in, CSRF, queue, ticket actions, links, keys, headers."""
from __future__ import annotations

import datetime as dt
import re

import time_machine

from services.accounts import reviewers

PASSWORD = "correct horse battery"


def add_reviewer(app, tenant, email="pm@acme.example"):
    with app.app_context():
        reviewers.create_reviewer(tenant.company_id, email, PASSWORD)
    return email


def csrf_token(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


class Browser:
    """A signed-in test client that sends the CSRF token like the pages do."""

    def __init__(self, client, token):
        self.client, self.token = client, token

    def get(self, path, **kwargs):
        return self.client.get(path, **kwargs)

    def post(self, path, data=None, htmx=False):
        headers = {"HX-Request": "true"} if htmx else {}
        return self.client.post(path, data={"csrf_token": self.token, **(data or {})}, headers=headers)


def sign_in(app, client, tenant, email=None) -> Browser:
    email = email or add_reviewer(app, tenant)
    page = client.get("/login").get_data(as_text=True)
    response = client.post("/login", data={"csrf_token": csrf_token(page), "email": email,
                                           "password": PASSWORD})
    assert response.status_code == 302, response.get_data(as_text=True)
    queue = client.get("/queue").get_data(as_text=True)
    return Browser(client, csrf_token(queue))


def new_ticket(client, tenant, **extra):
    body = {"project_id": tenant.project()["id"], "description": "Moved trench 3 m east",
            "reason": "Gas line", "directed_by": "Sam", "labor": [
                {"trade": "Laborer", "hours": 2, "rate": 50, "costCode": "02-200"},
                {"trade": "Laborer", "hours": 1, "rate": 50, "costCode": "01-500"},
                {"trade": "Mystery", "hours": 1, "rate": 10}]}
    body.update(extra)
    made = client.post("/v1/tickets", headers=tenant.headers, json=body).json
    # The API's read waits for the project's codes; a page would give up after PAGE_WAIT_S
    # on a busy machine and show the lines as pending, which is not what these tests are about.
    client.get(f"/v1/tickets/{made['id']}", headers=tenant.headers)
    return made


def test_pages_need_a_session(client):
    for path in ("/queue", "/keys", "/links"):
        response = client.get(path)
        assert response.status_code == 302 and "/login" in response.headers["Location"]
    htmx = client.get("/queue", headers={"HX-Request": "true"})
    assert htmx.status_code == 401 and htmx.headers["HX-Redirect"].startswith("/login")


def test_login_failures_are_throttled_and_cookie_flags(app, client, acme):
    email = add_reviewer(app, acme)
    with time_machine.travel(dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1), tick=False):
        token = csrf_token(client.get("/login").get_data(as_text=True))
        for _ in range(5):
            bad = client.post("/login", data={"csrf_token": token, "email": email, "password": "nope"})
            assert bad.status_code == 401
        throttled = client.post("/login", data={"csrf_token": token, "email": email, "password": PASSWORD})
        assert throttled.status_code == 429
    with time_machine.travel(dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=2), tick=False):
        sign_in_flags(app, email)  # a day later the address may sign in again


def sign_in_flags(app, email):
    """Cookie flags: Secure only over HTTPS, always HttpOnly and SameSite=Lax."""
    secure = app.test_client()
    token = csrf_token(secure.get("/login", base_url="https://localhost").get_data(as_text=True))
    ok = secure.post("/login", base_url="https://localhost",
                     headers={"Referer": "https://localhost/login"},
                     data={"csrf_token": token, "email": email, "password": PASSWORD})
    assert ok.status_code == 302
    cookie = ok.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" in cookie
    plain = app.test_client()
    token = csrf_token(plain.get("/login").get_data(as_text=True))
    cookie = plain.post("/login", data={"csrf_token": token, "email": email,
                                        "password": PASSWORD}).headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "Secure" not in cookie


def test_forms_and_htmx_posts_need_the_csrf_token(app, client, acme):
    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme)
    missing = client.post(f"/tickets/{ticket['id']}/reject")
    assert missing.status_code == 400
    forged = client.post(f"/tickets/{ticket['id']}/reject", data={"csrf_token": "forged"})
    assert forged.status_code == 400
    header = client.post(f"/tickets/{ticket['id']}/reject", headers={"X-CSRFToken": browser.token},
                         data={"reason_text": "Duplicate"})
    assert header.status_code == 200
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["status"] == "rejected"


def test_queue_lists_filters_searches_and_returns_fragments(app, client, acme):
    browser = sign_in(app, client, acme)
    first = new_ticket(client, acme, description="Patched slab at grid C4")
    new_ticket(client, acme, description="Moved conduit run", project_id=acme.project(False)["id"])
    page = browser.get("/queue")
    html = page.get_data(as_text=True)
    assert page.headers["Vary"] == "HX-Request" or "HX-Request" in page.headers["Vary"]
    assert "<html" in html and "Needs review (2)" in html
    assert "Patched slab at grid C4" in html and "Moved conduit run" in html
    assert 'class="badge review">2<' in html  # two lines of the first ticket need a person
    fragment = browser.get("/queue?q=SLAB", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "<html" not in fragment and 'id="queue-rows"' in fragment
    assert "Patched slab" in fragment and "Moved conduit" not in fragment
    by_project = browser.get(f"/queue?project_id={acme.project(False)['id']}").get_data(as_text=True)
    assert "Moved conduit run" in by_project and "Patched slab" not in by_project
    browser.post(f"/tickets/{first['id']}/reject", {"reason_text": "Duplicate"})
    written_tab = browser.get("/queue?status=rejected").get_data(as_text=True)
    assert "Patched slab" in written_tab and "Rejected (1)" in written_tab


def test_ticket_page_approve_with_override_same_as_api(app, client, acme, rival):
    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme)
    page = browser.get(f"/tickets/{ticket['id']}")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and "Where the money lands" in html
    assert html.count('name="routes[') == 3
    # The third line has no budget code: approve refuses exactly as the API does.
    refused = browser.post(f"/tickets/{ticket['id']}/approve", {"destination": "change_event"}, htmx=True)
    assert refused.status_code == 422
    assert re.search(r"Line 3 \(Mystery[^)]*\) has no budget code yet", refused.get_data(as_text=True))
    api_refusal = client.post(f"/v1/tickets/{ticket['id']}/approve", headers=acme.headers, json={})
    assert api_refusal.status_code == 409 and api_refusal.json["error"]["code"] == "lines_need_review"
    # Pick a budget code for line 2 on the page: it is sent as routes.
    codes = client.get(f"/v1/projects/{acme.project()['id']}/cost-codes?q=02-200", headers=acme.headers).json
    labor_code = next(b["id"] for b in codes["data"][0]["budget_codes"] if b["cost_type"] == "labor")
    # Line 2's guess is confirmed, line 3 gets a code: every line to check is decided.
    guess = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["routing"][1]
    done = browser.post(f"/tickets/{ticket['id']}/approve", {
        "destination": "change_event", "confirm[1]": str(guess["budget_code_id"]),
        "routes[2]": str(labor_code)}, htmx=True)
    assert done.status_code == 200, done.get_data(as_text=True)
    assert "Written to Procore." in done.get_data(as_text=True)
    written = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert written["status"] == "written" and written["approved_by"] == "pm@acme.example"
    assert written["decisions"][-1]["by"] == "pm@acme.example"
    assert written["routing"][2]["budget_code_id"] == labor_code and written["routing"][2]["exact"]
    assert written["external"]["url"] in done.get_data(as_text=True)
    again = client.post(f"/v1/tickets/{ticket['id']}/approve", headers=acme.headers, json={}).json
    assert again["already"] is True


def test_create_missing_budget_code_from_the_page(app, client, acme):
    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme)
    html = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    assert "Create labor budget code" in html  # 01-500 has no labor code in the demo data
    cost_code_id = re.search(r'name="cost_code_item_id" value="(\d+)"', html).group(1)
    made = browser.post(f"/tickets/{ticket['id']}/budget-codes",
                        {"line": "1", "cost_code_item_id": cost_code_id, "cost_type": "labor"}, htmx=True)
    text = made.get_data(as_text=True)
    assert made.status_code == 200 and "01-500.L is ready" in text
    assert "it is selected for line 2." in text  # the table numbers lines from 1
    selected = re.search(r'<option value="(\d+)" data-cost-type="labor"[^>]* selected>01-500.L', text)
    assert selected is not None
    line = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["routing"][1]
    assert line["budget_code"] == "01-500.L" and line["exact"] is True


def test_reject_and_restore_from_the_page(app, client, acme):
    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme)
    no_reason = browser.post(f"/tickets/{ticket['id']}/reject", htmx=True)
    assert no_reason.status_code == 422 and "Choose a reason or type one" in no_reason.get_data(as_text=True)
    reason = {"reason_choice": "We did not direct this work", "reason_text": "ask Sam"}
    rejected = browser.post(f"/tickets/{ticket['id']}/reject", reason, htmx=True).get_data(as_text=True)
    assert "Rejected and sent back" in rejected and "Restore to the queue" in rejected
    assert "“We did not direct this work: ask Sam”" in rejected  # in the history
    again = browser.post(f"/tickets/{ticket['id']}/reject", reason, htmx=True)
    assert again.status_code == 422 and "already rejected" in again.get_data(as_text=True).lower()
    restored = browser.post(f"/tickets/{ticket['id']}/restore", htmx=True).get_data(as_text=True)
    assert "Restored to the queue." in restored
    decisions = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["decisions"]
    assert [(d["action"], d["by"], d["reason"]) for d in decisions] == [
        ("rejected", "pm@acme.example", "We did not direct this work: ask Sam"),
        ("restored", "pm@acme.example", None)]


def test_other_companys_ticket_page_is_a_plain_404(app, client, acme, rival):
    theirs = new_ticket(client, rival)
    browser = sign_in(app, client, acme)
    foreign = browser.get(f"/tickets/{theirs['id']}")
    missing = browser.get("/tickets/00000000-0000-4000-8000-000000000000")
    assert foreign.status_code == missing.status_code == 404
    assert foreign.get_data() == missing.get_data()
    assert browser.post(f"/tickets/{theirs['id']}/approve").status_code == 404
    assert browser.get(f"/tickets/{theirs['id']}/photos/0.jpg").status_code == 404


def test_keys_page_creates_shows_once_and_revokes(app, client, acme):
    with app.app_context():
        reviewers.create_reviewer(acme.company_id, "admin@acme.example", PASSWORD, is_admin=True)
    browser = sign_in(app, client, acme, email="admin@acme.example")
    created = browser.post("/keys", {"name": "estimating export"}, htmx=True)
    html = created.get_data(as_text=True)
    secret = re.search(r'<code id="new-key">(ewt_[A-Za-z0-9_-]{43})</code>', html).group(1)
    assert created.headers["Cache-Control"] == "no-store"
    assert client.get("/v1/me", headers={"X-API-Key": secret}).status_code == 200
    listing = browser.get("/keys").get_data(as_text=True)
    assert secret not in listing and secret[:12] in listing and "estimating export" in listing
    browser.post(f"/keys/{secret[:12]}/revoke", htmx=True)
    assert client.get("/v1/me", headers={"X-API-Key": secret}).status_code == 401
    assert "revoked" in browser.get("/keys").get_data(as_text=True)


def test_links_page_creates_and_revokes(app, client, acme):
    browser = sign_in(app, client, acme)
    browser.post("/links", {"project_id": acme.project()["id"], "label": "East gate"}, htmx=True)
    link = client.get("/v1/links", headers=acme.headers).json["data"][0]
    html = browser.get("/links").get_data(as_text=True)
    assert "East gate" in html and link["url"] in html and link["poster_url"] in html
    assert link["qr_svg_url"] in html and "sms:?&amp;body=" in html
    browser.post(f"/links/{link['token']}/revoke", htmx=True)
    assert client.get(link["url"]).status_code == 410


def test_crew_text_is_escaped_and_pages_carry_a_strict_csp(app, client, acme):
    browser = sign_in(app, client, acme)
    payload = '<img src=x onerror=alert(1)>'
    ticket = new_ticket(client, acme, description=payload, reason="<script>alert(2)</script>",
                        directed_by="{{ 7*7 }}")
    for path in ("/queue", f"/tickets/{ticket['id']}"):
        response = browser.get(path)
        html = response.get_data(as_text=True)
        assert payload not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
        assert "<script>alert(2)</script>" not in html
        assert "49" not in re.findall(r"Directed by</dt><dd>([^<]*)", html)
        policy = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
        assert "frame-ancestors 'none'" in policy
        assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_the_api_neither_reads_nor_sets_the_review_session(app, client, tenant):
    browser = sign_in(app, client, tenant)
    assert browser.get("/queue").status_code == 200
    # The signed-in browser's cookie is no credential for /v1 ...
    refused = client.get("/v1/me")
    assert refused.status_code == 401
    assert refused.json["error"]["code"] == "api_key_missing"
    # ... and no /v1 answer sets or refreshes a cookie, with or without a key.
    for answer in (refused, client.get("/v1/me", headers=tenant.headers),
                   client.get("/v1/tickets", headers=tenant.headers)):
        assert "Set-Cookie" not in answer.headers
    assert browser.get("/queue").status_code == 200


def test_ticket_page_shows_the_capture_time_on_the_jobsite_clock(app, client, acme):
    from models import Ticket, db

    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme)
    with app.app_context():
        db.session.get(Ticket, ticket["id"]).captured_at = dt.datetime(
            2026, 6, 4, 3, 30, tzinfo=dt.timezone.utc)
        db.session.commit()
    html = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    # The seeded projects are in California: 03:30 UTC is 20:30 the evening before.
    assert "<dt>Recorded</dt><dd>2026-06-03 20:30 PDT</dd>" in html
