"""The connection write test: scratch tickets approved through the real approval path, then removed.

It reads the tool lists of at most MAX_PROJECTS_READ active projects (or of the one named)
to find a project with Change Events and one with the Daily Log, saying which it uses and
skipping a step, with a note, where none has the tool. On the first it reads the units of
measure, budget-code pattern and statuses; makes a labor budget code the project lacks (or
uses the one an earlier run made); captures a scratch ticket (two photos, a signature, a
markup line) and approves it as a PM would, so its change event is written and its files
attached and read back; attaches one more file in a second request, to learn whether Procore
adds to the files or replaces them. On the second (one without change events where there is
one) it approves a scratch ticket as a daily log entry. Then it deletes both records, the
scratch tickets and what learning kept of them. Every step is one plain sentence, so a firm
learns on day one whether approvals will write; a permission approvals do not need (deleting,
the units of measure, the tool list) is named as a note, not a failure.
"""
from __future__ import annotations

import base64
import datetime as dt
import io
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from PIL import Image, ImageDraw

from models.schemas import ApproveInput
from services.approval import approval
from services.approval.approval_records import origin_id
from services.capture import tickets
from services.platform.errors import ServiceError
from services.project_system import (
    Attachment,
    BudgetCode,
    ProjectSystemError,
    RemoteProject,
    RemoteRecord,
    connections,
    projects,
)
from services.project_system.procore import ProcoreClient, is_daily_log_tool
from services.webhooks import webhooks

# (True, text): works; (False, text): approvals would fail; (None, text): approvals work, but
# something the firm should know (a permission the service account lacks, say).
Finding = tuple[bool | None, str]
ACTOR = "connection test"
# The description of the labor budget code the test makes, by which a later run finds it.
TEST_CODE = "Connection test labor (extra-work ticket service)"
# At most this many projects' tool lists are read to find where the steps can write.
MAX_PROJECTS_READ = 10
TEST_NOTE = ("Connection test by the extra-work ticket service. It deletes this record itself "
             "a moment later; if you can read this, delete it.")
EXTRA_FILE = Attachment("connection-test.txt", "text/plain",
                        b"Connection test by the extra-work ticket service. Safe to delete.\n")


@dataclass
class Scratch:
    """What the test wrote, so that all of it is removed whatever step failed."""

    tickets: list[str] = field(default_factory=list)
    change_event: tuple[int, str] | None = None   # project, origin id
    manpower: tuple[int, str, dt.date] | None = None  # project, origin id, log date
    started: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))


@dataclass(frozen=True)
class Surveyed:
    """A project whose tools the test read: change events on (and why), Daily Log on (None:
    its tool list could not be read)."""

    project: RemoteProject
    change_events: bool
    why: str
    daily_log: bool | None


def survey(client: ProcoreClient, projects_seen: list[RemoteProject],
           wanted: int | None) -> list[Surveyed]:
    """The tools of the named project, or of at most MAX_PROJECTS_READ active ones (a large
    company has hundreds, each a paced call or two)."""
    chosen = [project for project in projects_seen if project.id == wanted] if wanted \
        else [project for project in projects_seen if project.active][:MAX_PROJECTS_READ]
    found = []
    for project in chosen:
        tools = client.list_tools(project.id)
        enabled, why = client.change_event_tool(project.id, tools)
        daily_log = None if tools is None else any(
            is_daily_log_tool(row) and row.get("is_active", True) for row in tools)
        found.append(Surveyed(project, enabled, why, daily_log))
    return found


def daily_log_project(surveyed: list[Surveyed]) -> Surveyed | None:
    """Where the daily-log step writes: a project with the Daily Log and without change events
    (as approvals do), else one with both; one whose tool list is unreadable last."""
    ranked = sorted((entry for entry in surveyed if entry.daily_log is not False),
                    key=lambda entry: (entry.daily_log is None, entry.change_events))
    return ranked[0] if ranked else None


