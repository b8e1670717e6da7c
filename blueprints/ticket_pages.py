"""The review pages of tickets: the queue, bulk approval, and one ticket with its actions.

They are routes of the tickets blueprint (blueprints/tickets.py holds its /v1 routes), on the
same services as the API; `bp` here is that blueprint with its pages, as the app registers it.
"""
from __future__ import annotations

import math

from flask import Response, jsonify, redirect, render_template, request, url_for
from flask_login import current_user, login_required

from blueprints.tickets import bp, csv_answer, document_answer, image_answer
from models.schemas import BudgetCodeInput, TicketAuthorizationInput
from services.approval import approval, record_status
from services.capture import evidence, tickets
from services.platform.errors import ServiceError
from services.platform.validation import validate
from services.platform.web import is_htmx, render_page
from services.pricing import authorizations
from services.project_system import connections, projects
from services.reports import backup_package
from services.review import review_bulk, review_queue, review_ticket
from services.tickets import documents, export
from services.tickets.ticket_records import find_ticket


def ticket_panel(ticket_id: str, *, error: ServiceError | None = None, message: str | None = None,
                  chosen: review_ticket.FormChoices | None = None, status: int = 200,
                  new_request=None, sign_error: ServiceError | None = None,
                  opened: bool = False) -> Response:
    """The ticket page, or its main panel for htmx, with the approve-form choices posted kept."""
    # `opened`: the page itself (which reads a stale written record again), not an action's answer.
    chosen = chosen or review_ticket.FormChoices.from_form(request.values)
    page = review_ticket.ticket_page(current_user.company_id, ticket_id, error=error, message=message,
                              chosen=chosen, opened=opened)
    page.reject_open = error is not None and error.code == "reason_required"
    response = render_page("review/ticket.html", "review/_ticket.html", page=page,
                           came_from=chosen.came_from, reject_reasons=review_ticket.REJECT_REASONS,
                           **review_ticket.signing_context(current_user.company_id, ticket_id,
                                                    new_request=new_request, error=sign_error))
    response.status_code = status
    return response


@bp.get("/queue")
@login_required
def queue_page() -> Response:
    """The review queue: filters, sort and page from the URL, 'Needs review' by default."""
    data = review_queue.queue(current_user.company_id, review_queue.QueueView.from_args(request.args))
    return render_page("review/queue.html", "review/_queue_rows.html", queue=data,
                       tabs=review_queue.STATUS_TABS, sorts=review_queue.SORT_CHOICES)


def _queue_after_bulk(*, confirm=None, results=None, selected=(), all_ready=False,
                      package_error: str | None = None) -> Response:
    """The queue it was sent from, with the bulk confirmation, the bulk results or why a
    backup package was refused on top."""
    view = review_queue.QueueView.from_query_string(request.form.get("from"))
    data = review_queue.queue(current_user.company_id, view)
    return render_page("review/queue.html", "review/_queue_rows.html", queue=data,
                       tabs=review_queue.STATUS_TABS, sorts=review_queue.SORT_CHOICES, bulk_confirm=confirm,
                       bulk_results=results, selected=set(selected), bulk_all_ready=all_ready,
                       bulk_total=review_bulk.bulk_total(confirm or results or []),
                       package_error=package_error)


@bp.post("/queue/backup-package")
@login_required
def queue_backup_package() -> Response:
    """The backup package of the written tickets chosen in the queue: sent on to its address
    (/projects/<id>/backup-package?tickets=...), or the queue again saying why not."""
    ids = request.form.getlist("ids")
    try:
        project_id, chosen = backup_package.package_address(current_user.company_id, ids)
    except ServiceError as error:
        return _queue_after_bulk(selected=ids, package_error=error.message)
    address = url_for("backup_packages.backup_package_page", project_id=project_id,
                      tickets=",".join(chosen))
    if is_htmx():  # the browser itself downloads the file; the queue stays as it is
        return Response(status=200, headers={"HX-Redirect": address})
    return redirect(address, code=303)


@bp.post("/queue/bulk")
@login_required
def bulk_confirm_page() -> Response:
    """Step one of a bulk approval: the selected tickets (or every ready one of the view, on
    all its pages), their count and total and their suggested codes, to confirm."""
    if request.form.get("all_ready"):
        view = review_queue.QueueView.from_query_string(request.form.get("from"))
        ids = review_queue.ready_in_view(current_user.company_id, view)
    else:
        ids = request.form.getlist("ids")
    return _queue_after_bulk(confirm=review_bulk.bulk_selection(current_user.company_id, ids),
                             selected=ids, all_ready=bool(request.form.get("all_ready")))


@bp.post("/queue/bulk/approve")
@login_required
def bulk_approve_page() -> Response:
    """Step two: write each confirmed ticket once and show what happened to each."""
    results = review_bulk.bulk_approve(
        current_user.company_id, request.form.getlist("ids"), actor=current_user.email,
        confirmed=review_bulk.confirmed_suggestions(request.form))
    return _queue_after_bulk(results=results)


