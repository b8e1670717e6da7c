"""GET /v1/me."""
from __future__ import annotations


def test_me_names_company_and_key(client, tenant, other_tenant):
    response = client.get("/v1/me", headers=tenant.headers)
    assert response.status_code == 200
    assert response.json["company"] == {"id": tenant.company_id, "name": "Acme Mechanical"}
    key = response.json["key"]
    assert {k: key[k] for k in ("name", "prefix", "created_by")} == {
        "name": "tests", "prefix": tenant.prefix, "created_by": None}
    assert key["created_at"] and key["last_used_at"]
    other = client.get("/v1/me", headers=other_tenant.headers).json
    assert other["company"] == {"id": other_tenant.company_id, "name": "Other Electric"}