def describe_pattern(segments: list[dict]) -> str:
    """A budget-code pattern in words, e.g. "Sub Job . Cost Code . Cost Type"."""
    text = ""
    for index, segment in enumerate(segments):
        name = segment.get("name") or segment.get("type") or "?"
        # A segment's delimiter stands between it and the next segment.
        delimiter = (segments[index - 1].get("delimiter") or ".") if index else ""
        text += f" {delimiter} {name}" if index else name
    return text or "no segments"


def run(company_id: int, project_id: int | None = None) -> list[Finding]:
    """Read one project's setup, approve scratch tickets onto it and a daily log, remove all."""
    client = connections.client_for(company_id)
    try:
        seen = client.list_projects()
        surveyed = survey(client, seen, project_id)
    except ProjectSystemError as error:
        return [(False, f"could not list the projects or their tools: {error}")]
    if project_id is not None and not surveyed:
        return [(False, f"project {project_id} is not visible to the app")]
    read = (f"project {project_id}" if project_id else
            f"the first {len(surveyed)} active project(s) of {len(seen)}")
    changes = next((entry for entry in surveyed if entry.change_events), None)
    logs = daily_log_project(surveyed)
    findings: list[Finding] = []
    if changes is None and project_id is not None:
        findings.append((None, f"change events: {surveyed[0].why}; the change-event step is "
                               "skipped"))
    elif changes is None:
        findings.append((None, f"no project with the Change Events tool among {read}: the "
                               "change-event step is skipped (name one with --project)"))
    else:
        findings.append((True, f"change-event step on project {changes.project.id} "
                               f"{changes.project.name}"))
        findings += _read_setup(client, changes.project.id, changes.why)
    if logs is None:
        findings.append((None, f"no project with the Daily Log tool among {read}: the daily-log "
                               "step is skipped"))
    if any(ok is False for ok, _ in findings):
        findings.append((False, "nothing was written, because the project's setup could not "
                                "be read"))
        return findings
    scratch = Scratch()
    with webhooks.silenced():  # scratch tickets are nobody's business: no events
        try:
            if changes is not None:
                findings += _step("approving a scratch ticket as a change event",
                                  lambda: _change_event(company_id, client, changes.project, scratch))
            if logs is not None:
                findings += _step(f"approving a scratch ticket as a daily log entry on project "
                                  f"{logs.project.id} {logs.project.name}",
                                  lambda: _daily_log(company_id, client, logs, scratch))
        finally:
            findings += _remove(company_id, client, scratch)
    return findings


def _step(what: str, step: Callable[[], list[Finding]]) -> list[Finding]:
    """A step's findings, or one failure naming what Procore or the service refused."""
    try:
        return step()
    except (ProjectSystemError, ServiceError) as error:
        return [(False, f"{what} failed: {error}")]


def _read_setup(client: ProcoreClient, project_id: int, why: str) -> list[Finding]:
    """What the project's tools, units, budget-code pattern and statuses look like (`why`:
    how its change events were found on)."""
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
        findings.append((True, f"change events: {why}"))
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


# ----------------------------------------------------------------- the change event

def _change_event(company_id: int, client: ProcoreClient, project: RemoteProject,
                  scratch: Scratch) -> list[Finding]:
    """Approve a scratch ticket with photos, a signature and a markup onto a created budget code,
    check what Procore keeps, then attach one more file in a second request."""
    findings, labor = _labor_code(company_id, project.id)
    if labor is None:
        return findings + [(False, "the project has no labor budget code, and none could be "
                                   "created: a labor line has nowhere to go")]
    markup = {"name": "Overhead (connection test)", "kind": "overhead", "percent": "50",
              "applies_to": ["labor", "materials"], "compound": False, "budget_code_id": labor.id}
    ticket_id = _scratch_ticket(company_id, project.id, scratch, with_evidence=True,
                                project_markups=[markup])
    scratch.change_event = (project.id, origin_id(ticket_id))
    written = approval.approve(company_id, ticket_id, ApproveInput(
        routes={"0": labor.id, "1": labor.id}), ACTOR).external
    record = client.find_change_event(project.id, origin_id(ticket_id),
                                      created_after=scratch.started - dt.timedelta(minutes=1))
    if written is None or record is None or record.id != written.change_event_id:
        return findings + [(False, "the approved change event was NOT found again by its origin "
                                   "id: a retry after a lost answer could write it twice")]
    items = client.get_change_event(project.id, record.id).get("change_items") or []
    coded = sum(1 for item in items if item.get("budget_code"))
    files = record.attachment_filenames
    findings.append((len(files) == 4 and len(items) == coded == 3,
                     f"approved a scratch ticket as a PM would: change event {record.id} with "
                     f"{len(items)} lines (a labor line, a material line and a markup; "
                     f"{coded} on a budget code) and "
                     f"{len(files)} files (two photos, the signature, the signed PDF), found "
                     "again by its origin id and read back"))
    kept = client.attach_files(project.id, record.id, [EXTRA_FILE],
                               known_ids=record.attachment_ids).attachment_filenames
    adds = all(name in kept for name in files)
    findings.append((EXTRA_FILE.filename in kept,
                     "attached one more file in a second request: Procore "
                     f"{'adds it to' if adds else 'replaces'} the files before it (approvals send "
                     "all of a ticket's files in one request and check them, so either works)"))
    return findings


