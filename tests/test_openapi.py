"""The OpenAPI document: valid 3.1, generated from the routes, needs no key."""
from __future__ import annotations

import io
import json
import re

import jsonschema
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
        # /v1/docs is this document rendered for people (HTML), not an operation of the API.
        if not rule.rule.startswith("/v1/") or rule.rule == "/v1/docs":
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
                if not status.startswith("2"):  # every error has the one error body
                    assert response["content"]["application/json"]["schema"]["$ref"] == \
                        "#/components/schemas/ErrorBody"


def test_every_operation_is_described_under_a_described_tag(client):
    """Each operation sits in one section (tag) the document defines and describes, says what
    it does beyond its summary, and no section is left empty."""
    document = client.get("/v1/openapi.json").json
    tags = {tag["name"]: tag for tag in document["tags"]}
    assert len(tags) == len(document["tags"])
    assert [name for name, tag in tags.items()
            if not tag.get("description", "").strip() or not tag.get("x-displayName")] == []
    used = set()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert len(operation["tags"]) == 1 and operation["tags"][0] in tags, (path, method)
            assert operation["summary"].strip() and operation.get("description", "").strip(), \
                (path, method)
            used.add(operation["tags"][0])
    assert used == set(tags)
    assert "/v1/docs" in document["info"]["description"]


def test_me_response_schema_matches_a_real_response(client, tenant):
    document = client.get("/v1/openapi.json").json
    ref = document["paths"]["/me"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    schema = document["components"]["schemas"][ref.rsplit("/", 1)[1]]
    body = client.get("/v1/me", headers=tenant.headers).json
    assert set(schema["required"]) <= set(body)
    assert re.match(r"^ewt_", body["key"]["prefix"])


def test_each_shape_is_one_named_component_and_every_component_is_used(client):
    """No `-Input`/`-Output` twins: a generated client names each shape once."""
    document = client.get("/v1/openapi.json").json
    schemas = document["components"]["schemas"]
    assert not [name for name in schemas if name.endswith(("-Input", "-Output"))]
    text = json.dumps([document["paths"], document["webhooks"]])
    used, todo = set(), set(re.findall(r"#/components/schemas/([A-Za-z0-9_.-]+)", text))
    while todo:
        name = todo.pop()
        used.add(name)
        todo |= set(re.findall(r"#/components/schemas/([A-Za-z0-9_.-]+)",
                               json.dumps(schemas[name]))) - used
    assert used == set(schemas)
    for operation in ("post", ):
        ok = document["paths"]["/tickets"][operation]["responses"]["200"]
        assert ok["content"]["application/json"]["schema"]["$ref"].endswith("/Ticket")
    body = document["paths"]["/tickets"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["$ref"].endswith("/TicketInput")


def test_error_details_are_typed(client):
    schemas = client.get("/v1/openapi.json").json["components"]["schemas"]
    details = schemas["ErrorDetail"]["properties"]["details"]
    items = {option["items"]["$ref"].rsplit("/", 1)[1]
             for option in details["anyOf"] if option.get("type") == "array"}
    assert items == {"FieldProblem", "LineRefusal"}
    assert set(schemas["FieldProblem"]["required"]) == {"field", "message"}
    assert set(schemas["LineRefusal"]["required"]) == {"line", "reason", "description"}


def documented_codes(document: dict, path: str, method: str, status: int) -> list[str]:
    """The error codes the document lists for one response of one operation."""
    return document["paths"][path][method]["responses"][str(status)]["x-error-codes"]


def test_every_error_code_an_operation_answers_is_listed(client, acme):
    document = client.get("/v1/openapi.json").json
    project = acme.project()
    ticket = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": project["id"], "description": "d", "reason": "r", "directed_by": "x",
        "labor": [{"trade": "Zzyzx wrangler", "hours": 1, "rate": 1}]}).json
    answers = [
        ("/tickets", "post", client.post("/v1/tickets", headers=acme.headers, data="{",
                                         content_type="application/json")),
        ("/tickets", "post", client.post("/v1/tickets", headers=acme.headers)),
        ("/tickets", "post", client.post("/v1/tickets", headers=acme.headers, json=[])),
        ("/tickets", "post", client.post("/v1/tickets", headers=acme.headers, json={
            "project_id": "999999", "description": "d", "reason": "r", "directed_by": "x"})),
        ("/tickets", "get", client.get("/v1/tickets?limit=0", headers=acme.headers)),
        ("/tickets/{ticket_id}", "get", client.get("/v1/tickets/nope", headers=acme.headers)),
        ("/tickets/{ticket_id}", "get", client.get("/v1/tickets/nope")),
        ("/tickets/{ticket_id}/approve", "post", client.post(
            f"/v1/tickets/{ticket['id']}/approve", headers=acme.headers, json={})),
        ("/tickets/{ticket_id}/reject", "post", client.post(
            f"/v1/tickets/{ticket['id']}/reject", headers=acme.headers)),
        ("/tickets/{ticket_id}/reject", "post", client.post(
            f"/v1/tickets/{ticket['id']}/reject", headers=acme.headers)),
        ("/links/{token}/revoke", "post", client.post("/v1/links/nope/revoke",
                                                      headers=acme.headers)),
        ("/projects/{project_id}/budget-codes", "post", client.post(
            f"/v1/projects/{project['id']}/budget-codes", headers=acme.headers,
            json={"cost_code_item_id": 999_999_999})),
    ]
    seen = set()
    for path, method, response in answers:
        if response.status_code == 200:
            continue
        code = response.json["error"]["code"]
        seen.add(code)
        assert code in documented_codes(document, path, method, response.status_code), \
            (path, method, response.status_code, code)
    assert {"invalid_json", "body_required", "invalid_body", "project_not_found",
            "validation_failed", "ticket_not_found", "api_key_missing", "lines_need_review",
            "ticket_rejected", "link_not_found", "cost_code_not_found"} <= seen
    approve = document["paths"]["/tickets/{ticket_id}/approve"]["post"]["responses"]
    assert set(approve["502"]["x-error-codes"]) == {
        "project_system_write_unconfirmed", "project_system_error", "project_system_unavailable",
        "project_system_auth_failed"}
    assert "rate_limited" in approve["429"]["description"]


