"""Rate sheets: the /v1 routes and the PM's page, on the same services."""
from __future__ import annotations

from flask import Blueprint, Response, g, request
from flask_login import current_user, login_required

from blueprints.api import PROJECT_SYSTEM_ERRORS, api_route, error_codes
from models.schemas import (
    AuthorizationInput,
    AuthorizationList,
    MarkupsInput,
    NteStatus,
    ProjectMarkupsOut,
    ProjectSettingsInput,
    RateSheet,
    RateSheetCsv,
    RateSheetCsvInput,
    RateSheetInput,
    RateSheetList,
    Ticket,
    TicketAuthorizationInput,
)
from services.capture import tickets
from services.platform.errors import ServiceError
from services.platform.validation import validate
from services.platform.web import csv_download, render_page
from services.pricing import authorizations, markups, rates
from services.project_system import project_settings
from services.tickets import ticket_shapes
from services.tickets.ticket_records import find_ticket

PROJECT_ERRORS = error_codes({404: ("project_not_found",)}, PROJECT_SYSTEM_ERRORS)
SHEET_ERRORS = {404: ("rate_sheet_not_found",)}

bp = Blueprint("rates", __name__)

SAVE_NOTE = ("A sheet with the same effective date as an existing one (of the same project, or "
             "of the company default) replaces it; tickets keep the prices they were given.")


@api_route(bp, "/rate-sheets", tag="rate-sheets", response=RateSheetList)
def list_company_sheets() -> RateSheetList:
    """List the company's default rate sheets, newest effective date first.

    A project without a sheet in force on a ticket's work day is priced from these.
    """
    return RateSheetList(data=rates.list_sheets(g.company_id, None))


@api_route(bp, "/rate-sheets", method="POST", tag="rate-sheets", body=RateSheetInput, response=RateSheet)
def save_company_sheet(body: RateSheetInput) -> RateSheet:
    """Save a company default rate sheet.

    A sheet with the same effective date as an existing default replaces it; tickets keep
    the prices they were given.
    """
    return rates.save_sheet(g.company_id, None, body)


@api_route(bp, "/rate-sheets/csv", method="POST", tag="rate-sheets", body=RateSheetCsvInput,
           response=RateSheet)
def import_company_sheet(body: RateSheetCsvInput) -> RateSheet:
    """Import a company default rate sheet from CSV; a bad row refuses the whole sheet.

    `details` names each bad row as `row <n>` (the header is row 1). Nothing is stored.
    """
    return rates.save_sheet(g.company_id, None, rates.parse_csv(body))


@api_route(bp, "/projects/<project_id>/rate-sheets", tag="rate-sheets", response=RateSheetList,
           errors=PROJECT_ERRORS)
def list_project_sheets(project_id: str) -> RateSheetList:
    """List a project's rate sheets, newest effective date first.

    A ticket on the project is priced from the latest of these in force on its work day, else
    from the company's default sheets.
    """
    return RateSheetList(data=rates.list_sheets(g.company_id, project_id))


@api_route(bp, "/projects/<project_id>/rate-sheets", method="POST", tag="rate-sheets",
           body=RateSheetInput, response=RateSheet, errors=PROJECT_ERRORS)
def save_project_sheet(project_id: str, body: RateSheetInput) -> RateSheet:
    """Save a rate sheet of a project.

    A sheet with the same effective date as an existing one of the project replaces it;
    tickets keep the prices they were given.
    """
    return rates.save_sheet(g.company_id, project_id, body)


@api_route(bp, "/projects/<project_id>/rate-sheets/csv", method="POST", tag="rate-sheets",
           body=RateSheetCsvInput, response=RateSheet, errors=PROJECT_ERRORS)
def import_project_sheet(project_id: str, body: RateSheetCsvInput) -> RateSheet:
    """Import a project's rate sheet from CSV; a bad row refuses the whole sheet.

    `details` names each bad row as `row <n>` (the header is row 1). Nothing is stored.
    """
    return rates.save_sheet(g.company_id, project_id, rates.parse_csv(body))


