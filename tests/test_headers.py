"""Security headers on every page, generated from the URL map."""
from __future__ import annotations

import re

from services.accounts import reviewers
from support.images import data_url, jpeg_bytes, png_bytes


def test_every_html_page_has_a_strict_policy(app, client, acme):
    with app.app_context():
        reviewers.create_reviewer(acme.company_id, "pm@acme.example", "correct horse battery")
    link = client.post("/v1/links", headers=acme.headers, json={"project_id": acme.project()["id"]}).json
    ticket = client.post(f"/c/{link['token']}/tickets", json={
        "description": "d", "reason": "r", "directed_by": "x",
        "photos": [{"data_url": data_url(jpeg_bytes())}],
        "signature": {"image": data_url(png_bytes(), "image/png")}}).json
    sheet = client.post("/v1/rate-sheets", headers=acme.headers, json={
        "name": "Rates", "effective_from": "2026-01-01",
        "labor": [{"classification": "Foreman", "st": 100}]}).json
    values = {"ticket_id": ticket["id"], "token": link["token"], "position": "0", "kind": "labor",
              "filename": "app.css", "sheet_id": str(sheet["id"]), "photo_id": "1",
              "project_id": acme.project()["id"]}
    page = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    client.post("/login", data={"csrf_token": token, "email": "pm@acme.example",
                                "password": "correct horse battery"})
    checked = 0
    for rule in app.url_map.iter_rules():
        if "GET" not in rule.methods or rule.rule.startswith("/v1/"):
            continue
        path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", lambda m: values[m.group(1)], rule.rule)
        response = client.get(path)
        assert response.headers.get("X-Content-Type-Options") == "nosniff", path
        if response.mimetype == "text/html":
            policy = response.headers.get("Content-Security-Policy", "")
            assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy, path
            assert "frame-ancestors 'none'" in policy, path
            checked += 1
        if rule.rule.startswith(("/c/", "/s/")):
            assert response.headers.get("Referrer-Policy") == "no-referrer", path
        response.close()
    assert checked >= 8
    api = client.get("/v1/me", headers=acme.headers)
    assert api.headers["X-Content-Type-Options"] == "nosniff"