def _labor_code(company_id: int, project_id: int) -> tuple[list[Finding], BudgetCode | None]:
    """A labor budget code for the test: the one an earlier run made (found by its
    description), else one created for a cost code without one, else one the project has."""
    codes = projects.catalog(company_id, str(project_id))
    earlier = next((code for code in codes.budget_codes
                    if code.cost_type == "labor" and code.description == TEST_CODE), None)
    if earlier is not None:
        return [(True, f"budget code {earlier.flat_code} made by an earlier connection test is "
                       "used again; none was created")], earlier
    budgeted = {code.cost_code_id for code in codes.budget_codes}
    missing = next((code for code in codes.cost_codes if code.id in budgeted
                    and codes.budget_code(code.id, "labor") is None), None)
    existing = next((code for code in codes.budget_codes if code.cost_type == "labor"), None)
    if missing is None:
        return [(True, "every cost code has a labor budget code; none was created")], existing
    try:
        made = projects.create_budget_code(company_id, str(project_id), missing.id, "labor",
                                           TEST_CODE)
    except ServiceError as error:
        return [(None if existing else False,
                 f"could not create a labor budget code for cost code {missing.shown} ({error}); "
                 "approvals still route to the budget codes the project has")], existing
    created = projects.catalog(company_id, str(project_id)).budget_code_by_id(made.id)
    return [(True, f"created budget code {made.code} for cost code {missing.shown}, as a PM "
                   "does from the review page (Procore keeps budget codes; this one is unused "
                   "once the test change event is deleted, and the next test uses it "
                   "again)")], created


# ----------------------------------------------------------------- the daily log

def _daily_log(company_id: int, client: ProcoreClient, target: Surveyed,
               scratch: Scratch) -> list[Finding]:
    """Approve a scratch ticket as a daily log entry on a project with the Daily Log tool, and
    find the entry again by its origin id in any status."""
    project = target.project
    findings: list[Finding] = []
    if target.change_events:
        findings.append((None, "no project with the Daily Log tool and without change events "
                               f"was found; the daily log entry goes on project {project.id} "
                               f"{project.name}"))
    ticket_id = _scratch_ticket(company_id, project.id, scratch, with_evidence=False)
    written = approval.approve(company_id, ticket_id, ApproveInput(destination="daily_log"),
                               ACTOR)
    day = dt.date.fromisoformat(client.get_manpower_log(
        project.id, written.external.manpower_log_id)["date"])
    scratch.manpower = (project.id, origin_id(ticket_id), day)
    found = client.find_manpower_log(project.id, origin_id(ticket_id), day)
    status = client.get_manpower_log(project.id, written.external.manpower_log_id).get("status")
    findings.append((found is not None and found.id == written.external.manpower_log_id,
                     f"approved a scratch ticket as a daily log entry on project {project.id} "
                     f"{project.name}: manpower entry {written.external.manpower_log_id} (status "
                     f"{status}), found again by its origin id" if found else
                     "the daily log entry was NOT found again by its origin id: a retry after a "
                     "lost answer could write it twice"))
    return findings