@api_route(bp, "/rate-sheets/<int:sheet_id>", tag="rate-sheets", response=RateSheet, errors=SHEET_ERRORS)
def get_sheet(sheet_id: int) -> RateSheet:
    """Read one rate sheet.

    Its labor classifications (straight-time, overtime and double-time rates), equipment
    (hourly and daily rates), materials and material markup, in force from `effective_from`.
    """
    return rates.get_sheet(g.company_id, sheet_id)


@api_route(bp, "/rate-sheets/<int:sheet_id>/csv", tag="rate-sheets", response=RateSheetCsv,
           errors=SHEET_ERRORS)
def export_sheet(sheet_id: int) -> RateSheetCsv:
    """Export one rate sheet as CSV text, in the import's columns.

    The columns are `kind,item,st,ot,dt,hourly,daily,unit_cost,percent`. A cell a spreadsheet
    would run as a formula (starting with =, +, - or @) starts with an apostrophe instead.
    """
    return rates.sheet_csv(g.company_id, sheet_id)


@api_route(bp, "/rate-sheets/<int:sheet_id>", method="DELETE", tag="rate-sheets", response=RateSheet,
           errors=SHEET_ERRORS)
def delete_sheet(sheet_id: int) -> RateSheet:
    """Delete a rate sheet; tickets it priced keep their prices.

    The answer is the sheet as it was. Tickets created afterwards are priced from the sheets
    still in force.
    """
    return rates.delete_sheet(g.company_id, sheet_id)


@api_route(bp, "/tickets/<ticket_id>/reprice", method="POST", tag="tickets", response=Ticket,
           errors={404: ("ticket_not_found",), 409: ("ticket_written",)}, extra_responses={
               409: "Code `ticket_written`: a written ticket keeps the prices it was written with.",
           })
def reprice_ticket(ticket_id: str) -> Ticket:
    """Price a ticket not yet written again from the rate sheet and markups in force now.

    Lines priced from a sheet (or left unpriced) take the rate sheet in force on the ticket's
    work day; rates the crew or caller sent are kept. The project's current markups replace
    the ticket's.
    """
    return tickets.reprice_ticket(g.company_id, ticket_id)


# ------------------------------------------------------------------ pages

def _render(project_id: str | None, *, error: ServiceError | None = None,
            message: str | None = None, status: int = 200, form: dict | None = None,
            markup_rows: list[dict] | None = None) -> Response:
    """The rate-sheet page of a project (or the company default), or its panel for htmx."""
    page = rates.rates_page(current_user.company_id, project_id)
    if markup_rows is not None:  # a refused form shows what was sent, not what is stored
        page.markups[:] = markup_rows
    response = render_page("review/rates.html", "review/_rates.html", page=page, error=error,
                           message=message, form=form or {}, note=SAVE_NOTE)
    response.status_code = status
    return response


@bp.get("/rates")
@login_required
def rates_page() -> Response:
    """The rate sheets of a project, or the company's defaults."""
    return _render(request.args.get("project_id") or None)


@bp.post("/rates/import")
@login_required
def import_page() -> Response:
    """Import a sheet from an uploaded CSV file (or pasted text), through the API's validator."""
    form = request.form.to_dict()
    project_id = form.get("project_id") or None
    upload = request.files.get("file")
    text = form.get("csv", "")
    if upload is not None and upload.filename:
        text = upload.read().decode("utf-8-sig", errors="replace")
    try:
        body = validate(RateSheetCsvInput, {"name": form.get("name"),
                                            "effective_from": form.get("effective_from") or None,
                                            "csv": text})
        sheet = rates.save_sheet(current_user.company_id, project_id, rates.parse_csv(body))
    except ServiceError as error:
        if error.code == "project_not_found":
            raise
        return _render(project_id, error=error, status=422, form=form)
    return _render(project_id, message=f"Imported “{sheet.name}”, in force from "
                                       f"{sheet.effective_from.isoformat()}.")


