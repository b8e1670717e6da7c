"""ProcoreClient against the live sandbox: auth, paging, retries, tool detection, writes."""
from __future__ import annotations

import datetime
import json
import socket
import sqlite3
import time
from contextlib import closing
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from services.project_system import (
    Attachment,
    ChangeEventDraft,
    ChangeEventLine,
    ManpowerDraft,
    ProcoreClient,
    ProjectSystemAuthError,
    ProjectSystemError,
    ProjectSystemRateLimited,
    ProjectSystemUnavailable,
    ToolDisabled,
)
from services.project_system.pacing import LocalBudget, RedisBudget
from tests.databases import REDIS_URL
from tests.plugins.sandbox import ExchangeRecorder, SandboxControl

pytestmark = pytest.mark.live


def token_calls(client: ProcoreClient) -> int:
    """How many token requests the client made."""
    return sum(1 for _method, path in client.calls if path == "/oauth/token")


def calls_to(client: ProcoreClient, method: str, fragment: str) -> int:
    """How many calls with this method went to a path containing ``fragment``."""
    return sum(1 for verb, path in client.calls if verb == method and fragment in path)


def project_id(company: dict[str, Any], index: int = 0) -> int:
    """One of the seeded projects (0 and 1 have change events, 2 does not)."""
    return int(company["projects"][index]["id"])


def budget_code_id(client: ProcoreClient, project: int, flat_code: str) -> int:
    """The id of a budget code by its flat code."""
    return next(code.id for code in client.list_budget_codes(project)
                if code.flat_code == flat_code)


def draft(client: ProcoreClient, project: int, origin_id: str = "ticket-1") -> ChangeEventDraft:
    """A change event with a labor line, a materials line and an unrouted line."""
    return ChangeEventDraft(
        origin_id=origin_id, title="T&M 1042: hand digging at duct bank",
        description="Utility conflict found at grid C-4.", origin_data="ticket 1042",
        lines=(
            ChangeEventLine("Labor: 3 workers x 8 h", budget_code_id(client, project, "02-200.L"),
                            "labor", Decimal("24"), Decimal("85.50"), Decimal("2052.00"),
                            "hours"),
            ChangeEventLine("Ready-mix concrete", budget_code_id(client, project, "03-300.M"),
                            "materials", Decimal("2.5"), Decimal("168.40"), Decimal("421.00"),
                            "cy"),
            ChangeEventLine("Dump fees", None, None, None, None, Decimal("120.25"), None),
        ))


def event_count(db_path: str, project: int) -> int:
    """How many change events the sandbox holds for the project."""
    with closing(sqlite3.connect(db_path)) as conn:
        return conn.execute("SELECT count(*) FROM change_events WHERE project_id = ?",
                            [project]).fetchone()[0]


def test_pages_through_lists_by_link_header(procore_client, sandbox_company):
    """per_page=2 still returns every project, one call per page."""
    procore_client.per_page = 2
    projects = procore_client.list_projects()
    assert [project.name for project in projects] == sorted(
        project["name"] for project in sandbox_company["projects"])
    assert calls_to(procore_client, "GET", "/rest/v1.0/projects") == 2
    assert {project.active for project in projects} == {True, False}
    assert {project.time_zone for project in projects} == {"Pacific Time (US & Canada)"}
    procore_client.per_page = 5
    paged = procore_client.list_cost_codes(project_id(sandbox_company))
    procore_client.per_page = 100
    assert paged == procore_client.list_cost_codes(project_id(sandbox_company))
    assert calls_to(procore_client, "GET", "/cost_codes") == 7 + 1


def test_token_is_cached_and_renewed_when_the_clock_says_so(procore_client, sandbox_company):
    """One token for many calls; a new one once expires_in minus the safety margin passes."""
    for _ in range(5):
        procore_client.list_cost_types(project_id(sandbox_company))
    assert token_calls(procore_client) == 1
    procore_client.clock.advance(5400 - 61)
    procore_client.list_projects()
    assert token_calls(procore_client) == 1
    procore_client.clock.advance(2)
    procore_client.list_projects()
    assert token_calls(procore_client) == 2


def test_revoked_token_is_renewed_once_and_the_call_repeated(procore_client, sandbox_control):
    """A 401 from the server gets a new token and the same call again."""
    procore_client.list_projects()
    sandbox_control.revoke_tokens()
    assert len(procore_client.list_projects()) == 4
    assert token_calls(procore_client) == 2
    assert calls_to(procore_client, "GET", "/rest/v1.0/projects") == 3


def test_revoked_token_renewal_also_covers_writes(procore_client, sandbox_company,
                                                  sandbox_control):
    """A write refused with 401 is sent again with a new token, and lands once."""
    project = project_id(sandbox_company)
    procore_client.list_projects()
    sandbox_control.revoke_tokens()
    procore_client.create_manpower_log(project, ManpowerDraft(
        "ticket-401", datetime.date(2026, 6, 3), 2, Decimal("4"), "Cleanup"))
    assert calls_to(procore_client, "POST", "/manpower_logs") == 2
    assert procore_client.find_manpower_log(project, "ticket-401",
                                            datetime.date(2026, 6, 3)) is not None