# ----------------------------------------------------------------- scratch tickets

def _scratch_ticket(company_id: int, project_id: int, scratch: Scratch, *, with_evidence: bool,
                    project_markups: list[dict] | None = None) -> str:
    """Capture a scratch ticket of a cent a line, as a program would; its id is kept for removal."""
    payload = {"project_id": str(project_id), "description": TEST_NOTE,
               "reason": "Connection test of approvals", "directed_by": "Connection test",
               "labor": [{"trade": "Connection test", "hours": 1, "workers": 1, "rate": 0.01}],
               "materials": [{"description": "Connection test item", "quantity": 1,
                              "unitCost": 0.01}],
               "client_ref": f"connection-test-{secrets.token_hex(8)}"}
    if with_evidence:
        payload["photos"] = [{"name": f"connection-test-{n}.jpg", "data_url": _photo()}
                             for n in (1, 2)]
        payload["signature"] = {"name": "Connection test", "role": "Test",
                                "image": _signature()}
    else:
        del payload["materials"]
    ticket, _created = tickets.create_ticket(company_id, tickets.validate_ticket(payload),
                                             project_markups=project_markups or [])
    scratch.tickets.append(ticket.id)
    return ticket.id


def _photo() -> str:
    """A small JPEG of noise, so that no two tests share a stored file."""
    image = Image.frombytes("RGB", (160, 120), secrets.token_bytes(160 * 120 * 3))
    return _data_url(image, "JPEG", "image/jpeg")


def _signature() -> str:
    """A PNG of a drawn stroke."""
    image = Image.new("RGBA", (400, 120), (255, 255, 255, 0))
    ImageDraw.Draw(image).line([(20, 90), (120, 30), (220, 80), (380, 40)], fill="black",
                               width=4)
    return _data_url(image, "PNG", "image/png")


def _data_url(image: Image.Image, kind: str, media_type: str) -> str:
    """An image as a data URL."""
    buffer = io.BytesIO()
    image.save(buffer, kind)
    return f"data:{media_type};base64,{base64.b64encode(buffer.getvalue()).decode()}"


# ----------------------------------------------------------------- removing it all

def _remove(company_id: int, client: ProcoreClient, scratch: Scratch) -> list[Finding]:
    """Delete the records in Procore, then the scratch tickets with their learning evidence."""
    findings = []
    if scratch.change_event is not None:
        project_id, origin = scratch.change_event
        findings.append(_delete(lambda: client.find_change_event(
            project_id, origin, created_after=scratch.started - dt.timedelta(minutes=1)),
            lambda record: client.delete_change_event(project_id, record.id),
            "change event", "change events", " (Procore keeps deleted change events in the "
                                             "project's recycle bin)"))
    if scratch.manpower is not None:
        project_id, origin, day = scratch.manpower
        findings.append(_delete(lambda: client.find_manpower_log(project_id, origin, day),
                                lambda record: client.delete_manpower_log(project_id, record.id),
                                "manpower entry", "daily log entries", ""))
    if scratch.tickets:
        removed = tickets.discard_scratch(company_id, scratch.tickets)
        findings.append((removed == len(scratch.tickets),
                         f"removed the {removed} scratch tickets and what learning kept of them "
                         "(their image files go with the next photo sweep)"))
    return findings


def _delete(find: Callable[[], RemoteRecord | None], delete: Callable[[RemoteRecord], None],
            what: str, many: str, after: str) -> Finding:
    """Find a test record by its origin id and delete it; a refused delete is a note."""
    record = None
    try:
        record = find()
        if record is None:
            return True, f"no test {what} was left behind"
        delete(record)
    except ProjectSystemError as error:
        name = f"test {what} {record.id}" if record else f"the test {what}"
        if error.status == 403:
            return None, (f"the service account may not delete {many} (Procore answered 403); "
                          f"approvals never delete, so they still work; delete {name} in Procore")
        return False, f"could not delete {name}: {error}; delete it in Procore"
    return True, f"deleted test {what} {record.id}{after}"
