"""`project-system check --write-test` against the sandbox playing a real Procore company."""
from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from models import RoutingDecision, Ticket, db
from services.approval.connection_check import run
from services.project_system import connections
from tests.test_approval import control, spike_limited

pytestmark = pytest.mark.live


def counts(db_path: str, company_id: int) -> tuple[int, int, int]:
    """Live change events, manpower entries and uploads of a sandbox company."""
    with closing(sqlite3.connect(db_path)) as conn:
        return (conn.execute("SELECT count(*) FROM change_events WHERE company_id = ? AND "
                             "deleted_at IS NULL", [company_id]).fetchone()[0],
                conn.execute("SELECT count(*) FROM manpower_logs WHERE company_id = ?",
                             [company_id]).fetchone()[0],
                conn.execute("SELECT count(*) FROM uploads WHERE company_id = ?",
                             [company_id]).fetchone()[0])


def connect_to(app, tenant, sandbox_server, company) -> None:
    """Point the tenant at another sandbox company."""
    with app.app_context():
        connections.save_connection(
            tenant.company_id, environment="custom", client_id=company["client_id"],
            client_secret=company["client_secret"], remote_company_id=company["company_id"],
            api_base=sandbox_server.url, oauth_base=sandbox_server.url)


def test_check_stays_read_only_without_the_option(app, runner, acme, sandbox_server):
    """Plain `check` writes nothing."""
    result = runner.invoke(args=["project-system", "check", "--company", str(acme.company_id)])
    assert result.exit_code == 0, result.output
    assert "write test" not in result.output
    assert counts(sandbox_server.db_path, acme.remote_company_id) == (0, 0, 0)


def scratch_left(app, company_id: int) -> tuple[int, int]:
    """Tickets and routing decisions the company still holds."""
    with app.app_context():
        return (db.session.query(Ticket).filter_by(company_id=company_id).count(),
                db.session.query(RoutingDecision).filter_by(company_id=company_id).count())


def write_test(runner, tenant, *extra: str):
    """Run `project-system check --write-test` for a tenant."""
    return runner.invoke(args=["project-system", "check", "--company", str(tenant.company_id),
                               "--write-test", *extra])


def test_write_test_approves_reads_back_and_removes_it_all(app, runner, acme, sandbox_server):
    """The write test approves scratch tickets through the real approval path, says what it
    saw in plain words, and leaves no record, ticket or learning evidence behind."""
    result = write_test(runner, acme)
    assert result.exit_code == 0, result.output
    output = result.output
    for text in ("change-event step on project", "tools switched on (Procore's engine names): ",
                 "change_events", "labor and equipment hours are sent as 'HR'",
                 "budget code pattern: Cost Code . Cost Type", "change event statuses: Open",
                 "created budget code 01-500.L for cost code 01-500",
                 "with 3 lines (a labor line, a material line and a markup; 3 on a budget code) "
                 "and 4 files (two photos, the signature, the signed PDF), found again by its "
                 "origin id",
                 "attached one more file in a second request: Procore adds it to the files",
                 "as a daily log entry on project", "Lincoln Elementary Renovation",
                 "found again by its origin id", "deleted test change event",
                 "deleted test manpower entry", "removed the 2 scratch tickets"):
        assert text in output, (text, output)
    assert "FAIL" not in output and "note" not in output, output
    live_events, manpower, uploads = counts(sandbox_server.db_path, acme.remote_company_id)
    assert (live_events, manpower, uploads) == (0, 0, 5)  # 2 photos, signature, PDF, one more
    assert scratch_left(app, acme.company_id) == (0, 0)


def test_write_test_passes_when_a_second_attach_replaces_the_first(app, runner, acme,
                                                                    sandbox_server, monkeypatch):
    """In replace mode, and under Procore's spike limit, which the calls wait out."""
    control(sandbox_server, acme).set_attachments_mode("replace")
    with spike_limited(app, acme, sandbox_server, monkeypatch) as (clock, statuses):
        result = write_test(runner, acme)
    assert 429 not in statuses and len(statuses) > 25 and clock.sleeps  # paced, never refused
    assert result.exit_code == 0, result.output
    assert "and 4 files (two photos, the signature, the signed PDF)" in result.output
    assert "Procore replaces the files before it" in result.output
    assert "FAIL" not in result.output


def test_write_test_names_a_missing_permission_approvals_do_not_need(app, runner, acme,
                                                                   sandbox_server):
    switch = control(sandbox_server, acme)
    switch.fault(403, count=2, methods=["DELETE"], message="User does not have right permissions")
    switch.fault(403, count=5, methods=["GET"], match="/uoms")
    switch.fault(403, count=50, methods=["GET"], match="/tools")
    with app.app_context():
        app.extensions.pop("project_system_clients", None)
    result = write_test(runner, acme)
    assert result.exit_code == 0, result.output  # approvals would work
    assert "FAIL" not in result.output
    notes = [line.strip() for line in result.output.splitlines() if line.strip().startswith("note")]
    assert len(notes) == 4, result.output
    assert "the project's tool list cannot be read with these permissions" in notes[0]
    assert "units of measure cannot be read" in notes[1]
    assert "may not delete change events (Procore answered 403)" in notes[2]
    assert "may not delete daily log entries" in notes[3]
    live_events, manpower, _uploads = counts(sandbox_server.db_path, acme.remote_company_id)
    assert (live_events, manpower) == (1, 1)  # left for the firm to delete, as the notes say
    assert scratch_left(app, acme.company_id) == (0, 0)


