"""Projects, cost codes, budget codes and capability, through the API against the live sandbox."""
from __future__ import annotations

import datetime as dt
import json

import time_machine

from tests.plugins.sandbox import SandboxControl


def control_for(sandbox_server, tenant) -> SandboxControl:
    """Sandbox switches for a connected tenant's remote company."""
    return SandboxControl(sandbox_server, {"client_id": tenant.client_id,
                                           "client_secret": tenant.client_secret})


def test_projects_list_is_the_companys_own(client, acme, rival):
    mine = client.get("/v1/projects", headers=acme.headers).json["data"]
    theirs = client.get("/v1/projects", headers=rival.headers).json["data"]
    assert {p["id"] for p in mine} == {str(p["id"]) for p in acme.projects}
    assert not {p["id"] for p in mine} & {p["id"] for p in theirs}
    assert all(isinstance(p["id"], str) and int(p["id"]) > 2**32 for p in mine)
    assert {"id", "name", "display_name", "project_number"} <= set(mine[0])


def test_cost_codes_search_is_case_insensitive_over_code_and_name(client, acme):
    project = acme.project()["id"]
    everything = client.get(f"/v1/projects/{project}/cost-codes", headers=acme.headers).json["data"]
    assert len(everything) >= 10
    plumbing = client.get(f"/v1/projects/{project}/cost-codes?q=PLUMB", headers=acme.headers).json["data"]
    assert plumbing and all("plumb" in (c["name"] + c["code"]).lower() for c in plumbing)
    by_code = client.get(f"/v1/projects/{project}/cost-codes?q=02-2", headers=acme.headers).json["data"]
    assert by_code and all("02-2" in c["code"] for c in by_code)
    item = everything[0]
    assert set(item) == {"id", "code", "name", "sub_job", "budget_codes"} and item["sub_job"] is None
    for budget in item["budget_codes"]:
        assert set(budget) == {"id", "code", "cost_type"}
        assert budget["code"].startswith(item["code"] + ".")
    # Demo data: some cost codes lack a labor budget code, some lack every budget code.
    assert any(not c["budget_codes"] for c in everything)
    assert any(c["budget_codes"] and "labor" not in {b["cost_type"] for b in c["budget_codes"]}
               for c in everything)


def test_create_budget_code_creates_once_then_returns_existing(client, acme):
    project = acme.project()["id"]
    codes = client.get(f"/v1/projects/{project}/cost-codes", headers=acme.headers).json["data"]
    lacking = next(c for c in codes if "labor" not in {b["cost_type"] for b in c["budget_codes"]})
    url = f"/v1/projects/{project}/budget-codes"
    made = client.post(url, headers=acme.headers, json={"cost_code_item_id": lacking["id"],
                                                        "cost_type": "labor"})
    assert made.status_code == 200, made.json
    assert made.json["created"] is True and made.json["cost_type"] == "labor"
    assert made.json["code"] == lacking["code"] + ".L"
    again = client.post(url, headers=acme.headers, json={"cost_code_item_id": lacking["id"],
                                                         "cost_type": "labor"})
    assert again.json["created"] is False and again.json["id"] == made.json["id"]
    listed = client.get(f"/v1/projects/{project}/cost-codes?q={lacking['code']}", headers=acme.headers)
    assert made.json["id"] in {b["id"] for c in listed.json["data"] for b in c["budget_codes"]}


def test_budget_code_input_errors(client, acme, rival):
    project = acme.project()["id"]
    url = f"/v1/projects/{project}/budget-codes"
    missing = client.post(url, headers=acme.headers, json={"cost_type": "labor"})
    assert missing.status_code == 400
    assert missing.json["error"]["details"][0]["field"] == "cost_code_item_id"
    wrong_type = client.post(url, headers=acme.headers, json={"cost_code_item_id": 1, "cost_type": "owner"})
    assert wrong_type.status_code == 400
    assert wrong_type.json["error"]["details"][0]["field"] == "cost_type"
    unknown_code = client.post(url, headers=acme.headers, json={"cost_code_item_id": 12345})
    assert unknown_code.status_code == 404
    assert unknown_code.json["error"]["code"] == "cost_code_not_found"
    foreign = client.post(f"/v1/projects/{rival.project()['id']}/budget-codes", headers=acme.headers,
                          json={"cost_code_item_id": 12345})
    unknown = client.post("/v1/projects/999/budget-codes", headers=acme.headers,
                          json={"cost_code_item_id": 12345})
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json == unknown.json
    assert unknown.json["error"]["code"] == "project_not_found"


