"""Tickets: the blueprint and its /v1 routes; its review pages are in blueprints/ticket_pages.py."""
from __future__ import annotations

from flask import Blueprint, Response, g, request

from blueprints.api import PROJECT_SYSTEM_ERRORS, api_route, error_codes
from blueprints.openapi_texts import APPROVE_ERROR_TEXT, PIECE_TEXT
from models import utcnow
from models.schemas import (
    ApprovalResult,
    ApproveInput,
    PhotosInput,
    PhotoUploadQuery,
    RejectInput,
    Ticket,
    TicketFilters,
    TicketInput,
    TicketList,
    TicketListQuery,
    UploadProgress,
)
from services.approval import approval, record_status
from services.capture import capture, evidence, tickets
from services.files import photo_uploads, storage
from services.platform.web import csv_download
from services.tickets import documents, export, ticket_queries, ticket_shapes
from services.tickets.ticket_records import find_ticket

bp = Blueprint("tickets", __name__)
STORAGE_ERRORS = {503: ("storage_unavailable", "images_busy"),
                  507: ("storage_quota_exceeded", "storage_full")}
STORAGE_TEXT = {507: "A daily storage quota of the link, the company or the server is used up "
                     "(see Retry-After), or the disk is at its reserve. Nothing was stored.",
                503: "`images_busy`: the server is busy reading other images (the photos are not "
                     "at fault), or `storage_unavailable`: the bucket could not be reached. Nothing "
                     "was stored; send the same request again after the seconds in Retry-After."}
# A photo sent as the body itself. Its bytes are checked (JPEG, PNG or WebP) whatever the
# Content-Type says, so image/jpeg works too; the document names only application/octet-stream,
# the one binary body type generated clients (openapi-python-client) take without a warning.
PHOTO_BODY_TYPES = ("application/octet-stream",)
# What a ticket's state refuses photos for: the request is fine, the ticket has no room for it.
PHOTOS_CONFLICT_TEXT = ("`ticket_written` (a written ticket takes no more photos) or `photos_full` "
                        "(the ticket holds 12 photos at most; `details` says how many more fit). "
                        "Nothing was stored.")


@api_route(bp, "/tickets", tag="tickets", query=TicketListQuery, response=TicketList)
def list_tickets(query: TicketListQuery) -> TicketList:
    """List tickets, newest first; filter by status and project.

    Sorted by capture time, then id. `q` searches the description, reason, directed-by and
    recorded-by (case-insensitive), or finds a T-reference; `not_on_change_order=true` lists
    the written change events on no change order yet. Each item is a `TicketSummary`;
    `total` counts every matching ticket, whatever `limit` and `offset` are.
    """
    where = ticket_queries.ListFilter(status=query.status, project_id=query.project_id, q=query.q,
                                      sub=query.sub,
                                      not_on_change_order=query.not_on_change_order)
    return ticket_queries.list_tickets(g.company_id, where, limit=query.limit, offset=query.offset)


def csv_answer(text: str) -> Response:
    """The ticket log as a CSV download named by today's date."""
    return csv_download(text, f"tickets-{utcnow():%Y-%m-%d}.csv")


@api_route(bp, "/tickets/export.csv", tag="tickets", query=TicketFilters, media_type="text/csv")
def export_tickets(query: TicketFilters) -> Response:
    """Export the ticket log as CSV for a spreadsheet: one row per line, with amounts and budget codes.

    Made for people (a program reads GET /v1/tickets and each ticket): UTF-8 with a byte-order
    mark; the T-reference, the project's name, the sub, and times on the jobsite's clock
    (`YYYY-MM-DD HH:MM`, with the zone in `time_zone`); no bare long ids. Same filters as the
    list, newest first. The first row names the columns: the ticket's, then the line's
    (number from 1, kind, description, cost code, quantity, unit cost, amount, cost type,
    budget code, whether it is exact or needs review, and why). A ticket without lines has one
    row, its line cells empty. Lines not yet written are routed as the review queue routes
    them (on the last codes read when the project system is slow or away), so an export
    never waits long on it. A cell a spreadsheet would run as a formula (starting with =, +,
    -, @) starts with an apostrophe instead.
    """
    return csv_answer(export.export_csv(g.company_id, ticket_queries.ListFilter(
        status=query.status, project_id=query.project_id, q=query.q, sub=query.sub,
        not_on_change_order=query.not_on_change_order)))


