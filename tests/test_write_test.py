"""`project-system check --write-test` against the sandbox playing a real Procore company."""
from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from services import connections
from services.project_system.write_test import run
from tests.test_approval import control

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


def test_write_test_writes_finds_and_deletes(app, runner, acme, sandbox_server):
    """The write test reports what it saw in plain words and leaves no live record behind."""
    result = runner.invoke(args=["project-system", "check", "--company", str(acme.company_id),
                                 "--write-test"])
    assert result.exit_code == 0, result.output
    output = result.output
    for text in ("write test on project", "tools switched on (Procore's engine names): ",
                 "change_events", "labor and equipment hours are sent as 'HR'",
                 "budget code pattern: Cost Code . Cost Type", "change event statuses: Open",
                 "attached two small files through Procore's direct upload, in two requests",
                 "found the test change event again by its origin id, with its attachments; "
                 "a second request adds to the files before it",
                 "found the test manpower entry again by its origin id",
                 "deleted test change event", "deleted test manpower entry"):
        assert text in output, (text, output)
    assert "FAIL" not in output
    live_events, manpower, uploads = counts(sandbox_server.db_path, acme.remote_company_id)
    assert (live_events, manpower, uploads) == (0, 0, 2)


def test_write_test_says_when_a_second_attach_replaces_the_first(app, runner, acme, sandbox_server):
    control(sandbox_server, acme).set_attachments_mode("replace")
    result = runner.invoke(args=["project-system", "check", "--company", str(acme.company_id),
                                 "--write-test"])
    assert result.exit_code == 0, result.output
    assert "a second request replaces the files before it" in result.output
    assert "FAIL" not in result.output


def test_write_test_names_a_missing_permission_approvals_do_not_need(app, runner, acme,
                                                                   sandbox_server):
    switch = control(sandbox_server, acme)
    switch.fault(403, count=2, methods=["DELETE"], message="User does not have right permissions")
    switch.fault(403, count=5, methods=["GET"], match="/uoms")
    with app.app_context():
        app.extensions.pop("project_system_clients", None)
    result = runner.invoke(args=["project-system", "check", "--company", str(acme.company_id),
                                 "--write-test"])
    assert result.exit_code == 0, result.output  # approvals would work
    assert "FAIL" not in result.output
    notes = [line.strip() for line in result.output.splitlines() if line.strip().startswith("note")]
    assert len(notes) == 3, result.output
    assert "units of measure cannot be read" in notes[0]
    assert "may not delete change events (Procore answered 403)" in notes[1]
    assert "may not delete daily log entries" in notes[2]
    live_events, manpower, _uploads = counts(sandbox_server.db_path, acme.remote_company_id)
    assert (live_events, manpower) == (1, 1)  # left for the firm to delete, as the notes say


def test_write_test_names_what_does_not_work(app, acme, sandbox_server, contract_company):
    """On a project whose tool list lacks Change Events, nothing is written and it says why."""
    connect_to(app, acme, sandbox_server, contract_company)
    project = contract_company["contract_projects"]["unlisted_tool"]
    with app.app_context():
        findings = run(connections.client_for(acme.company_id), project)
    failures = [text for ok, text in findings if not ok]
    assert failures == ["change events: the project's tool list has no Change Events tool",
                        "nothing was written, because the project's setup could not be read"]
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
        findings = run(connections.client_for(acme.company_id), project)
    texts = [text for _ok, text in findings]
    assert any(text.startswith(f"budget code pattern: {described};") for text in texts), texts
    assert all(ok for ok, _ in findings), findings