def test_capability_reflects_the_tool_and_is_cached(client, acme, sandbox_server):
    with_tool, without_tool = acme.project(True)["id"], acme.project(False)["id"]
    start = dt.datetime.now(dt.timezone.utc)
    with time_machine.travel(start, tick=False) as clock:
        yes = client.get(f"/v1/projects/{with_tool}/capability", headers=acme.headers).json
        no = client.get(f"/v1/projects/{without_tool}/capability", headers=acme.headers).json
        assert yes == {"change_events": True, "daily_log": True, "destination": "change_event"}
        assert no == {"change_events": False, "daily_log": True, "destination": None}
        control = control_for(sandbox_server, acme)
        control.set_tool(int(with_tool), "change_events", False)
        clock.shift(30)
        cached = client.get(f"/v1/projects/{with_tool}/capability", headers=acme.headers).json
        assert cached["change_events"] is True          # still within the 60 s cache
        clock.shift(31)
        fresh = client.get(f"/v1/projects/{with_tool}/capability", headers=acme.headers).json
        assert fresh["change_events"] is False
        control.close()


def test_other_companys_project_answers_like_a_missing_one(client, acme, rival):
    foreign = rival.project()["id"]
    for suffix in ("cost-codes", "capability"):
        a = client.get(f"/v1/projects/{foreign}/{suffix}", headers=acme.headers)
        b = client.get(f"/v1/projects/1/{suffix}", headers=acme.headers)
        assert a.status_code == b.status_code == 404
        assert a.json == b.json and a.json["error"]["code"] == "project_not_found"


def test_unreachable_project_system_is_502(app, client, acme):
    app.config["SANDBOX_URL"] = "http://127.0.0.1:9"  # nothing listens on the discard port
    app.config["PROJECT_SYSTEM_CONNECT_TIMEOUT_S"] = 1
    app.config["PROJECT_SYSTEM_READ_RETRIES"] = 0
    response = client.get("/v1/projects", headers=acme.headers)
    assert response.status_code == 502
    assert response.json["error"]["code"] == "project_system_unavailable"
    capability = client.get(f"/v1/projects/{acme.project()['id']}/capability", headers=acme.headers)
    assert capability.status_code == 502


def test_project_system_message_passes_through(client, acme, sandbox_server):
    control = control_for(sandbox_server, acme)
    control.fault(422, message="Budget code segment is locked by ERP sync")
    project = acme.project()["id"]
    codes = client.get(f"/v1/projects/{project}/cost-codes", headers=acme.headers).json["data"]
    lacking = next(c for c in codes if not c["budget_codes"])
    response = client.post(f"/v1/projects/{project}/budget-codes", headers=acme.headers,
                           json={"cost_code_item_id": lacking["id"], "cost_type": "labor"})
    control.close()
    assert response.status_code == 502
    assert response.json["error"]["code"] == "project_system_error"
    assert "Budget code segment is locked by ERP sync" in response.json["error"]["message"]


def test_not_connected_company_gets_409(client, tenant):
    response = client.get("/v1/projects", headers=tenant.headers)
    assert response.status_code == 409
    assert response.json["error"]["code"] == "project_system_not_connected"


def test_secrets_never_appear_in_responses(client, acme):
    project = acme.project()["id"]
    bodies = [client.get(path, headers=acme.headers).get_data(as_text=True) for path in (
        "/v1/me", "/v1/projects", f"/v1/projects/{project}/cost-codes",
        f"/v1/projects/{project}/capability", "/v1/tickets", "/v1/openapi.json")]
    for body in bodies:
        assert acme.client_secret not in body
        assert acme.key not in body


def test_connect_and_check_commands(app, runner, tenant, sandbox_server, monkeypatch):
    demo = json.loads(runner.invoke(args=["demo", "--json"]).stdout)
    seeded, seeded_projects = demo["project_system"], demo["projects"]
    result = runner.invoke(args=[
        "project-system", "connect", "--company", str(tenant.company_id), "--environment", "custom",
        "--client-id", seeded["client_id"], "--client-secret", seeded["client_secret"],
        "--procore-company-id", str(seeded["company_id"]), "--api-base", sandbox_server.url,
        "--oauth-base", sandbox_server.url])
    assert result.exit_code == 0, result.output
    assert f"logged in; {len(seeded_projects)} project(s) visible" in result.output
    assert "change events on" in result.output and "daily log only" in result.output
    assert seeded["client_secret"] not in result.output
    check = runner.invoke(args=["project-system", "check", "--company", str(tenant.company_id)])
    assert check.exit_code == 0 and "FAIL" not in check.output
    runner.invoke(args=[
        "project-system", "connect", "--company", str(tenant.company_id), "--environment", "custom",
        "--client-id", seeded["client_id"], "--client-secret", "wrong-secret",
        "--procore-company-id", str(seeded["company_id"]), "--api-base", sandbox_server.url,
        "--oauth-base", sandbox_server.url])
    bad = runner.invoke(args=["project-system", "check", "--company", str(tenant.company_id)])
    assert bad.exit_code == 1
    assert "FAIL login refused" in bad.output
    assert "wrong-secret" not in bad.output