@api_route(bp, "/tickets", method="POST", tag="tickets", body=TicketInput, response=Ticket,
           validator=tickets.validate_ticket,
           errors=error_codes({404: ("project_not_found",)}, PROJECT_SYSTEM_ERRORS, STORAGE_ERRORS),
           extra_responses=STORAGE_TEXT)
def create_ticket(body: TicketInput) -> Ticket:
    """Create a ticket with the same validation as the capture form.

    Send a `client_ref` of your own to make retries safe: the same value again returns
    the ticket made the first time.
    """
    return tickets.create_ticket(g.company_id, body)[0]


@api_route(bp, "/tickets/<ticket_id>", tag="tickets", response=Ticket,
           errors={404: ("ticket_not_found",)})
def get_ticket(ticket_id: str) -> Ticket:
    """Read one ticket with its routing.

    Everything the list shows, plus its lines, photos, signature and voided signatures,
    decisions, not-to-exceed status and `routing`: the budget code each line lands on and why.
    A written ticket shows the routing it was written with.
    """
    return ticket_shapes.get_ticket(g.company_id, ticket_id)


@api_route(bp, "/tickets/<ticket_id>/photos", method="POST", tag="evidence", body=PhotosInput,
           validator=evidence.validate_photos, response=Ticket,
           errors=error_codes({404: ("ticket_not_found",), 409: ("ticket_written", "photos_full")},
                              STORAGE_ERRORS),
           extra_responses={**STORAGE_TEXT, 409: PHOTOS_CONFLICT_TEXT})
def add_photos(ticket_id: str, body: PhotosInput) -> Ticket:
    """Attach 1 to 12 photos to a ticket that is not written yet.

    Each photo as a data URL or bare base64, checked like a ticket's own. Every photo is
    checked before any is stored; `details` names each bad one as `photos[<i>]`. A ticket
    holds at most 12 photos in all: more than it has room for is a 409 `photos_full`.
    """
    return evidence.add_photos(g.company_id, ticket_id, body.photos)


@api_route(bp, "/tickets/<ticket_id>/photo-uploads/<key>", method="PUT", tag="evidence", response=Ticket,
           query=PhotoUploadQuery, binary_body=PHOTO_BODY_TYPES,
           headers={photo_uploads.HEADER: PIECE_TEXT}, accepted=UploadProgress,
           errors=error_codes({400: ("validation_failed",), 404: ("ticket_not_found", "not_found"),
                               408: ("upload_cut_off",),
                               409: ("ticket_written", "photos_full", "upload_offset_mismatch"),
                               429: ("too_many_uploads",)},
                              STORAGE_ERRORS),
           extra_responses={**STORAGE_TEXT,
                            429: "`too_many_uploads`: the company has PHOTO_UPLOADS_OPEN_PER_LINK "
                                 "photos begun in pieces and not finished; finish those, or send "
                                 "again after the seconds in Retry-After (unfinished ones expire).",
                            409: PHOTOS_CONFLICT_TEXT + " `upload_offset_mismatch`: the piece "
                                 "does not start where the server's bytes of this photo end; "
                                 "`details.offset` and `Upload-Offset` say where."})
def put_photo(ticket_id: str, key: str, query: PhotoUploadQuery) -> Ticket | Response:
    """Attach one photo under your own key (1-64 letters, digits, '-', '_'); again changes nothing.

    The body is the image itself (JPEG, PNG or WebP, at most 2 MiB), whole or a piece at a time
    (`Content-Range`); `name`, `taken_at`, `lat` and `lng` may be given in the query. For
    senders on a weak signal: one small upload per photo, or per piece of it, each safe to
    repeat; a photo the ticket holds is answered as held, whatever the piece. Send
    `photos_expected` with the ticket so it shows the photos as arriving until all are in.
    """
    ticket = find_ticket(g.company_id, ticket_id)  # an unknown ticket is a 404 whatever the body
    key = capture.part_key(key)
    if key in evidence.photo_keys(ticket.id):
        return ticket_shapes.get_ticket(g.company_id, ticket.id)
    try:
        answer = photo_uploads.take(
            g.company_id, ticket.link_token, f"t:{ticket.id}:{key}", request.get_data(),
            request.headers.get(photo_uploads.HEADER),
            lambda whole: evidence.put_photo(
                g.company_id, ticket.id, key,
                capture.photo_from_upload(whole.data, query.model_dump(exclude_none=True)),
                counted=whole.counted)[0])
    except photo_uploads.OffsetMismatch:
        if not evidence.holds_now(ticket.id, key):  # another request made it of these pieces
            raise
        return ticket_shapes.get_ticket(g.company_id, ticket.id)
    if isinstance(answer, photo_uploads.Progress):
        return photo_uploads.progress_answer(answer)
    return answer