def test_date_times_are_date_times_both_ways_and_cost_types_an_enum(client):
    schemas = client.get("/v1/openapi.json").json["components"]["schemas"]

    def formats(schema: dict) -> set:
        options = schema.get("anyOf", [schema])  # a blank input time (maxLength 0) is none
        return {option.get("format") for option in options
                if option.get("type") == "string" and option.get("maxLength") != 0}

    assert formats(schemas["PhotoIn"]["properties"]["taken_at"]) == {"date-time"}
    assert formats(schemas["SignatureIn"]["properties"]["signed_at"]) == {"date-time"}
    assert formats(schemas["Photo"]["properties"]["taken_at"]) == {"date-time"}
    assert formats(schemas["Signature"]["properties"]["signed_at"]) == {"date-time"}
    assert set(schemas["CostType"]["enum"]) == {
        "labor", "materials", "equipment", "other", "commitment", "owner_cost",
        "professional_services"}
    for shape in ("RoutingLine", "BudgetCodeRef", "BudgetCodeOut"):
        cost_type = schemas[shape]["properties"]["cost_type"]
        assert {"$ref": "#/components/schemas/CostType"} in cost_type["anyOf"], shape
    assert {"id", "url", "thumbnail_url", "taken_at", "coords"} <= set(schemas["Photo"]["required"])
    assert {"id", "url", "thumbnail_url", "name", "role", "signed_at", "qualifier"} <= \
        set(schemas["Signature"]["required"])


def test_photo_upload_documents_its_binary_body_and_query(client):
    operation = client.get("/v1/openapi.json").json[
        "paths"]["/tickets/{ticket_id}/photo-uploads/{key}"]["put"]
    body = operation["requestBody"]
    assert body["required"] is True
    assert body["content"]["application/octet-stream"]["schema"] == {"type": "string",
                                                                     "format": "binary"}
    query = {p["name"]: p for p in operation["parameters"] if p["in"] == "query"}
    assert set(query) == {"name", "taken_at", "lat", "lng"}
    assert not any(p["required"] for p in query.values())
    assert {"type": "number", "minimum": -90, "maximum": 90} in query["lat"]["schema"]["anyOf"]


def test_what_reading_any_body_answers_is_documented_on_every_body_route(app, client, acme):
    document = client.get("/v1/openapi.json").json
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if "requestBody" not in operation:
                continue
            responses = operation["responses"]
            for status, code in ((400, "body_incomplete"), (413, "payload_too_large")):
                assert code in responses[str(status)]["x-error-codes"], (path, method, status)
    ticket = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": acme.project()["id"], "description": "d", "reason": "r",
        "directed_by": "x"}).json
    routes = [("/tickets", "post", "/v1/tickets", "application/json"),
              ("/tickets/{ticket_id}/photo-uploads/{key}", "put",
               f"/v1/tickets/{ticket['id']}/photo-uploads/a", "image/jpeg")]
    for path, method, url, content_type in routes:
        send = getattr(client, method)
        cut = {"headers": acme.headers, "content_type": content_type,
               "environ_overrides": {"CONTENT_LENGTH": "100"}}
        answers = [send(url, input_stream=io.BytesIO(b"{}"), **cut),
                   send(url, headers=acme.headers, content_type=content_type,
                        data=b"x" * (app.config["MAX_CONTENT_LENGTH"] + 1))]
        assert [a.json["error"]["code"] for a in answers] == \
            ["body_incomplete", "payload_too_large"], path
        for answer in answers:
            assert answer.json["error"]["code"] in documented_codes(
                document, path, method, answer.status_code), (path, answer.status_code)