def test_429_on_a_read_waits_what_retry_after_says(procore_client, sandbox_company,
                                                   sandbox_control):
    """Retry-After: 7 on a read means one 7-second wait, then success."""
    sandbox_control.fault(429, methods=["GET"], retry_after=7, match="/line_item_types")
    types = procore_client.list_cost_types(project_id(sandbox_company))
    assert {cost_type.code for cost_type in types} >= {"L", "E", "M", "O"}
    assert procore_client.clock.sleeps == [7]
    assert calls_to(procore_client, "GET", "/line_item_types") == 2


def test_5xx_on_a_read_backs_off_then_succeeds(procore_client, sandbox_company,
                                               sandbox_control):
    """Two 503s: two growing waits with jitter, then the answer."""
    sandbox_control.fault(503, count=2, methods=["GET"], match="/cost_codes")
    assert procore_client.list_cost_codes(project_id(sandbox_company))
    first, second = procore_client.clock.sleeps
    assert 0.25 <= first <= 0.5 and 0.5 <= second <= 1.0


def test_reads_give_up_after_max_retries(procore_client, sandbox_control):
    """A read that keeps failing raises ProjectSystemUnavailable with the server's message."""
    sandbox_control.fault(502, count=10, methods=["GET"], message="Bad gateway upstream")
    with pytest.raises(ProjectSystemUnavailable) as caught:
        procore_client.list_projects()
    assert caught.value.status == 502 and caught.value.message == "Bad gateway upstream"
    assert len(procore_client.clock.sleeps) == procore_client.max_read_retries
    assert calls_to(procore_client, "GET", "/rest/v1.0/projects") == 5


def test_the_hourly_limit_is_not_waited_out(procore_client, sandbox_control):
    """The hourly limit spent: the next call is refused at once with its wait, unsent when the
    last answer said so, and after the sandbox's real 429 (Retry-After up to an hour) if not."""
    # Procore's hour is half gone, whatever the time of day: its reset is never seconds away.
    stopped = sandbox_control.freeze_clock()
    sandbox_control.advance_clock((1800 - stopped % 3600) % 3600)
    sandbox_control.set_rate_limit(1)
    procore_client.list_projects()
    with pytest.raises(ProjectSystemRateLimited) as known:  # the last answer said: none left
        procore_client.list_projects()
    assert known.value.retry_after_s > procore_client.max_rate_limit_wait_s
    assert calls_to(procore_client, "GET", "/rest/v1.0/projects") == 1  # never sent
    procore_client.budget = LocalBudget()  # spent by another process: this one cannot know
    with pytest.raises(ProjectSystemRateLimited) as caught:
        procore_client.list_projects()
    assert caught.value.status == 429
    assert caught.value.message.startswith("You have surpassed the max number of requests")
    assert caught.value.retry_after_s > procore_client.max_rate_limit_wait_s
    assert procore_client.clock.sleeps == []
    assert calls_to(procore_client, "GET", "/rest/v1.0/projects") == 2


@pytest.mark.parametrize("status", [500, 503])
def test_writes_are_never_retried_after_5xx(procore_client, sandbox_server, sandbox_company,
                                            sandbox_control, status):
    """A write answered with 5xx raises at once; the caller's own retry makes one record."""
    project = project_id(sandbox_company)
    ticket = draft(procore_client, project)
    sandbox_control.fault(status, message="Try again later", match="/change_events")
    with pytest.raises(ProjectSystemUnavailable) as caught:
        procore_client.create_change_event(project, ticket)
    assert caught.value.status == status and caught.value.message == "Try again later"
    assert calls_to(procore_client, "POST", "/change_events") == 1
    assert procore_client.clock.sleeps == []
    assert procore_client.find_change_event(project, ticket.origin_id) is None
    procore_client.create_change_event(project, ticket)
    assert event_count(sandbox_server.db_path, project) == 1


def test_tool_detection(procore_client, sandbox_company, sandbox_control):
    """Projects with and without the change-events tool, and a tool switched off later."""
    with_tool, without_tool = project_id(sandbox_company, 0), project_id(sandbox_company, 2)
    assert procore_client.change_events_enabled(with_tool) is True
    assert procore_client.change_events_enabled(without_tool) is False
    sandbox_control.set_tool(with_tool, "change_events", False)
    assert procore_client.change_events_enabled(with_tool) is False
    assert procore_client.change_events_enabled(42) is False


def test_budget_codes_carry_cost_codes_and_normalized_types(procore_client, sandbox_company):
    """Budget codes map to cost codes and to the service's cost type words."""
    project = project_id(sandbox_company)
    cost_codes = {code.code: code for code in procore_client.list_cost_codes(project)}
    assert "02" not in cost_codes  # divisions are left out
    assert cost_codes["02-200"].name == "Site Earthwork"
    codes = {code.flat_code: code for code in procore_client.list_budget_codes(project)}
    labor = codes["02-200.L"]
    assert labor.cost_code_id == cost_codes["02-200"].id and labor.cost_type == "labor"
    assert codes["03-300.M"].cost_type == "materials"
    assert codes["05-120.E"].cost_type == "equipment"
    assert codes["01-500.O"].cost_type == "other"
    assert codes["22-100.S"].cost_type == "commitment"
    assert "01-500.L" not in codes
    assert not any(code.cost_code_id == cost_codes["04-200"].id for code in codes.values())