@api_route(bp, "/tickets/<ticket_id>/approve", method="POST", tag="approval", body=ApproveInput,
           response=ApprovalResult, body_required=False,
           errors=error_codes({404: ("ticket_not_found", "project_not_found"),
                               409: ("ticket_rejected", "lines_need_review", "no_change_events",
                                     "approval_in_progress", "nte_exceeded", "line_not_found",
                                     "budget_code_not_found", "contract_not_found",
                                     "commitment_needs_confirmation",
                                     "change_reason_not_found"),
                               502: ("project_system_write_unconfirmed",),
                               503: ("document_busy",)},
                              PROJECT_SYSTEM_ERRORS),
           extra_responses=APPROVE_ERROR_TEXT)
def approve_ticket(ticket_id: str, body: ApproveInput) -> ApprovalResult:
    """Write the ticket into the project system once; a repeat answers already: true.

    Files it as a change event (or, when `destination` is `daily_log`, a daily log entry) with
    its photos, signature and signed ticket document attached. A program approving without a
    person should send `require_exact: true` and never `allow_unrouted`.
    """
    return approval.approve(g.company_id, ticket_id, body, actor=g.actor)


@api_route(bp, "/tickets/<ticket_id>/reject", method="POST", tag="approval", body=RejectInput,
           response=Ticket, body_required=False,
           errors={404: ("ticket_not_found",),
                   409: ("ticket_rejected", "ticket_written", "approval_in_progress")},
           extra_responses={
               409: "`ticket_rejected` (already rejected), `ticket_written` (already in "
                    "the project system), `approval_in_progress` (an approval is writing it).",
           })
def reject_ticket(ticket_id: str, body: RejectInput) -> Ticket:
    """Close a submitted ticket without writing to the project system.

    An optional `reason` is kept with the decision and shown to the crew that sent it.
    """
    return approval.reject(g.company_id, ticket_id, actor=g.actor, reason=body.reason)


@api_route(bp, "/tickets/<ticket_id>/restore", method="POST", tag="approval", response=Ticket,
           errors={404: ("ticket_not_found",), 409: ("ticket_written", "approval_in_progress")},
           extra_responses={
               409: "`ticket_written` (already in the project system), "
                    "`approval_in_progress` (an approval of the rejected ticket is writing it).",
           })
def restore_ticket(ticket_id: str) -> Ticket:
    """Put a rejected ticket back to submitted; idempotent on a submitted one.

    The ticket goes back to the review queue and can be approved again; the rejection stays
    in its `decisions`.
    """
    return approval.restore(g.company_id, ticket_id, actor=g.actor)


@api_route(bp, "/tickets/<ticket_id>/sync", method="POST", tag="approval", response=Ticket,
           errors=error_codes({404: ("ticket_not_found",), 409: ("ticket_not_written",)},
                              PROJECT_SYSTEM_ERRORS),
           extra_responses={
               409: "`ticket_not_written` (the ticket has no record in the project system "
                    "yet), `project_system_not_connected`.",
           })
def sync_ticket(ticket_id: str) -> Ticket:
    """Read a written ticket's record from Procore now; answers the ticket with it.

    `external` then carries the record's `status` in Procore, whether it was `deleted`
    there, the `change_orders` its lines are on, and `status_read_at`. Reading never
    changes the ticket's own status: a ticket whose change event was deleted or voided
    stays written and is never written again.
    """
    return record_status.sync(g.company_id, ticket_id)


def _evidence(stored: storage.Stream, media_type: str) -> Response:
    """An image of a ticket's evidence, as its own type unless the caller asks for plain bytes."""
    chosen = request.accept_mimetypes.best_match([media_type, "application/octet-stream"],
                                                 default=media_type)
    return image_answer(stored, chosen or media_type)


