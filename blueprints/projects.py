"""Projects: list, cost codes, budget codes, capability, commitments and settings."""
from __future__ import annotations

from flask import Blueprint, g

from blueprints.api import PROJECT_SYSTEM_ERRORS, api_route, error_codes
from models.schemas import (
    BudgetCodeInput,
    BudgetCodeOut,
    Capability,
    CommitmentList,
    CostCodeList,
    CostCodeQuery,
    ProjectList,
    ProjectSettingsInput,
    ProjectSettingsOut,
    SubCommitmentInput,
    SubCommitmentItem,
)
from services.project_system import commitments, project_settings, projects

bp = Blueprint("projects", __name__)

NOT_CONNECTED = {409: "The company is not connected to a project system yet."}
PROJECT_ERRORS = error_codes({404: ("project_not_found",)}, PROJECT_SYSTEM_ERRORS)


@api_route(bp, "/projects", tag="projects", response=ProjectList, errors=PROJECT_SYSTEM_ERRORS,
           extra_responses=NOT_CONNECTED)
def list_projects() -> ProjectList:
    """List the company's projects in the project system.

    Each with its `id` (the project system's number, as a string), name, display name and
    project number. A company not yet connected gets 409 `project_system_not_connected`.
    """
    return ProjectList(data=projects.list_projects(g.company_id))


@api_route(bp, "/projects/<project_id>/cost-codes", tag="projects", query=CostCodeQuery,
           response=CostCodeList, errors=PROJECT_ERRORS, extra_responses=NOT_CONNECTED)
def search_cost_codes(project_id: str, query: CostCodeQuery) -> CostCodeList:
    """Search a project's cost codes; each lists the budget codes it already has.

    `id` is the `cost_code_item_id` to create a budget code with; each budget code gives its
    `id`, `code` and `cost_type`. Without `q`, every cost code of the project.
    """
    return CostCodeList(data=projects.search_cost_codes(g.company_id, project_id, query.q))


@api_route(bp, "/projects/<project_id>/budget-codes", method="POST", tag="projects",
           body=BudgetCodeInput, response=BudgetCodeOut,
           errors=error_codes(PROJECT_ERRORS, {404: ("cost_code_not_found",)}),
           extra_responses=NOT_CONNECTED)
def create_budget_code(project_id: str, body: BudgetCodeInput) -> BudgetCodeOut:
    """Create the budget code a line needs; an existing pair is returned as is.

    `cost_type` defaults to `other`. The answer says `created: false` when the project already
    had the budget code for that cost code and cost type.
    """
    return projects.create_budget_code(g.company_id, project_id, body.cost_code_item_id,
                                       body.cost_type)


@api_route(bp, "/projects/<project_id>/capability", tag="projects", response=Capability,
           errors=PROJECT_ERRORS, extra_responses=NOT_CONNECTED)
def get_capability(project_id: str) -> Capability:
    """Tell where a ticket on this project can be filed.

    `destination` is `change_event`, or null when the project has no change-event tool:
    approve then answers 409 `no_change_events` unless `daily_log` is named.
    """
    return projects.capability(g.company_id, project_id)


@api_route(bp, "/projects/<project_id>/commitments", tag="projects", response=CommitmentList,
           errors=PROJECT_ERRORS, extra_responses=NOT_CONNECTED)
def list_commitments(project_id: str) -> CommitmentList:
    """List a project's open commitments and the subs whose commitment is confirmed.

    Each subcontract (`work_order`) or purchase order names its vendor; its `id` is the
    `contract_id` to confirm for a sub or to approve with. `confirmed` lists each sub a PM
    confirmed on the project, with the commitment its tickets' lines are written on.
    """
    return commitments.project_commitments(g.company_id, project_id)


@api_route(bp, "/projects/<project_id>/commitments", method="PUT", tag="projects",
           body=SubCommitmentInput, response=SubCommitmentItem,
           errors=error_codes(PROJECT_ERRORS, {409: ("contract_not_found",)}),
           extra_responses={409: "Nothing changed: `contract_not_found` (`contract_id` is no open "
                                 "commitment of the project), `project_system_not_connected`."})
def confirm_commitment(project_id: str, body: SubCommitmentInput) -> SubCommitmentItem:
    """Confirm the commitment a sub's change event lines are written on, on this project.

    Kept for the sub's next tickets (the sub matched ignoring case, punctuation and a legal
    suffix), whose `commitment` then says `exact: true`. `contract_id: null` says the sub's
    lines carry no commitment here. A commitment the project does not have is a 409
    `contract_not_found`; nothing changes.
    """
    return commitments.confirm(g.company_id, project_id, body.sub, body.contract_id, g.actor)


@api_route(bp, "/projects/<project_id>/settings", tag="projects", response=ProjectSettingsOut,
           errors=PROJECT_ERRORS, extra_responses=NOT_CONNECTED)
def get_settings(project_id: str) -> ProjectSettingsOut:
    """Read how a project's change events are written: event type and change reason.

    Every change event is out of scope (the work is extra); `event_type` defaults to `tbd`
    and `change_reason_id` to null. `change_reasons` lists the company's reasons to choose from.
    """
    return project_settings.get_settings(g.company_id, project_id)


@api_route(bp, "/projects/<project_id>/settings", method="PUT", tag="projects",
           body=ProjectSettingsInput, response=ProjectSettingsOut,
           errors=error_codes(PROJECT_ERRORS, {409: ("change_reason_not_found",)}),
           extra_responses={409: "Nothing changed: `change_reason_not_found` (no change reason "
                                 "the company offers), `project_system_not_connected`."})
def save_settings(project_id: str, body: ProjectSettingsInput) -> ProjectSettingsOut:
    """Set the event type and change reason of the project's next change events.

    A field left out takes its default (`tbd`, no reason). A change reason the company does
    not offer is a 409 `change_reason_not_found`; nothing changes. Tickets written before
    keep what they were written with.
    """
    return project_settings.save_settings(g.company_id, project_id, body, g.actor)