@bp.post("/queue/bulk/approve-one")
@login_required
def bulk_approve_one_page() -> Response:
    """One ticket of a bulk approval, for the page's progress: written or why not, as a line
    of the results."""
    [item] = review_bulk.bulk_approve(
        current_user.company_id, request.form.getlist("ids")[:1], actor=current_user.email,
        confirmed=review_bulk.confirmed_suggestions(request.form)) or [None]
    if item is None:
        return Response(status=204)  # another company's or a missing ticket: nothing to say
    view = review_queue.QueueView.from_query_string(request.form.get("from"))
    return Response(render_template("review/_bulk_result.html", item=item, view=view))


@bp.get("/queue/bulk/wait")
@login_required
def bulk_wait_page() -> Response:
    """How long Procore's rate limit holds the company's calls now, in whole seconds, for a
    bulk approval's progress to say why it waits."""
    return jsonify(wait_s=math.ceil(connections.rate_limit_wait(current_user.company_id)))


@bp.get("/queue/export.csv")
@login_required
def queue_export() -> Response:
    """The queue's tickets, as currently filtered, as a CSV download."""
    view = review_queue.QueueView.from_args(request.args)
    return csv_answer(export.export_csv(current_user.company_id, view.list_filter(),
                                        sort=view.sort))


@bp.get("/tickets/<ticket_id>")
@login_required
def ticket_page(ticket_id: str) -> Response:
    """One ticket with everything a reviewer needs to approve it."""
    written = request.args.get("written")
    note = review_ticket.next_ticket_note(current_user.company_id, written) if written else None
    return ticket_panel(ticket_id, message=note, opened=True)


@bp.post("/tickets/<ticket_id>/approve")
@login_required
def approve_page(ticket_id: str) -> Response:
    """Approve from the page: the same service and rules as the API, with the page's routes."""
    form = request.form.to_dict()
    view = review_queue.QueueView.from_query_string(form.get("from"))
    following = review_queue.next_ticket(current_user.company_id, view, ticket_id) \
        if form.get("next") else None
    try:
        result = review_ticket.approve_from_form(current_user.company_id, ticket_id, form,
                                          actor=current_user.email)
    except ServiceError as error:
        if error.status == 404:
            raise
        return ticket_panel(ticket_id, error=error, status=422)
    if form.get("next"):
        return _go_to_next(following, view, ticket_id)
    return ticket_panel(ticket_id, message=review_ticket.written_note(result, already=result.already))


def _go_to_next(following: str | None, view, done_id: str) -> Response:
    """After 'Approve and next': the next ticket of the queue, or the queue when none is left."""
    params = {"from": view.query_string} if view.query_string else {}
    if following is None:
        target = url_for("tickets.queue_page", **view.params())
    else:
        target = url_for("tickets.ticket_page", ticket_id=following, written=done_id, **params)
    if is_htmx():
        response = Response(status=204)
        response.headers["HX-Redirect"] = target
        return response
    return redirect(target, code=303)


def _decide(ticket_id: str, decide, done: str) -> Response:
    """Run reject or restore for the signed-in reviewer and show the ticket again."""
    try:
        decide(current_user.company_id, ticket_id, actor=current_user.email)
    except ServiceError as error:
        if error.status == 404:
            raise
        return ticket_panel(ticket_id, error=error, status=422)
    return ticket_panel(ticket_id, message=done)


@bp.post("/tickets/<ticket_id>/reject")
@login_required
def reject_page(ticket_id: str) -> Response:
    """Reject from the page with a reason the crew will see."""
    form = request.form.to_dict()
    return _decide(ticket_id, lambda company_id, ticket_id, actor: review_ticket.reject_from_form(
        company_id, ticket_id, form, actor),
        "Rejected and sent back to the crew with your reason. Nothing was written to Procore.")


@bp.post("/tickets/<ticket_id>/restore")
@login_required
def restore_page(ticket_id: str) -> Response:
    """Restore a rejected ticket to the queue from the page."""
    return _decide(ticket_id, approval.restore, "Restored to the queue.")


@bp.post("/tickets/<ticket_id>/sync")
@login_required
def sync_page(ticket_id: str) -> Response:
    """Read the written ticket's record from Procore again, through the API's service."""
    try:
        record_status.sync(current_user.company_id, ticket_id)
    except ServiceError as error:
        if error.status == 404:
            raise
        if error.code != "ticket_not_written":  # Procore busy, away or not connected
            error = ServiceError(error.message, code="record_unread", status=error.status)
        return ticket_panel(ticket_id, error=error, status=422)
    return ticket_panel(ticket_id, message="Read again from Procore just now.")


