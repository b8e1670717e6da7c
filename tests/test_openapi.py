"""The OpenAPI document: valid 3.1, generated from the routes, needs no key."""
from __future__ import annotations

import re

from openapi_spec_validator import validate

from blueprints.api import openapi_path


def test_document_is_valid_openapi_31_without_a_key(client):
    response = client.get("/v1/openapi.json")
    assert response.status_code == 200
    document = response.json
    assert document["openapi"] == "3.1.0"
    assert document["info"]["version"] == "1.0.0"
    validate(document)


def test_every_v1_route_is_documented_and_nothing_else(app, client):
    document = client.get("/v1/openapi.json").json
    documented = {(path, method) for path, item in document["paths"].items() for method in item}
    served = set()
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/v1/"):
            continue
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            served.add((openapi_path(rule.rule.removeprefix("/v1")), method.lower()))
    assert served == documented


def test_authenticated_operations_document_401_and_429(client):
    document = client.get("/v1/openapi.json").json
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if operation["security"]:
                assert {"401", "429"} <= set(operation["responses"]), (path, method)
            for status, response in operation["responses"].items():
                if status != "200":
                    assert response["content"]["application/json"]["schema"]["$ref"] == \
                        "#/components/schemas/ErrorBody"


def test_me_response_schema_matches_a_real_response(client, tenant):
    document = client.get("/v1/openapi.json").json
    ref = document["paths"]["/me"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    schema = document["components"]["schemas"][ref.rsplit("/", 1)[1]]
    body = client.get("/v1/me", headers=tenant.headers).json
    assert set(schema["required"]) <= set(body)
    assert re.match(r"^ewt_", body["key"]["prefix"])
