"""Backup packages: GET /v1/projects/{id}/backup-package, and the same PDF for a signed-in reviewer
(from the ticket page, the queue's selection and the board)."""
from __future__ import annotations

from flask import Blueprint, Response, g, request
from flask_login import current_user, login_required

from blueprints.api import api_route
from blueprints.openapi_texts import BACKUP_PACKAGE_ERROR_TEXT
from models.schemas import BackupPackageQuery
from services.platform.errors import ServiceError, ValidationFailed
from services.platform.validation import validate
from services.reports import backup_package

bp = Blueprint("backup_packages", __name__)


def package_answer(package: backup_package.Package) -> Response:
    """A backup package as a PDF download (plain bytes for a client that asks for them)."""
    chosen = request.accept_mimetypes.best_match(["application/pdf", "application/octet-stream"],
                                                 default="application/pdf")
    response = Response(package.pdf, mimetype=chosen or "application/pdf")
    response.headers["Content-Disposition"] = f'attachment; filename="{package.filename}"'
    response.headers["Cache-Control"] = "private, no-store"
    return response


@api_route(bp, "/projects/<project_id>/backup-package", tag="backup-packages",
           query=BackupPackageQuery, media_type="application/pdf",
           errors={400: ("too_many_tickets", "ticket_reference_ambiguous"),
                   404: ("project_not_found", "ticket_not_found", "change_event_not_found"),
                   409: ("ticket_not_written",), 503: ("document_busy",)},
           extra_responses=BACKUP_PACKAGE_ERROR_TEXT)
def get_backup_package(project_id: str, query: BackupPackageQuery) -> Response:
    """Download the backup package (PDF) of written tickets of a project.

    Name the tickets (`tickets`: ids or T-references, comma-separated, at most 50) or a change
    event (`change_event_id`: every written ticket of the project on it), not both. A cover
    gives the project, the date on the jobsite's clock, each change event (or daily log entry)
    with its status and change orders as last read back from Procore, and the totals by budget
    code and by sub; then each ticket's signed document, its photos included, as
    GET /v1/tickets/{ticket_id}/document.pdf has it.
    """
    return package_answer(backup_package.backup_package(g.company_id, project_id, query))


@bp.get("/projects/<project_id>/backup-package")
@login_required
def backup_package_page(project_id: str) -> Response:
    """The backup package for a signed-in reviewer: `?tickets=` or `?change_event_id=` as in /v1."""
    try:
        query = validate(BackupPackageQuery, request.args.to_dict(flat=True))
    except ValidationFailed as error:
        raise ServiceError("This backup package names no tickets it can find. Choose written "
                           "tickets in the queue, or open a written ticket.",
                           code=error.code) from error
    return package_answer(backup_package.backup_package(current_user.company_id, project_id, query))
