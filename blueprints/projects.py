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
from services import projects

bp = Blueprint("projects", __name__)

NOT_CONNECTED = {409: "The company is not connected to a project system yet."}
PROJECT_ERRORS = error_codes({404: ("project_not_found",)}, PROJECT_SYSTEM_ERRORS)


@api_route(bp, "/projects", tag="projects", response=ProjectList, errors=PROJECT_SYSTEM_ERRORS,
           extra_responses=NOT_CONNECTED)
def list_projects() -> ProjectList:
    """List the company's projects in the project system."""
    return ProjectList(data=projects.list_projects(g.company_id))


@api_route(bp, "/projects/<project_id>/cost-codes", tag="projects", query=CostCodeQuery,
           response=CostCodeList, errors=PROJECT_ERRORS, extra_responses=NOT_CONNECTED)
def search_cost_codes(project_id: str, query: CostCodeQuery) -> CostCodeList:
    """Search a project's cost codes; each lists the budget codes it already has."""
    return CostCodeList(data=projects.search_cost_codes(g.company_id, project_id, query.q))


@api_route(bp, "/projects/<project_id>/budget-codes", method="POST", tag="projects",
           body=BudgetCodeInput, response=BudgetCodeOut,
           errors=error_codes(PROJECT_ERRORS, {404: ("cost_code_not_found",)}),
           extra_responses=NOT_CONNECTED)
def create_budget_code(project_id: str, body: BudgetCodeInput) -> BudgetCodeOut:
    """Create the budget code a line needs; an existing pair is returned as is."""
    return projects.create_budget_code(g.company_id, project_id, body.cost_code_item_id,
                                       body.cost_type)


@api_route(bp, "/projects/<project_id>/capability", tag="projects", response=Capability,
           errors=PROJECT_ERRORS, extra_responses=NOT_CONNECTED)
def get_capability(project_id: str) -> Capability:
    """Tell where a ticket on this project can be filed."""
    return projects.capability(g.company_id, project_id)
