"""What a first real install meets in Procore: its clock apart from ours, Redis away, lists
paged by Procore's own Per-Page, statuses hidden from selection, refusals that name the tool,
tools under unknown names, and sub jobs' own cost-code items."""
from __future__ import annotations

import logging
import shutil
import subprocess
import time
from typing import Any

import pytest
import redis
import requests

from services.project_system import ProjectSystemError, ToolDisabled
from services.project_system.pacing import RedisBudget, shared_pacing
from services.project_system.procore import _next_page
from support.servers import free_port
from tests.plugins.sandbox import ExchangeRecorder
from tests.test_procore_client import calls_to, project_id

pytestmark = pytest.mark.live


def paced_by_the_sandbox(client, control) -> None:
    """The client's waits move the sandbox's (frozen) clock on with its own fake clock."""
    clock = client.clock

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)  # the fixture's clock moves the sandbox's on with it

    client.sleep = sleep
    clock.now = control.freeze_clock()


def test_procore_clock_apart_from_ours_is_read_from_its_date(procore_client, sandbox_company,
                                                            sandbox_control):
    # Procore's clock runs 30 s ahead of ours: its X-Rate-Limit-Reset is 30 s further off than
    # our clock says. Read against its Date, a spent window is waited out (at most its 10 s),
    # not refused as a 35 s wait.
    project = project_id(sandbox_company)
    paced_by_the_sandbox(procore_client, sandbox_control)
    sandbox_control.skew_clock(30)
    sandbox_control.set_spike_limit(2)
    try:
        for _ in range(5):
            procore_client.list_tools(project)
    finally:
        sandbox_control.set_spike_limit(None)
    sleeps = procore_client.clock.sleeps
    assert sleeps and all(0 < wait <= 11 for wait in sleeps)


@pytest.fixture
def own_redis(tmp_path) -> Any:
    """A Redis server of this test's own on a free port, to stop halfway."""
    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server")
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    store = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
    for _ in range(100):
        try:
            store.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    yield server, url, store
    if server.poll() is None:
        server.terminate()
        server.wait(10)


def test_redis_away_paces_in_this_process_and_says_so(app, procore_client, sandbox_company,
                                                       sandbox_control, own_redis, caplog):
    # Redis stops while Procore calls are paced through it: the calls go on, paced by this
    # process alone (never past the spike limit), with a warning in the log and in /healthz.
    server, url, store = own_redis
    project = project_id(sandbox_company)
    procore_client.budget = RedisBudget(store, f"ewt:procore-budget:test:{project}")
    paced_by_the_sandbox(procore_client, sandbox_control)
    statuses: list[int] = []
    procore_client.observer = lambda answer, _body: statuses.append(answer.status_code)
    sandbox_control.set_spike_limit(3)
    try:
        procore_client.list_tools(project)
        assert shared_pacing()["ok"]
        server.terminate()
        server.wait(10)
        with caplog.at_level(logging.WARNING, "services.project_system.pacing"):
            for _ in range(7):
                procore_client.list_tools(project)
    finally:
        sandbox_control.set_spike_limit(None)
    assert 429 not in statuses and statuses.count(200) >= 8
    assert procore_client.clock.sleeps  # paced, in this process
    assert any("Redis is away" in record.getMessage() for record in caplog.records)
    # What a page asks of the budget (how long a call would wait) is this process's answer too.
    now = procore_client.clock()
    assert procore_client.budget.waiting(now) == procore_client.budget._local.waiting(now)
    from services import health
    app.config["RATELIMIT_STORAGE_URI"] = url
    with app.app_context():
        report, healthy = health.health()
    assert healthy and report["status"] == "degraded"
    assert report["checks"]["project_system_pacing"]["ok"] is False
    assert report["checks"]["project_system_pacing"]["error"] == "ConnectionError"


def test_pages_follow_procores_per_page_without_a_link_header():
    # Procore gives 50 a page where 100 were asked: without Link, Total and its Per-Page say
    # there is a third page.
    answer = requests.Response()
    answer.headers.update({"Total": "120", "Per-Page": "50"})
    assert _next_page(answer, 2, 100) == 3
    answer.headers["Per-Page"] = "100"
    assert _next_page(answer, 2, 100) is None