def test_create_budget_code_adds_a_missing_pair_once(procore_client, sandbox_company):
    """A missing pair is created through the WBS segments; asking again returns the same code."""
    project = project_id(sandbox_company)
    masonry = next(code for code in procore_client.list_cost_codes(project)
                   if code.code == "04-200")
    created = procore_client.create_budget_code(project, masonry.id, "labor")
    assert created.flat_code == "04-200.L" and created.cost_type == "labor"
    assert created.cost_code_id == masonry.id
    posts = calls_to(procore_client, "POST", "/wbs_codes")
    again = procore_client.create_budget_code(project, masonry.id, "L")
    assert again == created
    assert calls_to(procore_client, "POST", "/wbs_codes") == posts == 1
    assert created in procore_client.list_budget_codes(project)
    existing = procore_client.create_budget_code(
        project, next(code.id for code in procore_client.list_cost_codes(project)
                      if code.code == "02-200"), "materials")
    assert existing.flat_code == "02-200.M"
    assert calls_to(procore_client, "POST", "/wbs_codes") == 1
    with pytest.raises(ProjectSystemError) as caught:
        procore_client.create_budget_code(project, 12345, "labor")
    assert caught.value.status == 404


def test_change_event_create_find_attach_and_read_back(procore_client, sandbox_company,
                                                       sandbox_server):
    """The full write: lines on budget codes, origin id, attachments, and a page to open."""
    project = project_id(sandbox_company)
    started = datetime.datetime.now(datetime.UTC)
    ticket = draft(procore_client, project)
    record = procore_client.create_change_event(project, ticket)
    assert record.kind == "change_event" and record.number == "001"
    assert record.url == (f"{sandbox_server.url}/{project}/project/change_events/events/"
                          f"{record.id}")
    back = procore_client.attach_files(project, record.id, [
        Attachment(name, "image/jpeg", b"\xff\xd8" + name.encode())
        for name in ("photo-1.jpg", "signature.png")])
    assert back.attachment_filenames == ("photo-1.jpg", "signature.png")  # read back
    assert calls_to(procore_client, "POST", f"/projects/{project}/uploads") == 2
    assert calls_to(procore_client, "POST", "/_sandbox/storage") == 2
    assert calls_to(procore_client, "PATCH", f"/rest/v1.1/change_events/{record.id}") == 1
    assert calls_to(procore_client, "PATCH", "/rest/v1.0/") == 0
    found = procore_client.find_change_event(project, ticket.origin_id, created_after=started)
    assert found is not None and found.id == record.id
    assert found.attachment_filenames == ("photo-1.jpg", "signature.png")
    assert procore_client.find_change_event(project, "another-ticket") is None
    remote = procore_client.get_change_event(project, record.id)
    assert remote["external_data"]["origin_id"] == "ticket-1"
    assert remote["scope"] == "out_of_scope" and remote["status"]["name"] == "Open"
    assert remote["title"] == ticket.title and remote["description"] == ticket.description
    items = remote["change_items"]
    assert [item["budget_code"]["id"] if item["budget_code"] else None for item in items] == [
        line.budget_code_id for line in ticket.lines]
    assert [item["cost_impact"]["estimate"]["amount"] for item in items] == [
        Decimal("2052.0"), Decimal("421.0"), Decimal("120.25")]
    assert [item["cost_impact"]["estimate"].get("unit_of_measure") for item in items] == [
        "HR", "CY", None]
    page = requests.get(record.url, timeout=10)
    assert page.status_code == 200 and "T&amp;M 1042" in page.text


def test_after_commit_failure_is_raised_but_the_record_can_be_found(
        procore_client, sandbox_server, sandbox_company, sandbox_control):
    """The server stores the event and then fails: the client raises, lookup finds it."""
    project = project_id(sandbox_company)
    ticket = draft(procore_client, project, origin_id="ticket-after-commit")
    sandbox_control.fault(500, after_commit=True, match="/change_events")
    with pytest.raises(ProjectSystemUnavailable):
        procore_client.create_change_event(project, ticket)
    found = procore_client.find_change_event(
        project, ticket.origin_id,
        created_after=datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=1))
    assert found is not None and found.attachment_filenames == ()
    assert event_count(sandbox_server.db_path, project) == 1