@bp.post("/tickets/<ticket_id>/suggestions")
@login_required
def confirm_suggestions_page(ticket_id: str) -> Response:
    """Confirm on the form exactly the budget codes 'Confirm all' listed, to check and approve."""
    before = review_ticket.FormChoices.from_form(request.values)
    listed = review_ticket.selected_routes_from_form(request.form.to_dict(), "listed")
    chosen, changed = review_ticket.confirm_listed(current_user.company_id, ticket_id, before,
                                                   listed)
    count = len(chosen.confirmed) - len(before.confirmed)
    notes = [f"{count} budget code{'s are' if count != 1 else ' is'} confirmed. Check them, then "
             "approve." if count else "Nothing was confirmed."]
    if changed:
        notes.append(f"Line{'s' if len(changed) != 1 else ''} "
                     f"{', '.join(str(line + 1) for line in changed)} changed since the list was "
                     "drawn and {} not confirmed: check {} again.".format(
                         "was" if len(changed) == 1 else "were", "it" if len(changed) == 1 else "them"))
    return ticket_panel(ticket_id, chosen=chosen, message=" ".join(notes))


@bp.post("/tickets/<ticket_id>/commitment")
@login_required
def confirm_commitment_page(ticket_id: str) -> Response:
    """Confirm the commitment of the ticket's sub on its project, kept for its next tickets."""
    try:
        note = review_ticket.confirm_commitment_from_form(
            current_user.company_id, ticket_id, request.form.to_dict(), current_user.email)
    except ServiceError as error:
        if error.status == 404 and error.code == "ticket_not_found":
            raise
        return ticket_panel(ticket_id, error=error, status=422)
    return ticket_panel(ticket_id, message=note)


@bp.post("/tickets/<ticket_id>/budget-codes")
@login_required
def create_budget_code_page(ticket_id: str) -> Response:
    """Create the budget code a line lacks, through the same service as the budget-codes endpoint."""
    form = request.form.to_dict()
    ticket = find_ticket(current_user.company_id, ticket_id)
    chosen_code = form.get("cost_code_item_id") or ""
    try:  # a form's field is text; the body's id is a JSON integer
        body = validate(BudgetCodeInput, {
            "cost_code_item_id": int(chosen_code) if chosen_code.isdecimal() and len(chosen_code) < 19
            else chosen_code or None, "cost_type": form.get("cost_type") or "other"})
        made = projects.create_budget_code(current_user.company_id, ticket.project_id,
                                           body.cost_code_item_id, body.cost_type)
    except ServiceError as error:
        if error.status == 404 and error.code == "ticket_not_found":
            raise
        return ticket_panel(ticket_id, error=error, status=422)
    chosen = review_ticket.FormChoices.from_form(request.values)
    line = form.get("line", "")
    if not line.isdigit():
        return ticket_panel(ticket_id, message=f"Budget code {made.code} is ready.", chosen=chosen)
    return ticket_panel(ticket_id, message=f"Budget code {made.code} is ready; it is selected "
                                           f"for line {int(line) + 1}.",
                         chosen=chosen.picking(int(line), made.id))


@bp.post("/tickets/<ticket_id>/authorization")
@login_required
def authorization_page(ticket_id: str) -> Response:
    """Count the ticket against a directive or change-order request, through the API's service."""
    ticket = find_ticket(current_user.company_id, ticket_id)
    chosen = request.form.get("authorization_id") or None
    try:
        body = validate(TicketAuthorizationInput, {"authorization_id": int(chosen) if chosen and
                                                   chosen.isdecimal() and len(chosen) < 18 else chosen})
        authorizations.link_ticket(current_user.company_id, ticket, body.authorization_id)
    except ServiceError as error:
        if error.status == 404:
            raise
        return ticket_panel(ticket_id, error=error, status=422)
    return ticket_panel(ticket_id, message="Saved." if body.authorization_id else
                         "It counts against no directive or change-order request now.")


@bp.post("/tickets/<ticket_id>/reprice")
@login_required
def reprice_page(ticket_id: str) -> Response:
    """Price the ticket again from the rate sheet and markups in force now."""
    try:
        tickets.reprice_ticket(current_user.company_id, ticket_id)
    except ServiceError as error:
        if error.status == 404:
            raise
        return ticket_panel(ticket_id, error=error, status=422)
    return ticket_panel(ticket_id, message="Priced again from the rate sheet and markups in force.")


@bp.get("/tickets/<ticket_id>/photos/<int:position>.jpg")
@login_required
def photo_page(ticket_id: str, position: int) -> Response:
    """A photo at full size."""
    return image_answer(evidence.photo_file(current_user.company_id, ticket_id, position),
                        "image/jpeg")


@bp.get("/tickets/<ticket_id>/photos/<int:position>/thumb.jpg")
@login_required
def photo_thumb_page(ticket_id: str, position: int) -> Response:
    """A photo's thumbnail."""
    return image_answer(evidence.photo_file(current_user.company_id, ticket_id, position,
                                            thumbnail=True), "image/jpeg")


@bp.get("/tickets/<ticket_id>/document.pdf")
@login_required
def document_page(ticket_id: str) -> Response:
    """The signed ticket document (PDF), for a signed-in reviewer of the ticket's company."""
    return document_answer(documents.ticket_document(current_user.company_id, ticket_id),
                           ticket_id)


@bp.get("/tickets/<ticket_id>/signature.png")
@login_required
def signature_page(ticket_id: str) -> Response:
    """The signature image."""
    return image_answer(evidence.signature_file(current_user.company_id, ticket_id), "image/png")