def test_a_status_hidden_from_selection_is_not_chosen(procore_client, sandbox_company):
    # The company keeps an "Open (imported)" status, default but hidden from selection:
    # change events are made in the open status people can choose.
    project = project_id(sandbox_company)
    statuses = procore_client.list_change_event_statuses(project)
    hidden = next(row for row in statuses if row["show_in_select"] is False)
    assert hidden["mapped_to_status"] == "open" and hidden["default_status"]
    chosen = procore_client._open_status_id(project)
    assert chosen != hidden["id"]
    assert next(row for row in statuses if row["id"] == chosen)["show_in_select"] is True


def test_a_refusal_names_the_tool_and_the_permission(procore_client, sandbox_company,
                                                     sandbox_control):
    project = project_id(sandbox_company)
    sandbox_control.set_tool(project, "change_events", False)
    with pytest.raises(ToolDisabled) as refused:
        procore_client.list_change_event_statuses(project)
    assert refused.value.status == 403
    assert "the Change Events tool" in refused.value.message
    assert "Standard or Admin permission on Change Events" in refused.value.message


def test_a_tool_under_an_unknown_name_and_title_is_tried(contract_client, contract_company):
    # "Eventos de cambio" (gestion_de_cambios) is Change Events: the statuses call decides.
    project = contract_company["contract_projects"]["localised_tool"]
    enabled, why = contract_client.change_event_tool(project)
    assert enabled and "'Eventos de cambio'" in why
    assert calls_to(contract_client, "GET", "/change_event/statuses") == 1
    # and a project whose known tools lack Change Events is still read from its list
    assert contract_client.change_events_enabled(
        contract_company["contract_projects"]["no_tools"]) is False
    assert calls_to(contract_client, "GET", "/change_event/statuses") == 1


def test_a_sub_jobs_budget_code_is_made_on_its_own_cost_code_item(contract_client,
                                                                  contract_company):
    # Sub job B2's cost code 04-200 has no budget code: it is made on B2's own cost-code item
    # (listed with legacy_sub_job_id), read back, and tied to B2's cost code.
    project = contract_company["contract_projects"]["sub_jobs"]
    codes = contract_client.list_cost_codes(project)
    wanted = next(code for code in codes if code.sub_job == "B2" and code.code == "04-200")
    recorder = ExchangeRecorder()
    recorder.attach(contract_client)
    made = contract_client.create_budget_code(project, wanted.id, "labor")
    assert made.flat_code == "B2.04-200.L" and made.cost_code_id == wanted.id
    listed = {code.id: code for code in contract_client.list_budget_codes(project)}
    assert listed[made.id].cost_code_id == wanted.id and listed[made.id].cost_type == "labor"
    asked = [exchange.url for exchange in recorder.exchanges
             if "segment_items" in exchange.url and "legacy_cost_code_id" in exchange.url]
    assert asked and all("legacy_sub_job_id=" in url for url in asked)


def test_the_sandbox_refuses_a_sub_jobs_code_on_the_projects_cost_code_item(contract_client,
                                                                            contract_company):
    project = contract_company["contract_projects"]["sub_jobs"]
    wbs = f"/rest/v1.0/projects/{project}/work_breakdown_structure"
    segments = {row["type"]: row for row in contract_client._pages(f"{wbs}/segments")}
    item = next(row for row in contract_client._pages(
        f"{wbs}/segments/{segments['cost_code']['id']}/segment_items")
        if row["path_code"] == "04-200")  # the project's own item
    sub_job = next(row for row in contract_client._pages(
        f"{wbs}/segments/{segments['sub_job']['id']}/segment_items") if row["code"] == "B2")
    cost_type = next(row for row in contract_client._pages(
        f"{wbs}/segments/{segments['line_item_type']['id']}/segment_items") if row["code"] == "L")
    with pytest.raises(ProjectSystemError) as refused:
        contract_client._request("POST", f"{wbs}/wbs_codes", json_body={"segment_items": [
            {"segment_id": segments[kind]["id"], "segment_item_id": chosen["id"]}
            for kind, chosen in (("sub_job", sub_job), ("cost_code", item),
                                 ("line_item_type", cost_type))]})
    assert refused.value.status == 422