def test_attachment_stored_before_a_failure_shows_in_lookup(procore_client, sandbox_company,
                                                            sandbox_control):
    """A PATCH that failed after storing the file: lookup lists it, so a retry can skip it."""
    project = project_id(sandbox_company)
    ticket = draft(procore_client, project, origin_id="ticket-attach")
    record = procore_client.create_change_event(project, ticket)
    sandbox_control.fault(502, after_commit=True, match=f"/change_events/{record.id}")
    with pytest.raises(ProjectSystemUnavailable):
        procore_client.attach_files(project, record.id,
                                    [Attachment("photo-1.jpg", "image/jpeg", b"\xff\xd8")])
    found = procore_client.find_change_event(project, ticket.origin_id)
    assert found is not None and found.attachment_filenames == ("photo-1.jpg",)


def test_dropped_connection_on_a_write_is_unavailable(procore_client, sandbox_company,
                                                      sandbox_control):
    """The socket closes after the write is stored: no retry, and the record is there."""
    project = project_id(sandbox_company)
    ticket = draft(procore_client, project, origin_id="ticket-dropped")
    sandbox_control.fault(0, after_commit=True, match="/change_events")
    with pytest.raises(ProjectSystemUnavailable):
        procore_client.create_change_event(project, ticket)
    assert calls_to(procore_client, "POST", "/change_events") == 1
    assert procore_client.find_change_event(project, ticket.origin_id) is not None


def test_slow_write_times_out_as_unavailable(sandbox_server, sandbox_company, sandbox_control):
    """A write slower than the read timeout raises ProjectSystemUnavailable without a retry."""
    project = project_id(sandbox_company)
    with ProcoreClient(sandbox_server.url, sandbox_server.url, sandbox_company["client_id"],
                       sandbox_company["client_secret"], sandbox_company["company_id"],
                       timeout=(1, 0.5), sleep=lambda seconds: None) as client:
        sandbox_control.fault(500, delay_s=1.2, after_commit=True, match="/manpower_logs")
        with pytest.raises(ProjectSystemUnavailable) as caught:
            client.create_manpower_log(project, ManpowerDraft(
                "ticket-slow", datetime.date(2026, 6, 4), 1, Decimal("1"), ""))
        # it gave up at the read timeout, before the answer came, and did not send it again
        assert caught.value.status is None and "ReadTimeout" in caught.value.message
        assert calls_to(client, "POST", "/manpower_logs") == 1
        # the server still stores it once its delay is over: the write was sent exactly once
        stored = None
        for _ in range(100):
            stored = client.find_manpower_log(project, "ticket-slow", datetime.date(2026, 6, 4))
            if stored is not None:
                break
            time.sleep(0.05)
        assert stored is not None


def test_manpower_log_create_and_find(procore_client, sandbox_company):
    """A manpower entry with the origin marker, found again by date and origin id."""
    project = project_id(sandbox_company, 2)
    day = datetime.date(2026, 6, 3)
    record = procore_client.create_manpower_log(project, ManpowerDraft(
        "ticket-7", day, 3, Decimal("7.5"), "Extra work ticket 7: trenching"))
    assert record.kind == "manpower_log" and record.number is None
    assert record.url.endswith(f"/{project}/project/daily_log/manpower_logs/{record.id}")
    found = procore_client.find_manpower_log(project, "ticket-7", day)
    assert found == record
    assert procore_client.find_manpower_log(project, "ticket-7", day.replace(day=4)) is None
    assert procore_client.find_manpower_log(project, "ticket-70", day) is None
    remote = procore_client.get_manpower_log(project, record.id)
    assert remote["notes"] == "Extra work ticket 7: trenching\n[ref:ticket-7]"
    assert remote["num_workers"] == 3 and Decimal(remote["man_hours"]) == Decimal("22.5")


def test_validation_message_passes_through(procore_client, sandbox_company):
    """A 422 keeps the project system's own message, status and request id."""
    project = project_id(sandbox_company)
    line = ChangeEventLine("Labor", 999, "labor", None, None, Decimal("10"), None)
    with pytest.raises(ProjectSystemError) as caught:
        procore_client.create_change_event(project, ChangeEventDraft(
            "ticket-bad", "Bad code", "", (line,)))
    error = caught.value
    assert type(error) is ProjectSystemError and error.status == 422
    assert error.message == ("Validation failed: change_items[0].budget_code 999 does not "
                             "exist in this project")
    assert error.request_id and error.request_id in str(error)


def test_disabled_tool_raises_tool_disabled(procore_client, sandbox_company):
    """Writing a change event where the tool is off raises ToolDisabled with Procore's text."""
    project = project_id(sandbox_company, 2)
    with pytest.raises(ToolDisabled) as caught:
        procore_client.create_change_event(project, ChangeEventDraft("t", "x", "", ()))
    assert caught.value.status == 403
    assert "permission access to view Change Events" in caught.value.message


def test_bad_client_secret_is_an_auth_error(sandbox_server, sandbox_company):
    """Refused credentials raise ProjectSystemAuthError, without the secret in sight."""
    secret = "wrong-secret-value-123"
    client = ProcoreClient(sandbox_server.url, sandbox_server.url, sandbox_company["client_id"],
                           secret, sandbox_company["company_id"])
    with client, pytest.raises(ProjectSystemAuthError) as caught:
        client.list_projects()
    assert caught.value.status == 401
    assert "Client authentication failed" in caught.value.message
    assert secret not in str(caught.value) and secret not in repr(caught.value)