def test_the_document_says_it_is_json(client):
    ok = client.get("/v1/openapi.json").json["paths"]["/openapi.json"]["get"]["responses"]["200"]
    assert ok["content"]["application/json"]["schema"]["type"] == "object"


def assert_error_matches_document(document: dict, path: str, method: str, response) -> None:
    """Validate a real error body against the schema the document gives its status."""
    documented = document["paths"][path][method]["responses"][str(response.status_code)]
    schema = {**documented["content"]["application/json"]["schema"],
              "components": document["components"]}
    jsonschema.Draft202012Validator(schema).validate(response.json)
    assert response.json["error"]["code"] in documented["x-error-codes"]


def test_real_error_bodies_match_the_documented_error_schema(client, acme):
    from tests.test_approval import act
    from tests.test_nte import authorize, claim

    document = client.get("/v1/openapi.json").json
    invalid = client.post("/v1/tickets", headers=acme.headers, json={"description": ""})
    assert invalid.json["error"]["code"] == "validation_failed"
    unrouted = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": acme.project()["id"], "description": "d", "reason": "r", "directed_by": "x",
        "labor": [{"trade": "Zzyzx wrangler", "hours": 1, "rate": 1}]}).json
    review = act(client, acme, unrouted["id"], "approve", {})
    assert review.json["error"]["code"] == "lines_need_review"
    authorize(client, acme, acme.project()["id"], amount=100)
    over = act(client, acme, claim(client, acme, 2)["id"], "approve")
    assert over.json["error"]["code"] == "nte_exceeded"
    assert over.json["error"]["details"]["reference"] == "CD-014"
    assert_error_matches_document(document, "/tickets", "post", invalid)
    for response in (review, over):
        assert_error_matches_document(document, "/tickets/{ticket_id}/approve", "post", response)


def test_each_set_of_enum_values_is_one_named_component(client):
    """A generated client gets one type per choice (HourType, not one copy per model)."""
    schemas = client.get("/v1/openapi.json").json["components"]["schemas"]
    found: dict[frozenset, list] = {}

    def walk(node, where: str) -> None:
        if isinstance(node, dict):
            if "enum" in node:
                found.setdefault(frozenset(node["enum"]), []).append(where)
            for key, value in node.items():
                walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for value in node:
                walk(value, where)

    for name, schema in schemas.items():
        walk(schema, name)
    assert {values: places for values, places in found.items() if len(places) > 1} == {}
    assert schemas["HourType"]["enum"] == ["st", "ot", "dt"]
    assert schemas["MarkupKind"]["enum"] == ["overhead", "profit", "bond", "insurance", "tax"]
    assert schemas["AuthorizationKind"]["enum"] == ["directive", "change_order_request"]


def _most_elements(node, schemas) -> tuple[int, int]:
    """The most containers and values a body the schema allows can hold (declared fields only)."""
    if "$ref" in node:
        return _most_elements(schemas[node["$ref"].rsplit("/", 1)[1]], schemas)
    branches = node.get("anyOf") or node.get("oneOf")
    if branches:
        counts = [_most_elements(branch, schemas) for branch in branches]
        return max(c for c, _ in counts), max(v for _, v in counts)
    if node.get("type") == "array":
        containers, values = _most_elements(node["items"], schemas)
        return 1 + node["maxItems"] * containers, 1 + node["maxItems"] * values
    if node.get("type") == "object" or "properties" in node:
        containers, values = 1, 1
        for field in node.get("properties", {}).values():
            inner = _most_elements(field, schemas)
            containers, values = containers + inner[0], values + inner[1]
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            inner = _most_elements(extra, schemas)
            containers += node["maxProperties"] * inner[0]
            values += node["maxProperties"] * inner[1]
        return containers, values
    return 0, 1


def test_no_body_the_document_allows_meets_the_element_limits(client):
    """The element count refuses only what the document refuses: every body schema's most objects,
    lists and values stay under its route's limits (and every list and map has a largest size)."""
    from blueprints.api import _UPLOAD_ENDPOINTS, JSON_LIMITS

    document = client.get("/v1/openapi.json").json
    schemas = document["components"]["schemas"]
    checked = 0
    for item in document["paths"].values():
        for operation in item.values():
            content = operation.get("requestBody", {}).get("content", {})
            if "application/json" not in content:
                continue
            endpoint = operation["operationId"].replace("_", ".", 1)
            containers, values = _most_elements(content["application/json"]["schema"], schemas)
            limit = JSON_LIMITS["upload" if endpoint in _UPLOAD_ENDPOINTS else "other"]
            assert containers <= limit[0] and values <= limit[1], (endpoint, containers, values, limit)
            checked += 1
    assert checked >= 15


