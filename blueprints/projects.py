"""Projects: list, cost codes, budget codes and capability."""
from __future__ import annotations

from flask import Blueprint, g

from blueprints.api import PROJECT_SYSTEM_ERRORS, api_route, error_codes
from models.schemas import (
    BudgetCodeInput,
    BudgetCodeOut,
    Capability,
    CostCodeList,
    CostCodeQuery,
    ProjectList,
)
from services.project_system import projects

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