def test_connection_refused_is_unavailable():
    """Nothing listening: ProjectSystemUnavailable after the read retries."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    waits: list[float] = []
    url = f"http://127.0.0.1:{port}"
    client = ProcoreClient(url, url, "client", "secret", 1, sleep=waits.append)
    with client, pytest.raises(ProjectSystemUnavailable) as caught:
        client.list_projects()
    assert caught.value.status is None and len(waits) == 4


def test_secrets_stay_out_of_repr_and_errors(procore_client, sandbox_company, sandbox_control):
    """Neither the client secret nor the access token shows in repr or error text."""
    procore_client.list_projects()
    token = procore_client._token
    assert token
    secret = sandbox_company["client_secret"]
    sandbox_control.fault(503, count=10, methods=["GET"])
    with pytest.raises(ProjectSystemUnavailable) as caught:
        procore_client.list_projects()
    for text in (repr(procore_client), str(procore_client), str(caught.value),
                 repr(caught.value)):
        assert secret not in text and token not in text
    assert "ProcoreClient(api_base=" in repr(procore_client)


def test_read_catalog_reads_each_list_once(procore_client, sandbox_company):
    """One pass gives the same codes as the separate reads, with one call per list."""
    project_id = next(p["id"] for p in sandbox_company["projects"] if p["change_events"])
    procore_client.list_projects()  # the token is fetched here, not counted below
    before = len(procore_client.calls)
    cost_codes, cost_types, budget_codes = procore_client.read_catalog(project_id)
    paths = [path for _, path in procore_client.calls[before:]]
    assert sorted(paths) == sorted([
        "/rest/v1.0/cost_codes", "/rest/v1.0/line_item_types",
        f"/rest/v1.0/projects/{project_id}/work_breakdown_structure/wbs_codes"])  # no sub jobs
    assert cost_codes == procore_client.list_cost_codes(project_id)
    assert cost_types == procore_client.list_cost_types(project_id)
    assert budget_codes == procore_client.list_budget_codes(project_id)


# Procore's published contract: uploads, units, budget code patterns, tools, manpower, limits

def test_attachments_go_through_the_direct_upload_flow(procore_client, sandbox_company,
                                                       sandbox_server):
    """Create an upload, send the file to storage without our token, attach it by uuid."""
    project = project_id(sandbox_company)
    record = procore_client.create_change_event(project, draft(procore_client, project))
    recorder = ExchangeRecorder()
    recorder.attach(procore_client)
    procore_client.attach_files(project, record.id,
                                [Attachment("signature.png", "image/png", b"\x89PNG-signature")])
    steps = [(exchange.method, urlsplit(exchange.url).path, exchange.status)
             for exchange in recorder.exchanges]
    assert steps == [("POST", f"/rest/v1.1/projects/{project}/uploads", 201),
                     ("POST", "/_sandbox/storage", 204),
                     ("PATCH", f"/rest/v1.1/change_events/{record.id}", 200),
                     ("GET", f"/rest/v1.1/change_events/{record.id}", 200)]
    upload, stored, patch, _read_back = recorder.exchanges
    assert "Authorization" not in stored.headers
    uuid = json.loads(upload.answer_body)["uuid"]
    assert json.loads(patch.body) == {"change_event": {"attachments_by_uuid": [
        {"upload_uuid": uuid}]}}
    event = procore_client.get_change_event(project, record.id)
    assert [item["filename"] for item in event["attachments"]] == ["signature.png"]
    download = requests.get(event["attachments"][0]["url"], timeout=10)
    assert download.content == b"\x89PNG-signature"


def test_units_of_measure_come_from_the_company_list(procore_client, sandbox_company):
    """Hours become the company's hour unit, a listed unit keeps its spelling, others are left out."""
    project = project_id(sandbox_company)
    assert procore_client.unit_of_measure("hr") == "HR"
    assert procore_client.unit_of_measure("hours") == "HR"
    assert procore_client.unit_of_measure("cy") == "CY"
    assert procore_client.unit_of_measure("bags") is None
    lines = (ChangeEventLine("Labor", None, "labor", Decimal("8"), Decimal("50"), Decimal("400"),
                             "hr"),
             ChangeEventLine("Sand", None, "materials", Decimal("3"), Decimal("10"),
                             Decimal("30"), "bags"))
    record = procore_client.create_change_event(project, ChangeEventDraft(
        "ticket-uom", "Units", "", lines))
    items = procore_client.get_change_event(project, record.id)["change_items"]
    assert [item["cost_impact"]["estimate"]["unit_of_measure"] for item in items] == ["HR", None]
    uoms = f"/companies/{sandbox_company['company_id']}/uoms"
    assert calls_to(procore_client, "GET", uoms) == 1
    procore_client.clock.advance(3601)
    procore_client.unit_of_measure("hr")
    assert calls_to(procore_client, "GET", uoms) == 2


