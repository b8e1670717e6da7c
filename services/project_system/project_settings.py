"""How a project's change events are written: Procore's event type and change reason.

Every change event is out of scope (the work is extra); the type defaults to "tbd" and the
change reason to none until a PM sets them on the rates page or through the API.
"""
from __future__ import annotations

from dataclasses import dataclass

from models import ProjectSettings, db, utcnow
from models.schemas import ChangeReasonItem, EventType, ProjectSettingsInput, ProjectSettingsOut
from services.platform.database import insert_or_merge, write_transaction
from services.platform.errors import Conflict, field_problem
from services.project_system import projects
from services.project_system.commitments import change_reasons


@dataclass(frozen=True)
class Stored:
    """A project's settings as kept (the defaults when none are)."""

    event_type: str = EventType.TBD.value
    change_reason_id: int | None = None


def stored(company_id: int, project_id: str) -> Stored:
    """A project's settings from the database alone, so an approval reads them without a call."""
    row = db.session.get(ProjectSettings, (company_id, str(project_id).strip()))
    return Stored(row.event_type, row.change_reason_id) if row is not None else Stored()


def check_change_reason(company_id: int, project_id: str) -> None:
    """409 change_reason_not_found when the project's change reason is no longer offered."""
    # Read through the catalog cache, fresh (an approval writes money; the last answer while
    # Procore is slow could be one from before the reason was removed), so an approval learns
    # before writing that Procore would refuse the event for its reason.
    reason_id = stored(company_id, project_id).change_reason_id
    if reason_id is None or any(r.id == reason_id for r in change_reasons(company_id, project_id)):
        return
    raise Conflict(f"the project's change reason {reason_id} is no longer offered in the "
                   "project system; choose another in the project's settings. Nothing was "
                   "written", code="change_reason_not_found")


def get_settings(company_id: int, project_id: str) -> ProjectSettingsOut:
    """A project's settings with the company's change reasons to choose from."""
    project = str(projects.require_project(company_id, project_id).id)
    return _shape(project, stored(company_id, project),
                  change_reasons(company_id, project))


def save_settings(company_id: int, project_id: str, data: ProjectSettingsInput,
                  actor: str | None) -> ProjectSettingsOut:
    """Set a project's event type and change reason (409 for a reason the company lacks)."""
    project = str(projects.require_project(company_id, project_id).id)
    reasons = change_reasons(company_id, project)
    if data.change_reason_id is not None and all(r.id != data.change_reason_id for r in reasons):
        raise Conflict(f"change reason {data.change_reason_id} is not one of the company's; "
                       "nothing changed", code="change_reason_not_found",
                       details=[field_problem("change_reason_id", "not a change reason of the "
                                                                  "company in the project system")])
    kept = {"event_type": data.event_type.value, "change_reason_id": data.change_reason_id,
            "updated_at": utcnow(), "updated_by": actor}
    with write_transaction() as session:  # one row, whichever of two PMs saves first
        table = ProjectSettings.__table__
        statement = insert_or_merge(session, table).values(
            company_id=company_id, project_id=project, **kept)
        session.execute(statement.on_conflict_do_update(
            index_elements=[table.c.company_id, table.c.project_id], set_=kept))
    return _shape(project, Stored(data.event_type.value, data.change_reason_id), reasons)


def _shape(project_id: str, kept: Stored, reasons: list) -> ProjectSettingsOut:
    """Settings in the API shape."""
    name = next((r.name for r in reasons if r.id == kept.change_reason_id), None)
    return ProjectSettingsOut(project_id=project_id, event_type=kept.event_type,
                              change_reason_id=kept.change_reason_id, change_reason=name,
                              change_reasons=[ChangeReasonItem(id=r.id, name=r.name)
                                              for r in reasons])
