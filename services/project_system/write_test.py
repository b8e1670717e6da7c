"""The connection write test: read what a real Procore project looks like, write, find, delete.

It reads the tool list, units of measure, budget-code pattern and change-event statuses of one
project, then writes one change event (one line item, two small attachments in two requests)
and one manpower entry, both marked as a test, finds both again by origin id, and deletes them.
Every step becomes one plain sentence, so a firm learns on day one whether approvals will
write; a permission approvals do not need (deleting, the units of measure, the tool list) is
named as a note, not a failure.
"""
from __future__ import annotations

import datetime as dt
import secrets
from decimal import Decimal

from services.project_system.base import (
    Attachment,
    ChangeEventDraft,
    ChangeEventLine,
    ManpowerDraft,
    ProjectSystemError,
    RemoteProject,
    RemoteRecord,
)
from services.project_system.procore import ProcoreClient

# (True, text): works; (False, text): approvals would fail; (None, text): approvals work, but
# something the firm should know (a permission the service account lacks, say).
Finding = tuple[bool | None, str]
TEST_NOTE = ("Connection test by the extra-work ticket service. It deletes this record itself "
             "a moment later; if you can read this, delete it.")
TEST_FILE = Attachment("connection-test.txt", "text/plain",
                       b"Connection test by the extra-work ticket service. Safe to delete.\n")
SECOND_FILE = Attachment("connection-test-2.txt", "text/plain",
                         b"Second connection test file. Safe to delete.\n")


def pick_project(client: ProcoreClient, projects: list[RemoteProject],
                 wanted: int | None) -> RemoteProject | None:
    """The chosen project, or the first active one with the change-event tool."""
    if wanted is not None:
        return next((project for project in projects if project.id == wanted), None)
    for project in projects:
        if project.active and client.change_events_enabled(project.id):
            return project
    return None


def describe_pattern(segments: list[dict]) -> str:
    """A budget-code pattern in words, e.g. "Sub Job . Cost Code . Cost Type"."""
    text = ""
    for index, segment in enumerate(segments):
        name = segment.get("name") or segment.get("type") or "?"
        # A segment's delimiter stands between it and the next segment.
        delimiter = (segments[index - 1].get("delimiter") or ".") if index else ""
        text += f" {delimiter} {name}" if index else name
    return text or "no segments"


def run(client: ProcoreClient, project_id: int | None = None,
        today: dt.date | None = None) -> list[Finding]:
    """Read one project's setup, write a test change event and manpower entry, then delete them."""
    findings: list[Finding] = []
    try:
        project = pick_project(client, client.list_projects(), project_id)
    except ProjectSystemError as error:
        return [(False, f"could not list the projects: {error}")]
    if project is None:
        return [(False, f"project {project_id} is not visible to the app" if project_id else
                 "no active project with the Change Events tool is visible; name one with "
                 "--project")]
    findings.append((True, f"write test on project {project.id} {project.name}"))
    findings += _read_setup(client, project.id)
    if any(ok is False for ok, _ in findings):
        findings.append((False, "nothing was written, because the project's setup could not "
                                "be read"))
        return findings
    origin = f"ewt-connection-test-{secrets.token_hex(6)}"
    findings += _write_change_event(client, project.id, origin)
    findings += _write_manpower(client, project.id, origin, today or dt.date.today())
    return findings


def _read_setup(client: ProcoreClient, project_id: int) -> list[Finding]:
    """What the project's tools, units, budget-code pattern and statuses look like."""
    findings: list[Finding] = []
    try:
        tools = client.list_tools(project_id)
        if tools is None:
            findings.append((None, "the project's tool list cannot be read with these "
                                   "permissions: whether change events are on is learned from "
                                   "their statuses instead"))
        else:
            names = ", ".join(sorted(str(row.get("engine_name")) for row in tools
                                     if row.get("is_active", True)))
            findings.append((True, f"tools switched on (Procore's engine names): {names}"))
        enabled, why = client.change_event_tool(project_id)
        findings.append((enabled, f"change events: {why}"))
        units = client.list_units_of_measure()
        hour = client.unit_of_measure("hr")
        if not client.units_readable:
            findings.append((None, "the company's units of measure cannot be read with these "
                                   "permissions (Procore answered 403 or 404): approvals write "
                                   "lines without a unit; give the service account read access "
                                   "to the company's units of measure to send hours as hours"))
        else:
            findings.append((True, f"{len(units)} units of measure; labor and equipment hours "
                                   f"are sent as {hour!r}" if hour else
                                   f"{len(units)} units of measure, none of them hours: labor "
                                   "and equipment lines are sent without a unit"))
        segments = client.list_wbs_segments(project_id)
        codes = client.list_budget_codes(project_id)
        readable = sum(1 for code in codes if code.cost_code_id and code.cost_type)
        findings.append((bool(codes) and readable == len(codes),
                         f"budget code pattern: {describe_pattern(segments)}; {len(codes)} "
                         f"active budget codes, {readable} of them tied to a cost code and a "
                         "cost type"))
        statuses = [row.get("name") for row in client.list_change_event_statuses(project_id)]
        findings.append((True, f"change event statuses: {', '.join(map(str, statuses))}"))
    except ProjectSystemError as error:
        findings.append((False, f"reading the project's setup failed: {error}"))
    return findings


