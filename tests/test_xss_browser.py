"""Stored-XSS payloads in every text field show as text, and run nothing, on every page."""
from __future__ import annotations

import re

import pytest

from services.accounts import keys, reviewers
from support.images import data_url, jpeg_bytes, png_bytes

pytestmark = pytest.mark.browser

PAYLOAD = '"><img src=x onerror=alert(1)><script>alert(2)</script>{{7*7}}'


def test_payloads_render_as_text_everywhere(app, client, acme, live_server, tablet):
    with app.app_context():
        reviewers.create_reviewer(acme.company_id, "pm@acme.example", "correct horse battery")
        keys.issue_key(acme.company_id, "key " + PAYLOAD[:80])
    link = client.post("/v1/links", headers=acme.headers, json={
        "project_id": acme.project()["id"], "label": PAYLOAD[:120]}).json
    fields = {"description": "desc " + PAYLOAD, "reason": "reason " + PAYLOAD,
              "directed_by": "dir " + PAYLOAD, "captured_by": "by " + PAYLOAD,
              "labor": [{"trade": "trade " + PAYLOAD[:90], "hours": 1, "rate": 1, "costCode": PAYLOAD[:40]}],
              "equipment": [{"description": "eq " + PAYLOAD, "hours": 1, "rate": 1}],
              "materials": [{"description": "mat " + PAYLOAD, "quantity": 1, "unitCost": 1}],
              "photos": [{"name": "photo " + PAYLOAD, "data_url": data_url(jpeg_bytes())}],
              "signature": {"name": "sig " + PAYLOAD, "role": "role " + PAYLOAD,
                            "image": data_url(png_bytes(), "image/png")}}
    made = client.post(f"/c/{link['token']}/tickets", json=fields)
    assert made.status_code == 200, made.json
    ticket_id = made.json["id"]

    page = tablet.new_page()
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{live_server.url}/login")
    page.fill('input[name="email"]', "pm@acme.example")
    page.fill('input[name="password"]', "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/queue"))
    visited = {}
    for path in ("/queue", f"/tickets/{ticket_id}", "/links", "/keys", link["url"], link["poster_url"]):
        page.goto(path if path.startswith("http") else live_server.url + path)
        text = page.inner_text("body")
        visited[path] = text
        assert page.locator("img[src='x']").count() == 0, path
        assert page.locator("script:not([src])").count() == 0, path
    page.wait_for_timeout(200)
    assert dialogs == []
    ticket_text = visited[f"/tickets/{ticket_id}"]
    for label in ("desc", "reason", "dir", "by", "trade", "eq", "mat", "sig", "role"):
        assert f"{label} \"><img src=x onerror=alert(1)>" in ticket_text, label
    assert "<script>alert(2)</script>{{7*7}}" in ticket_text
    assert '"><img src=x onerror=alert(1)>' in visited["/links"]
    assert "key \"><img src=x" in visited["/keys"]
    assert '"><img src=x onerror=alert(1)>' in visited[link["url"]]