@bp.post("/rates/markups")
@login_required
def markups_page() -> Response:
    """Save a project's markups from the page, through the API's validator and service."""
    project_id = request.form.get("project_id") or ""
    sent = rates.markups_from_form(request.form)
    try:
        body = validate(MarkupsInput, sent)
        markups.save_markups(current_user.company_id, project_id, body, current_user.email)
    except ServiceError as error:
        if error.code == "project_not_found":
            raise
        return _render(project_id, error=_plain_markup_error(error), status=422,
                       markup_rows=sent["markups"])
    return _render(project_id, message="Markups saved. Tickets created from now on carry them.")


def _plain_markup_error(error: ServiceError) -> ServiceError:
    """The markup form's problems named by row, as the page shows them."""
    details = []
    for problem in error.details or []:
        field = problem.get("field", "") if isinstance(problem, dict) else ""
        if field.startswith("markups["):
            index = int(field[len("markups["):field.index("]")])
            column = field.partition("].")[2].replace("_", " ").replace("budget code id", "budget code")
            details.append({"field": f"markup {index + 1}",
                            "message": f"{column}: {problem['message']}" if column else problem["message"]})
        else:
            details.append({"field": "markups", "message": problem.get("message", "")})
    return ServiceError("the markups were not saved; nothing changed", details=details,
                        code=error.code, status=error.status)


@bp.post("/rates/settings")
@login_required
def settings_page() -> Response:
    """Save how the project's change events are written, through the API's validator and service."""
    project_id = request.form.get("project_id") or ""
    reason = (request.form.get("change_reason_id") or "").strip()
    try:
        body = validate(ProjectSettingsInput, {
            "event_type": request.form.get("event_type") or "tbd",
            "change_reason_id": int(reason) if reason.isdecimal() and len(reason) < 18
            else reason or None})
        project_settings.save_settings(current_user.company_id, project_id, body,
                                       current_user.email)
    except ServiceError as error:
        if error.code == "project_not_found":
            raise
        return _render(project_id, error=error, status=422)
    return _render(project_id, message="Saved. Change events written from now on carry this "
                                       "type and reason.")


@bp.post("/rates/authorizations")
@login_required
def authorization_create_page() -> Response:
    """Record a directive or change-order request from the page, through the API's validator."""
    form = request.form.to_dict()
    project_id = form.get("project_id") or ""
    try:
        body = validate(AuthorizationInput, {"reference": form.get("reference"),
                                             "kind": form.get("kind") or "directive",
                                             "title": form.get("title") or None,
                                             "amount": form.get("amount") or None})
        made = authorizations.create(current_user.company_id, project_id, body)
    except ServiceError as error:
        if error.code == "project_not_found":
            raise
        return _render(project_id, error=error, status=422, form=form)
    return _render(project_id, message=f"{made.reference} recorded: not to exceed "
                                       f"${made.authorized:,.2f}.")


@bp.post("/rates/<int:sheet_id>/delete")
@login_required
def delete_page(sheet_id: int) -> Response:
    """Delete a sheet from the page; tickets it priced keep their prices."""
    sheet = rates.delete_sheet(current_user.company_id, sheet_id)
    return _render(sheet.project_id, message=f"Deleted “{sheet.name}”. Tickets it priced keep "
                                             "their prices.")


@bp.get("/rates/<int:sheet_id>.csv")
@login_required
def export_page(sheet_id: int) -> Response:
    """Download a sheet as a CSV file."""
    exported = rates.sheet_csv(current_user.company_id, sheet_id)
    return csv_download(exported.csv, exported.filename)


# ------------------------------------------------------------------ markups

@api_route(bp, "/projects/<project_id>/markups", tag="markups", response=ProjectMarkupsOut,
           errors=PROJECT_ERRORS)
def get_markups(project_id: str) -> ProjectMarkupsOut:
    """Read a project's markups, in the order they apply.

    Each with its kind, percentage, the line kinds it applies to, whether it compounds, and
    the budget code its line item lands on (`budget_code` is null when the project no longer
    has that code).
    """
    return markups.get_markups(g.company_id, project_id)