def _write_change_event(client: ProcoreClient, project_id: int, origin: str) -> list[Finding]:
    """Create a test change event with one line and one attachment, find it, delete it."""
    findings: list[Finding] = []
    codes = client.list_budget_codes(project_id)
    code = next((code for code in codes if code.cost_type == "labor"), None)
    draft = ChangeEventDraft(
        origin_id=origin, title="Connection test (safe to delete)", description=TEST_NOTE,
        lines=(ChangeEventLine("Connection test line", code.id if code else None, "labor",
                               Decimal("1"), Decimal("0.01"), Decimal("0.01"), "hr"),))
    started = dt.datetime.now(dt.UTC)
    record: RemoteRecord | None = None
    try:
        record = client.create_change_event(project_id, draft)
        findings.append((True, f"created test change event {record.id}"
                               f"{' on budget code ' + code.flat_code if code else ''}"))
        client.attach_files(project_id, record.id, [TEST_FILE])  # two requests, one file each
        client.attach_files(project_id, record.id, [SECOND_FILE])
        findings.append((True, "attached two small files through Procore's direct upload, "
                               "in two requests"))
        found = client.find_change_event(project_id, origin, created_after=started)
        if found is None or found.id != record.id:
            findings.append((False, "the test change event was NOT found again by its origin "
                                    "id: a retry after a lost answer could write it twice"))
        elif SECOND_FILE.filename not in found.attachment_filenames:
            findings.append((False, "the change event was found, but without its attachment"))
        else:
            # Approvals send all of a ticket's files in one request and read them back, so
            # either behaviour is safe; which one it is, is worth knowing.
            kept = TEST_FILE.filename in found.attachment_filenames
            findings.append((True, "found the test change event again by its origin id, with "
                                   "its attachments; a second request "
                                   f"{'adds to' if kept else 'replaces'} the files before it"))
    except ProjectSystemError as error:
        findings.append((False, f"writing a change event failed: {error}"))
    finally:
        findings.append(_delete_change_event(client, project_id, origin, record, started))
    return findings


def _delete_change_event(client: ProcoreClient, project_id: int, origin: str,
                         record: RemoteRecord | None, started: dt.datetime) -> Finding:
    """Delete the test change event, looking it up first when its create had no answer."""
    try:
        if record is None:
            record = client.find_change_event(project_id, origin, created_after=started)
            if record is None:
                return True, "no test change event was left behind"
        client.delete_change_event(project_id, record.id)
    except ProjectSystemError as error:
        if error.status == 403:
            return None, (_may_not_delete("change events") + f"; delete test change event "
                          f"{record.id if record else origin} in Procore")
        return False, (f"could not delete test change event "
                       f"{record.id if record else origin}: {error}; delete it in Procore")
    return True, (f"deleted test change event {record.id} (Procore keeps deleted change "
                  "events in the project's recycle bin)")


def _write_manpower(client: ProcoreClient, project_id: int, origin: str,
                    today: dt.date) -> list[Finding]:
    """Create a test manpower entry, find it by origin in any status, delete it."""
    findings: list[Finding] = []
    record: RemoteRecord | None = None
    try:
        record = client.create_manpower_log(project_id, ManpowerDraft(
            origin_id=origin, date=today, num_workers=1, num_hours=Decimal("1"),
            notes=TEST_NOTE))
        status = client.get_manpower_log(project_id, record.id).get("status")
        findings.append((True, f"created test manpower entry {record.id} (status {status})"))
        found = client.find_manpower_log(project_id, origin, today)
        findings.append((found is not None and found.id == record.id,
                         "found the test manpower entry again by its origin id" if found else
                         "the test manpower entry was NOT found again by its origin id"))
    except ProjectSystemError as error:
        findings.append((False, f"writing a daily log manpower entry failed: {error}"))
    finally:
        try:
            if record is None:
                record = client.find_manpower_log(project_id, origin, today)
            if record is not None:
                client.delete_manpower_log(project_id, record.id)
                findings.append((True, f"deleted test manpower entry {record.id}"))
        except ProjectSystemError as error:
            findings.append((None, _may_not_delete("daily log entries") + "; delete the test "
                                   "manpower entry in Procore") if error.status == 403 else
                            (False, f"could not delete the test manpower entry: {error}; "
                                    "delete it in Procore"))
    return findings


def _may_not_delete(what: str) -> str:
    """A note that the service account lacks a delete permission approvals never use."""
    return (f"the service account may not delete {what} (Procore answered 403); approvals "
            "never delete, so they still work")
