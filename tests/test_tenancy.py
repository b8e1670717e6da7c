"""Tenancy, generated from the URL map: another company's ids and tokens look exactly missing."""
from __future__ import annotations

import re
import uuid

import pytest

from services.accounts import reviewers
from support.images import data_url, jpeg_bytes, png_bytes

PASSWORD = "correct horse battery"

# Capture, signing, share and sign-in-link pages are public: the token in their URL is the credential,
# whoever holds it.
PUBLIC_PREFIXES = ("/c/", "/s/", "/l/", "/static/", "/login/link/",
                   "/digest/stop/")  # a stop link is its own credential, like a signing link


def owned_resources(client, owner) -> dict[str, str]:
    """Resources of the owning company, keyed by URL variable name."""
    endpoint = client.post("/v1/webhooks", headers=owner.headers,
                           json={"url": "https://erp.example.com/in"}).json
    ticket = client.post("/v1/tickets", headers=owner.headers, json={
        "project_id": owner.project()["id"], "description": "Owner's ticket", "reason": "r",
        "directed_by": "d", "labor": [{"trade": "Laborer", "hours": 1, "rate": 1, "costCode": "02-200"}],
        "photos": [{"data_url": data_url(jpeg_bytes())}]}).json
    # Signed from a signing link, so the ticket has both a signature and a signature request.
    asked = client.post(f"/v1/tickets/{ticket['id']}/signature-requests", headers=owner.headers,
                        json={"name": "S", "phone": "+15551234567"}).json
    path = "/s/" + asked["url"].rsplit("/s/", 1)[1]
    digest = re.search(r'name="content_sha256" value="([0-9a-f]{64})"',
                       client.get(path).get_data(as_text=True)).group(1)
    client.post(path, data={"content_sha256": digest, "name": "S", "qualifier": "verified",
                            "image": data_url(png_bytes(), "image/png")})
    link = client.post("/v1/links", headers=owner.headers, json={"project_id": owner.project()["id"]}).json
    with client.application.app_context():
        reviewer = reviewers.create_reviewer(owner.company_id, "owner-pm@acme.example", PASSWORD)
    sheet = client.post("/v1/rate-sheets", headers=owner.headers, json=RATE_SHEET).json
    authorization = client.post(f"/v1/projects/{owner.project()['id']}/authorizations",
                                headers=owner.headers, json={"reference": "CD-1", "amount": 10}).json
    shared = client.post("/v1/share-links", headers=owner.headers, json={"sub": "Apex Concrete"}).json
    delivery = client.get(f"/v1/webhooks/{endpoint['id']}/deliveries",
                          headers=owner.headers).json["data"][0]
    return {"ticket_id": ticket["id"], "project_id": owner.project()["id"], "token": link["token"],
            "endpoint_id": str(endpoint["id"]), "delivery_id": delivery["id"],
            "prefix": owner.prefix, "position": "0", "kind": "labor",
            "photo_id": str(ticket["photos"][0]["id"]), "reviewer_id": str(reviewer.id),
            "sheet_id": str(sheet["id"]), "authorization_id": str(authorization["id"]),
            "key": "front", "request_id": str(asked["id"]), "share_link_id": str(shared["id"])}


MISSING = {"ticket_id": str(uuid.UUID(int=0x1234)), "project_id": "1", "token": "x" * 32,
           "prefix": "ewt_zzzzzzzz", "position": "0", "kind": "labor", "photo_id": "999999",
           "reviewer_id": "999999", "sheet_id": "999999", "authorization_id": "999999",
           "key": "front", "request_id": "999999", "endpoint_id": "999999",
           "delivery_id": "msg_" + "0" * 32, "share_link_id": "999999"}
RATE_SHEET = {"name": "Rates", "effective_from": "2026-01-01",
              "labor": [{"classification": "Foreman", "st": 100}]}


def fill(rule: str, values: dict[str, str]) -> str:
    """Put values into a Flask rule's variables."""
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", lambda m: values[m.group(1)], rule)


def body_for(rule: str, owner_values: dict[str, str]) -> dict:
    """A request body that would succeed for the owner, so only ownership can refuse it."""
    if rule.endswith("/photos"):
        return {"photos": [{"data_url": data_url(jpeg_bytes())}]}
    if rule.endswith("/budget-codes"):
        return {"cost_code_item_id": 1, "cost_type": "labor"}
    if rule.endswith("/rate-sheets"):
        return RATE_SHEET
    if rule.endswith("/rate-sheets/csv"):
        return {"name": "Rates", "effective_from": "2026-01-01",
                "csv": "kind,item,st\r\nlabor,Foreman,100\r\n"}
    if rule.endswith("/markups"):
        return {"markups": []}
    if rule.endswith("/commitments"):
        return {"sub": "Bayside Rentals", "contract_id": None}
    if rule.endswith("/authorizations"):
        return {"reference": "CD-2", "amount": 10}
    if rule.endswith("/authorization"):
        return {"authorization_id": None}
    if rule.endswith("/signature-requests"):
        return {"name": "Sam Ortiz", "phone": "+15551234567"}
    if rule.endswith("/webhooks/<int:endpoint_id>"):
        return {"description": "Taken over"}
    return {}