def test_an_hour_unit_is_not_guessed_when_the_company_has_none(procore_client):
    """A company list without an hour unit leaves the field out instead of sending "hr"."""
    procore_client._uoms_read_at = procore_client.clock()
    procore_client._uoms = [{"name": "EA", "description": "Each", "is_standard": True}]
    assert procore_client.unit_of_measure("hr") is None
    procore_client._uoms = [{"name": "Hrs.", "description": "Hours", "is_standard": False},
                            {"name": "EA", "description": "Each", "is_standard": True}]
    assert procore_client.unit_of_measure("hr") == "Hrs."


def test_an_unknown_unit_is_refused_like_procore(sandbox_server, sandbox_company,
                                                 procore_client):
    """The sandbox answers 422 with an error body for a unit outside the company's list."""
    project = project_id(sandbox_company)
    procore_client.list_projects()
    answer = requests.post(
        f"{sandbox_server.url}/rest/v1.1/change_events", params={"project_id": project},
        headers={"Authorization": f"Bearer {procore_client._token}",
                 "Procore-Company-Id": str(sandbox_company["company_id"])},
        json={"change_event": {"scope": "out_of_scope",
                               "status": {"id": procore_client._open_status_id(project)},
                               "change_items": [{"description": "Labor", "cost_impact": {
                                   "estimate": {"amount": 10, "unit_of_measure": "hr"}}}]}},
        timeout=10)
    assert answer.status_code == 422
    assert answer.json()["errors"] == {"change_items[0].unit_of_measure": [
        "'hr' is not a unit of measure of this company"]}


@pytest.mark.parametrize("pattern, flat_code", [
    ("sub_job_first", "B1.02-200.L"), ("custom_segment", "02-200.L.01"),
    ("other_delimiter", "02-200/L"), ("cost_type_first", "L.02-200"),
    ("mixed_delimiters", "02-200/L-01"), ("company_segment", "02-200.L")])
def test_budget_codes_follow_each_projects_pattern(contract_client, contract_company, pattern,
                                                   flat_code):
    """Segment items, not the text of flat_code, say which cost code and cost type a code is."""
    project = contract_company["contract_projects"][pattern]
    cost_codes = {code.code: code.id for code in contract_client.list_cost_codes(project)
                  if code.sub_job is None or pattern == "sub_job_first"}
    codes = {code.flat_code: code for code in contract_client.list_budget_codes(project)}
    labor = codes[flat_code]
    assert (labor.cost_code_id, labor.cost_type) == (cost_codes["02-200"], "labor")
    assert all(code.cost_code_id is not None and code.cost_type for code in codes.values())


def test_an_inactive_budget_code_is_never_offered(contract_client, contract_company):
    """A code switched off in Procore is left out even when a list returns it."""
    project = contract_company["projects"][0]["id"]
    listed = contract_client.list_budget_codes(project)
    assert not any(code.flat_code == "31-230.L" for code in listed)
    assert any(code.flat_code == "31-230.E" for code in listed)


def test_budget_code_creation_stops_where_the_pattern_needs_more(contract_client,
                                                                 contract_company):
    """A pattern with a required sub-job segment gets a plain refusal, not a wrong code."""
    project = contract_company["contract_projects"]["sub_job_first"]
    masonry = next(code for code in contract_client.list_cost_codes(project)
                   if code.code == "04-200")
    with pytest.raises(ProjectSystemError) as caught:
        contract_client.create_budget_code(project, masonry.id, "labor")
    assert "also need a Sub Job" in caught.value.message
    assert calls_to(contract_client, "POST", "/wbs_codes") == 0


def test_a_company_segment_outside_the_pattern_is_neither_needed_nor_sent(contract_client,
                                                                          contract_company,
                                                                          sandbox_server):
    """A required company segment the project's pattern leaves out does not stop a budget code,
    and the sandbox refuses an item of it as Procore would."""
    project = contract_company["contract_projects"]["company_segment"]
    assert [row["name"] for row in contract_client.list_wbs_segments(project)] == \
        ["Cost Code", "Cost Type"]
    masonry = next(code for code in contract_client.list_cost_codes(project)
                   if code.code == "04-200")
    made = contract_client.create_budget_code(project, masonry.id, "labor")
    assert made.flat_code == "04-200.L"
    wbs = f"{sandbox_server.url}/rest/v1.0/projects/{project}/work_breakdown_structure"
    headers = {"Authorization": f"Bearer {contract_client._token}",
               "Procore-Company-Id": str(contract_company["company_id"])}
    phase = next(row for row in requests.get(f"{wbs}/segments", headers=headers, timeout=10).json()
                 if row["name"] == "Phase")
    assert phase["is_included_in_project_pattern"] is False and phase["required"] is True
    item = requests.get(f"{wbs}/segments/{phase['id']}/segment_items", headers=headers,
                        timeout=10).json()[0]
    pairs = [{"segment_id": row["segment_id"], "segment_item_id": row["id"]}
             for row in requests.get(f"{wbs}/wbs_codes", headers=headers, timeout=10).json()[0]
             ["segment_items"]]
    refused = requests.post(f"{wbs}/wbs_codes", headers=headers, timeout=10, json={
        "segment_items": pairs + [{"segment_id": phase["id"], "segment_item_id": item["id"]}]})
    assert refused.status_code == 422
    assert "not part of this project's budget code pattern" in refused.json()["message"]