PHOTO_ERRORS = {404: ("ticket_not_found", "photo_not_found"), 503: ("storage_unavailable",)}
SIGNATURE_ERRORS = {404: ("ticket_not_found", "signature_not_found"), 503: ("storage_unavailable",)}


@api_route(bp, "/tickets/<ticket_id>/photos/<int:photo_id>", tag="evidence", media_type="image/jpeg",
           errors=PHOTO_ERRORS)
def get_photo(ticket_id: str, photo_id: int) -> Response:
    """Download a photo of a ticket (JPEG, at most 2048 px on the long edge).

    The photo as stored: upright, without EXIF or GPS. `Accept: application/octet-stream`
    gets the same bytes under that type.
    """
    return _evidence(evidence.photo_image(g.company_id, ticket_id, photo_id), "image/jpeg")


@api_route(bp, "/tickets/<ticket_id>/photos/<int:photo_id>/thumbnail", tag="evidence",
           media_type="image/jpeg", errors=PHOTO_ERRORS)
def get_photo_thumbnail(ticket_id: str, photo_id: int) -> Response:
    """Download a photo's 320 px thumbnail (JPEG).

    320 px on the long edge. `Accept: application/octet-stream` gets the same bytes under
    that type.
    """
    return _evidence(evidence.photo_image(g.company_id, ticket_id, photo_id, thumbnail=True),
                     "image/jpeg")


@api_route(bp, "/tickets/<ticket_id>/signature", tag="evidence", media_type="image/png",
           errors=SIGNATURE_ERRORS)
def get_signature(ticket_id: str) -> Response:
    """Download the drawn signature of a ticket (PNG).

    The image of the signature that counts; a ticket without one (or whose signature was
    voided) is a 404 `signature_not_found`. `Accept: application/octet-stream` gets the same
    bytes under that type.
    """
    return _evidence(evidence.signature_file(g.company_id, ticket_id), "image/png")


@api_route(bp, "/tickets/<ticket_id>/signature/thumbnail", tag="evidence", media_type="image/png",
           errors=SIGNATURE_ERRORS)
def get_signature_thumbnail(ticket_id: str) -> Response:
    """Download the signature's 320 px thumbnail (PNG).

    `Accept: application/octet-stream` gets the same bytes under that type.
    """
    return _evidence(evidence.signature_file(g.company_id, ticket_id, thumbnail=True), "image/png")


def document_answer(data: bytes, ticket_id: str) -> Response:
    """The signed ticket document as a PDF download named by the ticket's reference (plain
    bytes for a client that asks for them, as generated clients do)."""
    chosen = request.accept_mimetypes.best_match([documents.MEDIA_TYPE, "application/octet-stream"],
                                                 default=documents.MEDIA_TYPE)
    response = Response(data, mimetype=chosen or documents.MEDIA_TYPE)
    response.headers["Content-Disposition"] = \
        f'attachment; filename="{documents.document_filename(ticket_id)}"'
    response.headers["Cache-Control"] = "private, no-store"
    return response


@api_route(bp, "/tickets/<ticket_id>/document.pdf", tag="tickets", media_type="application/pdf",
           errors={404: ("ticket_not_found",), 503: ("document_busy",)},
           extra_responses={503: "The document could not be made in time (see Retry-After); "
                                 "nothing was changed."})
def get_document(ticket_id: str) -> Response:
    """Download the signed ticket document (PDF) of a ticket.

    Company and project, the work, why it is extra and who directed it, every line with its
    quantity, hours, rate, amount and budget code, subtotals, markups and total, every photo
    with its time and place, the signature with what it vouches for and the hash of the
    content signed, and the history. The lines carry the routing the ticket was written
    with, or else its routing now (as in GET /v1/tickets/{id}). The document attached to the
    change event at approval is the one of the approved ticket.
    """
    return document_answer(documents.ticket_document(g.company_id, ticket_id), ticket_id)


# ------------------------------------------------------------------ pages


def image_answer(stored: storage.Stream, media_type: str) -> Response:
    """A stored image sent as it is read (never whole in memory), cached privately."""
    response = Response(stored.chunks, mimetype=media_type, direct_passthrough=True)
    response.content_length = stored.size
    response.headers["Cache-Control"] = "private, max-age=3600"
    return response