def query_for(rule: str, owner_values: dict[str, str]) -> str:
    """A query string a route needs to get past its own checks to the ids in its path."""
    if rule.endswith("/backup-package"):
        return f"?tickets={owner_values['ticket_id']}"
    return ""


# A page's CSRF token is signed with the second it was made, so two answers a second apart
# differ there even when everything else is the same.
_CSRF_TOKEN = re.compile(rb'(name="csrf_token" value="|"X-CSRFToken": ")[^"]+')


def without_csrf_tokens(body: bytes) -> bytes:
    """A page with its CSRF tokens blanked, to compare two answers of the same page."""
    return _CSRF_TOKEN.sub(rb"\1", body)


def signed_in(app, tenant, client):
    """Sign a reviewer of the tenant in on this client and return the CSRF token."""
    with app.app_context():
        # An admin of its own company, so the reviewer pages answer it at all.
        reviewers.create_reviewer(tenant.company_id, "intruder@rival.example", PASSWORD, is_admin=True)
    page = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    assert client.post("/login", data={"csrf_token": token, "email": "intruder@rival.example",
                                       "password": PASSWORD}).status_code == 302
    return re.search(r'name="csrf_token" value="([^"]+)"',
                     client.get("/queue").get_data(as_text=True)).group(1)


def test_every_route_with_an_id_treats_foreign_ids_as_missing(app, client, acme, rival):
    owner_values = owned_resources(client, acme)
    intruder = app.test_client()
    csrf = signed_in(app, rival, intruder)
    checked = []
    for rule in app.url_map.iter_rules():
        if not rule.arguments or rule.rule.startswith(PUBLIC_PREFIXES):
            continue
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            answers = []
            for values in (owner_values, MISSING):
                url = fill(rule.rule, values) + query_for(rule.rule, owner_values)
                if rule.rule.startswith("/v1/"):
                    response = intruder.open(url, method=method, headers=rival.headers,
                                             json=body_for(rule.rule, owner_values)
                                             if method in ("POST", "PUT", "PATCH") else None)
                else:
                    response = intruder.open(url, method=method,
                                             data={"csrf_token": csrf} if method == "POST" else None)
                answers.append((response.status_code, without_csrf_tokens(response.get_data())))
            foreign, missing = answers
            assert foreign == missing, f"{method} {rule.rule}"
            assert foreign[0] == 404, f"{method} {rule.rule}: {foreign}"
            checked.append(f"{method} {rule.rule}")
    assert len(checked) == 69  # every route with an id or token outside the public pages
    # And nothing of the owner's changed.
    ticket = client.get(f"/v1/tickets/{owner_values['ticket_id']}", headers=acme.headers).json
    assert ticket["status"] == "submitted" and ticket["photo_count"] == 1 and ticket["decisions"] == []
    assert ticket["signature"]["signed_via"] == "signing_link"
    (asked,) = client.get(f"/v1/tickets/{owner_values['ticket_id']}/signature-requests",
                          headers=acme.headers).json["data"]
    assert asked["state"] == "signed" and asked["revoked_at"] is None
    link = client.get("/v1/links", headers=acme.headers).json["data"][0]
    assert link["revoked_at"] is None
    assert client.get("/v1/me", headers=acme.headers).status_code == 200
    (endpoint,) = client.get("/v1/webhooks", headers=acme.headers).json["data"]
    assert endpoint["description"] is None and endpoint["enabled"] is True
    (shared,) = client.get("/v1/share-links", headers=acme.headers).json["data"]
    assert shared["ended_at"] is None


@pytest.mark.parametrize("path", ["/v1/tickets", "/v1/links", "/v1/projects", "/v1/share-links"])
def test_lists_show_only_the_callers_company(client, acme, rival, path):
    owned_resources(client, acme)
    theirs = client.get(path, headers=rival.headers).json["data"]
    mine = client.get(path, headers=acme.headers).json["data"]
    assert mine and not {str(x.get("id", x.get("token"))) for x in mine} & \
        {str(x.get("id", x.get("token"))) for x in theirs}