def test_tool_list_decides_before_the_statuses_probe(contract_client, contract_company):
    """A project whose tool list lacks Change Events has none, although statuses answer 200."""
    project = contract_company["contract_projects"]["unlisted_tool"]
    assert contract_client.change_events_enabled(project) is False
    assert calls_to(contract_client, "GET", "/change_event/statuses") == 0
    assert contract_client._open_status_id(project)  # the statuses call itself answers
    enabled, why = contract_client.change_event_tool(project)
    assert not enabled and "no Change Events tool" in why


def test_statuses_probe_decides_only_when_the_tool_list_is_unreadable(procore_client,
                                                                      sandbox_company,
                                                                      sandbox_control):
    """A 403 on the tool list falls back to the statuses call."""
    project = project_id(sandbox_company)
    sandbox_control.fault(403, methods=["GET"], match="/tools", message="Forbidden")
    assert procore_client.change_events_enabled(project) is True
    assert calls_to(procore_client, "GET", "/change_event/statuses") == 1


def test_pending_manpower_entry_is_found_after_a_lost_answer(contract_client, contract_company,
                                                             sandbox_server, sandbox_control):
    """An entry Procore keeps pending, whose answer was lost, is found by origin: no second one."""
    project = contract_company["contract_projects"]["pending_manpower"]
    day = datetime.date(2026, 6, 5)
    control = SandboxControl(sandbox_server, contract_company)
    control.fault(500, after_commit=True, match="/manpower_logs")
    ticket = ManpowerDraft("ticket-pending", day, 2, Decimal("4"), "Cleanup after the pour")
    with pytest.raises(ProjectSystemUnavailable):
        contract_client.create_manpower_log(project, ticket)
    found = contract_client.find_manpower_log(project, "ticket-pending", day)
    assert found is not None
    assert contract_client.get_manpower_log(project, found.id)["status"] == "pending"
    assert not any("filters%5Bsearch%5D" in path or "filters[search]" in path
                   for _method, path in contract_client.calls)
    with closing(sqlite3.connect(sandbox_server.db_path)) as conn:
        assert conn.execute("SELECT count(*) FROM manpower_logs WHERE project_id = ?",
                            [project]).fetchone()[0] == 1
    control.close()


def test_pacing_never_sends_past_what_the_rate_limit_leaves(procore_client, sandbox_company,
                                                             sandbox_control):
    """With one call a window, an attach (upload, PATCH, read-back) waits for each reset
    instead of meeting a 429, and the file is attached once."""
    sandbox_control.set_spike_limit(None)  # the setup's calls count in no window
    project = project_id(sandbox_company)
    record = procore_client.create_change_event(project, draft(procore_client, project))
    procore_client.list_units_of_measure()
    clock = procore_client.clock

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)  # the fixture's clock moves the sandbox's on with it

    procore_client.sleep = sleep
    # The client's clock reads the frozen sandbox clock's time, so the wait it works out from
    # X-Rate-Limit-Reset is the sandbox's (at most the 10 s window), however slow the setup was.
    clock.now = sandbox_control.freeze_clock()
    sandbox_control.set_spike_limit(1)
    recorder = ExchangeRecorder()
    recorder.attach(procore_client)
    procore_client.attach_files(project, record.id,
                                [Attachment("photo-01.jpg", "image/jpeg", b"\xff\xd8photo")])
    sandbox_control.set_spike_limit(None)
    assert [exchange.status for exchange in recorder.exchanges] == [201, 204, 200, 200]
    # at most the 10 s window, and the second Procore's whole-second Date may add
    assert len(clock.sleeps) == 2 and all(0 < wait <= 11 for wait in clock.sleeps)
    paced = [exchange for exchange in recorder.exchanges if "/rest/" in exchange.url]
    assert all(exchange.answer_headers["X-Rate-Limit-Remaining"] == "0" for exchange in paced)
    event = procore_client.get_change_event(project, record.id)
    assert [item["filename"] for item in event["attachments"]] == ["photo-01.jpg"]


def test_empty_origin_data_is_left_out(procore_client, sandbox_company):
    """A draft without origin_data sends external_data with the origin id alone."""
    project = project_id(sandbox_company)
    recorder = ExchangeRecorder()
    recorder.attach(procore_client)
    record = procore_client.create_change_event(project, ChangeEventDraft(
        "ticket-no-data", "No origin data", "", ()))
    create = next(exchange for exchange in recorder.exchanges if exchange.method == "POST"
                  and urlsplit(exchange.url).path == "/rest/v1.1/change_events")
    assert json.loads(create.body)["change_event"]["external_data"] == {
        "origin_id": "ticket-no-data"}
    assert procore_client.find_change_event(project, "ticket-no-data").id == record.id