@api_route(bp, "/projects/<project_id>/markups", method="PUT", tag="markups", body=MarkupsInput,
           response=ProjectMarkupsOut,
           errors=error_codes(PROJECT_ERRORS, {409: ("budget_code_not_found",)}), extra_responses={
               409: "`budget_code_not_found`: a markup's `budget_code_id` is not a budget code of "
                    "the project (each named in `details` as `markups[<i>].budget_code_id`); or "
                    "`project_system_not_connected`. Nothing was changed.",
           })
def save_markups(project_id: str, body: MarkupsInput) -> ProjectMarkupsOut:
    """Set a project's markups (overhead, profit, bond, insurance, tax) in the order they apply.

    Each is a percentage of the lines of the kinds it names, plus, when `compound` is true,
    of the markups before it; each lands as its own line item on its budget code. Tickets
    created afterwards carry them; earlier tickets keep theirs.
    """
    return markups.save_markups(g.company_id, project_id, body, g.actor)


# ------------------------------------------------------------------ not-to-exceed

@api_route(bp, "/projects/<project_id>/authorizations", tag="authorizations", response=AuthorizationList,
           errors=PROJECT_ERRORS)
def list_authorizations(project_id: str) -> AuthorizationList:
    """List a project's not-to-exceed authorizations with their running totals.

    A running total counts the tickets against an authorization that are written or still
    awaiting review; `level` is 'warning' from 80 % and 'over' past 100 %.
    """
    return AuthorizationList(data=authorizations.list_for_project(g.company_id, project_id))


@api_route(bp, "/projects/<project_id>/authorizations", method="POST", tag="authorizations",
           body=AuthorizationInput, response=NteStatus,
           errors=error_codes(PROJECT_ERRORS, {409: ("authorization_exists",)}), extra_responses={
               409: "Code `authorization_exists`: the project has an authorization with this "
                    "reference, in any case; two creates of one reference at the same instant "
                    "make one, the other gets this (or `project_system_not_connected`).",
           })
def create_authorization(project_id: str, body: AuthorizationInput) -> NteStatus:
    """Record a GC directive or change-order request with its authorised (not-to-exceed) amount.

    `reference` is the GC's number, unique per project whatever its case (as tickets'
    `authorization_ref` finds it: 'cd-014' names 'CD-014'). The answer is the authorization with
    its running total.
    """
    return authorizations.create(g.company_id, project_id, body)


@api_route(bp, "/authorizations/<int:authorization_id>", tag="authorizations", response=NteStatus,
           errors={404: ("authorization_not_found",)})
def get_authorization(authorization_id: int) -> NteStatus:
    """Read one authorization with its running total.

    The running total counts the tickets against it that are written or still awaiting
    review; `level` is `warning` from 80 % and `over` past 100 %.
    """
    return authorizations.status(authorizations.find(g.company_id, authorization_id))


@api_route(bp, "/tickets/<ticket_id>/authorization", method="POST", tag="authorizations",
           body=TicketAuthorizationInput, response=Ticket,
           errors={404: ("ticket_not_found",), 409: ("ticket_written", "authorization_not_found")},
           extra_responses={
               409: "`ticket_written`: a written ticket keeps its authorization; "
                    "`authorization_not_found`: the id is no authorization of the ticket's project "
                    "(`details` names `authorization_id`).",
           })
def link_ticket_authorization(ticket_id: str, body: TicketAuthorizationInput) -> Ticket:
    """Count a ticket not yet written against one of its project's authorizations, or none.

    Send `authorization_id: null` to count it against none. An id that is not an
    authorization of the ticket's project is a 409 `authorization_not_found` naming
    `authorization_id` in `details`. The answer is the ticket with its `nte`.
    """
    ticket = find_ticket(g.company_id, ticket_id)
    authorizations.link_ticket(g.company_id, ticket, body.authorization_id)
    return ticket_shapes.get_ticket(g.company_id, ticket_id)