def test_write_test_fails_plainly_when_approval_would_fail(app, runner, acme, sandbox_server):
    """A refused change-event write is a FAIL naming the step, and nothing is left behind."""
    control(sandbox_server, acme).fault(403, count=1, methods=["POST"], match="/change_events",
                                        message="User does not have right permissions")
    result = write_test(runner, acme)
    assert result.exit_code == 1, result.output
    failures = [line for line in result.output.splitlines() if line.strip().startswith("FAIL")]
    assert len(failures) == 1 and "approving a scratch ticket as a change event failed" in \
        failures[0], result.output
    assert "as a daily log entry on project" in result.output  # the next step still ran
    assert counts(sandbox_server.db_path, acme.remote_company_id)[:2] == (0, 0)
    assert scratch_left(app, acme.company_id) == (0, 0)


def test_write_test_names_what_does_not_work(app, acme, sandbox_server, contract_company):
    """On a project whose tool list lacks Change Events, the change-event step is skipped
    and it says why; the daily-log step still runs there."""
    connect_to(app, acme, sandbox_server, contract_company)
    project = contract_company["contract_projects"]["unlisted_tool"]
    with app.app_context():
        findings = run(acme.company_id, project)
    assert [text for ok, text in findings if ok is False] == []
    assert (None, "change events: the project's tool list has no Change Events tool; the "
                  "change-event step is skipped") in findings
    assert any(ok and text.startswith(f"approved a scratch ticket as a daily log entry on "
                                      f"project {project}") for ok, text in findings), findings
    assert counts(sandbox_server.db_path, contract_company["company_id"])[0] == 0


def test_write_test_writes_the_daily_log_where_the_tool_is_and_reuses_its_budget_code(
        app, runner, acme, sandbox_server):
    # The first project without change events (Lincoln Elementary) has its Daily Log off:
    # the daily log entry goes where the tool is on, and the check says where; a second run
    # uses the labor budget code the first one made instead of making another.
    lincoln = acme.project(change_events=False)
    control(sandbox_server, acme).set_tool(int(lincoln["id"]), "daily_log", False)
    first, second = write_test(runner, acme), write_test(runner, acme)
    for result in (first, second):
        assert result.exit_code == 0, result.output
        assert "FAIL" not in result.output, result.output
        assert f"daily log entry on project {lincoln['id']}" not in result.output
        step = next(line for line in result.output.splitlines()
                    if "change-event step on project" in line).split("on project ")[1]
        assert f"as a daily log entry on project {step}: manpower entry" in result.output
        assert "the daily log entry goes on project" in result.output  # said, as a note
    assert "created budget code 01-500.L" in first.output
    assert "budget code 01-500.L made by an earlier connection test is used again" in \
        second.output
    with closing(sqlite3.connect(sandbox_server.db_path)) as conn:
        made = conn.execute(
            "SELECT count(*) FROM wbs_codes JOIN projects ON projects.id = wbs_codes.project_id "
            "WHERE description = ? AND projects.company_id = ?",
            ["Connection test labor (extra-work ticket service)",
             acme.remote_company_id]).fetchone()[0]
    assert made == 1


def test_write_test_skips_a_step_no_project_has_the_tool_for(app, acme, sandbox_server,
                                                            contract_company):
    # A project with neither tool: both steps are skipped with a note, nothing fails.
    connect_to(app, acme, sandbox_server, contract_company)
    project = contract_company["contract_projects"]["no_tools"]
    with app.app_context():
        findings = run(acme.company_id, project)
    assert [text for ok, text in findings if ok is False] == []
    notes = [text for ok, text in findings if ok is None]
    assert any("the change-event step is skipped" in text for text in notes), findings
    assert any("the daily-log step is skipped" in text for text in notes), findings
    assert counts(sandbox_server.db_path, contract_company["company_id"]) == (0, 0, 0)


@pytest.mark.parametrize("pattern, described", [
    ("sub_job_first", "Sub Job . Cost Code . Cost Type"),
    ("mixed_delimiters", "Cost Code / Cost Type - Area")])
def test_write_test_reads_another_pattern(app, acme, sandbox_server, contract_company, pattern,
                                          described):
    """A sub-job-first project, or one whose delimiters differ, is described as such (each
    delimiter after its own segment), and its codes still map."""
    connect_to(app, acme, sandbox_server, contract_company)
    project = contract_company["contract_projects"][pattern]
    with app.app_context():
        findings = run(acme.company_id, project)
    texts = [text for _ok, text in findings]
    assert any(text.startswith(f"budget code pattern: {described};") for text in texts), texts
    assert [text for ok, text in findings if ok is False] == []
    assert any(text.startswith("created budget code B1.01-500.L") for text in texts) \
        if pattern == "sub_job_first" else \
        any("budget codes also need a Area" in text for text in texts), texts