def test_delete_leaves_nothing_listed(procore_client, sandbox_company):
    """Deleted change events (204) and manpower entries (200) are no longer found by origin."""
    project = project_id(sandbox_company)
    recorder = ExchangeRecorder()
    recorder.attach(procore_client)
    record = procore_client.create_change_event(project, ChangeEventDraft(
        "ticket-delete", "To delete", "", ()))
    procore_client.delete_change_event(project, record.id)
    assert procore_client.find_change_event(project, "ticket-delete") is None
    day = datetime.date(2026, 6, 6)
    entry = procore_client.create_manpower_log(project, ManpowerDraft(
        "ticket-delete", day, 1, Decimal("1"), "x"))
    procore_client.delete_manpower_log(project, entry.id)
    assert procore_client.find_manpower_log(project, "ticket-delete", day) is None
    assert sorted(exchange.status for exchange in recorder.exchanges
                  if exchange.method == "DELETE") == [200, 204]


def test_spike_limit_on_a_create_is_waited_out(procore_client, sandbox_company, sandbox_control,
                                               sandbox_server):
    """A 429 the client did not see coming (another process spent the window) on a manpower
    create: one wait, one entry."""
    sandbox_control.set_spike_limit(None)  # the setup's calls count in no window
    project = project_id(sandbox_company, 2)
    procore_client.list_projects()
    clock = procore_client.clock

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)  # the fixture's clock moves the sandbox's on with it

    procore_client.sleep = sleep
    # The client's clock reads the frozen sandbox clock's time, so the wait it works out from
    # X-Rate-Limit-Reset is the sandbox's (at most the 10 s window), however slow the setup was.
    clock.now = sandbox_control.freeze_clock()
    sandbox_control.set_spike_limit(1)
    procore_client.list_cost_types(project)  # the window's one call
    procore_client.budget = LocalBudget()  # spent by another process: this one cannot know
    day = datetime.date(2026, 6, 7)
    record = procore_client.create_manpower_log(project, ManpowerDraft(
        "ticket-spike", day, 2, Decimal("3"), "Spike"))
    sandbox_control.set_spike_limit(None)
    assert len(clock.sleeps) == 1 and 0 < clock.sleeps[0] <= 10
    assert calls_to(procore_client, "POST", "/manpower_logs") == 2
    with closing(sqlite3.connect(sandbox_server.db_path)) as conn:
        assert conn.execute("SELECT count(*) FROM manpower_logs WHERE project_id = ?",
                            [project]).fetchone()[0] == 1
    assert procore_client.find_manpower_log(project, "ticket-spike", day).id == record.id


@pytest.mark.skipif(not REDIS_URL, reason="needs Redis; runs in make test-scale")
def test_two_processes_share_one_budget_through_redis(procore_client, sandbox_server,
                                                      sandbox_company, sandbox_control):
    """Two clients (two app processes) on one Redis budget: together never past the limit."""
    import redis

    key = f"ewt:procore-budget:test:{sandbox_company['company_id']}"
    store = redis.Redis.from_url(REDIS_URL)
    store.delete(key)
    clock = procore_client.clock
    other = ProcoreClient(sandbox_server.url, sandbox_server.url, sandbox_company["client_id"],
                          sandbox_company["client_secret"], sandbox_company["company_id"],
                          clock=clock, sleep=clock.sleep)
    statuses: list[int] = []
    for client in (procore_client, other):
        client.budget = RedisBudget(store, key)
        client.observer = lambda response, _body: statuses.append(response.status_code)

        def sleep(seconds: float) -> None:
            clock.sleep(seconds)  # the fixture's clock moves the sandbox's on with it

        client.sleep = sleep
    clock.now = sandbox_control.freeze_clock()
    sandbox_control.set_spike_limit(3)
    try:
        for turn in range(12):
            (procore_client, other)[turn % 2].list_projects()
    finally:
        sandbox_control.set_spike_limit(None)
        other.close()
    assert 429 not in statuses and statuses.count(200) >= 12
    # at most the 10 s window, and the second Procore's whole-second Date may add
    assert clock.sleeps and all(0 < wait <= 11 for wait in clock.sleeps)


@pytest.mark.parametrize("shape", ["v1", "v2"])
def test_errors_in_either_of_procores_shapes_read_as_plain_text(procore_client, sandbox_company,
                                                                sandbox_control, shape):
    """A 404 and an injected 422 give the project system's own words in both error shapes."""
    sandbox_control.set_error_shape(shape)
    with pytest.raises(ProjectSystemError) as missing:
        procore_client.get_change_event(project_id(sandbox_company), 1)
    assert missing.value.status == 404 and missing.value.message.startswith(
        "Change event not found"), missing.value.message
    sandbox_control.fault(422, methods=["GET"], match="/cost_codes", message="Unprocessable")
    with pytest.raises(ProjectSystemError) as refused:
        procore_client.list_cost_codes(project_id(sandbox_company))
    assert refused.value.status == 422 and refused.value.message == "Unprocessable"
    sandbox_control.set_error_shape("v1")