def test_answers_that_name_something_new_link_to_the_operations_that_take_it(client):
    """Create a ticket, then read, approve, reject it; make a link, then revoke it; list the
    projects, then make a ticket or a link on one: as OpenAPI links a client (and schemathesis's
    stateful phase) follows. Every link names an operation and only parameters it has."""
    document = client.get("/v1/openapi.json").json
    operations = {operation["operationId"]: operation for item in document["paths"].values()
                  for operation in item.values()}

    def success(operation: dict) -> dict:
        return next(answer for status, answer in operation["responses"].items()
                    if status.startswith("2"))

    def links(path: str, method: str) -> dict:
        return success(document["paths"][path][method]).get("links", {})

    made = links("/tickets", "post")
    for target in ("tickets_get_ticket", "tickets_approve_ticket", "tickets_reject_ticket",
                   "tickets_restore_ticket", "signatures_create_signature_request"):
        assert made[target]["parameters"] == {"ticket_id": "$response.body#/id"}
    assert links("/links", "post")["links_revoke_link"]["parameters"] == {"token": "$response.body#/token"}
    assert links("/tickets/{ticket_id}/signature-requests", "post")[
        "signatures_revoke_signature_request"]["parameters"] == {
        "ticket_id": "$response.body#/ticket_id", "request_id": "$response.body#/id"}
    listed = links("/projects", "get")
    assert listed["tickets_create_ticket"]["requestBody"] == {"project_id": "$response.body#/data/0/id"}
    assert listed["rates_create_authorization"]["parameters"] == {"project_id": "$response.body#/data/0/id"}
    assert links("/tickets/{ticket_id}", "get") == {}  # reading names nothing new
    assert links("/share-links", "post")["share_links_delete_share_link"]["parameters"] == {
        "share_link_id": "$response.body#/id"}
    total = 0
    for item in document["paths"].values():
        for operation in item.values():
            for link in success(operation).get("links", {}).values():
                target = operations[link["operationId"]]
                taken = {p["name"] for p in target.get("parameters", []) if p["in"] == "path"}
                assert set(link.get("parameters", {})) == taken, link
                assert "parameters" in link or "requestBody" in target
                total += 1
    assert total >= 30


def test_rules_across_fields_are_in_the_document_as_the_service_applies_them(client, acme):
    """`not_verified` needs a reason; a signing request needs an e-mail or a phone; an older
    free-text qualifier is taken (as the reason): each body the document refuses, the service
    refuses, and each it allows, the service takes."""
    from tests.test_approval import create, ticket_body

    document = client.get("/v1/openapi.json").json
    schemas = document["components"]["schemas"]

    def allowed(name: str, body: dict) -> bool:
        schema = {**schemas[name], "components": {"schemas": schemas}}
        return jsonschema.Draft202012Validator(schema).is_valid(body)

    project = acme.project()["id"]
    for signature in ({"qualifier": "not_verified"}, {"qualifier": "not_verified", "qualifier_reason": " "},
                      {"qualifier": "not_verified", "qualifier_reason": "Hours are high"},
                      {"qualifier": "Checked the hours only"}, {"qualifier": "verified"}):
        answer = client.post("/v1/tickets", headers=acme.headers,
                             json=ticket_body(project, signature=signature))
        assert allowed("SignatureIn", signature) is (answer.status_code == 200), (signature, answer.json)
    ticket = create(client, acme)["id"]
    for where in ({}, {"email": None, "phone": None}, {"phone": "+1 555 010 0100"},
                  {"email": "sam@gc.example"}):
        body = {"name": "Sam Ortiz", **where}
        answer = client.post(f"/v1/tickets/{ticket}/signature-requests", headers=acme.headers, json=body)
        assert allowed("SignatureRequestInput", body) is (answer.status_code == 200), (body, answer.json)


def test_an_error_text_that_names_one_cause_lists_no_other_code(client):
    """A status whose text says only "not connected" lists no code for another cause."""
    document = client.get("/v1/openapi.json").json
    loose = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, response in operation.get("responses", {}).items():
                text = response.get("description", "")
                if text.startswith("The company is not connected to a project system yet.") \
                        and text.count("`") > 2:
                    loose.append(f"{method.upper()} {path} {status}: {text}")
    assert loose == []
