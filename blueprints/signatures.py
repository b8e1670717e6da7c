"""Signature requests: the /v1 routes, the review page's forms, and the signing page a general
contractor's person opens from the link (no account; the token in the URL is the credential)."""
from __future__ import annotations

from flask import Blueprint, Response, current_app, g, render_template, request
from flask_babel import gettext
from flask_login import current_user, login_required

from blueprints.api import api_route
from blueprints.errors import error_response
from blueprints.ticket_pages import ticket_panel
from blueprints.tickets import image_answer
from models import SignatureRequest as SignatureRequestRecord
from models import db, short_reference
from models.schemas import (
    REASON_NEEDED,
    SignatureIn,
    SignatureRequest,
    SignatureRequestCreated,
    SignatureRequestInput,
    SignatureRequestList,
)
from services.accounts.ratelimit import count_or_refuse
from services.capture import evidence, signing
from services.capture.capture import plain_message
from services.platform import i18n
from services.platform.errors import ServiceError, ValidationFailed
from services.platform.validation import validate
from services.platform.web import CREDENTIAL_HEADERS
from services.tickets import documents, signatures
from services.tickets.ticket_records import find_ticket

bp = Blueprint("signatures", __name__)

REQUEST_ERRORS = {404: ("ticket_not_found",),
                  409: ("ticket_written", "ticket_rejected", "ticket_already_signed")}


# ------------------------------------------------------------------ /v1

@api_route(bp, "/tickets/<ticket_id>/signature-requests", method="POST", tag="signature-requests",
           body=SignatureRequestInput, response=SignatureRequestCreated, errors=REQUEST_ERRORS)
def create_signature_request(ticket_id: str, body: SignatureRequestInput) -> SignatureRequestCreated:
    """Send a ticket to the general contractor's person to sign from a link, with no account.

    The link is e-mailed when an address is given and the service has mail settings; it is
    in this answer only (`url`, and `sms_href` to text it), so keep it or send it on now. It
    works for `SIGNATURE_LINK_DAYS` (7), once, until revoked. Unsigned requests with an
    e-mail address get reminders on the jobsite's next mornings at 7:00, at most 3.
    """
    return signing.create_request(g.company_id, ticket_id, body, actor=g.actor)


@api_route(bp, "/tickets/<ticket_id>/signature-requests", tag="signature-requests",
           response=SignatureRequestList, errors={404: ("ticket_not_found",)})
def list_signature_requests(ticket_id: str) -> SignatureRequestList:
    """List a ticket's signature requests, newest first (their links are never shown again).

    Each with its `state` (`open`, `signed`, `revoked`, `expired`), who asked, when it was
    e-mailed, the reminders sent and when the next one is due.
    """
    return signing.list_requests(g.company_id, ticket_id)


@api_route(bp, "/tickets/<ticket_id>/signature-requests/<request_id>/revoke", method="POST",
           tag="signature-requests", response=SignatureRequest,
           errors={404: ("ticket_not_found", "signature_request_not_found")})
def revoke_signature_request(ticket_id: str, request_id: str) -> SignatureRequest:
    """Stop a signing link from working; revoking again, or a used link, changes nothing.

    The link's page then says it no longer works and signs nothing. A signature already made
    through it stays.
    """
    return signing.revoke_request(g.company_id, ticket_id, request_id)


# ------------------------------------------------------------------ review page

def _review_panel(ticket_id: str, **context) -> Response:
    """The ticket page after a signing form, with what the form did."""
    return ticket_panel(ticket_id, **context)


@bp.post("/tickets/<ticket_id>/signature-requests")
@login_required
def create_request_page(ticket_id: str) -> Response:
    """Send the ticket to be signed from the ticket page."""
    form = request.form
    try:
        body = validate(SignatureRequestInput, {
            "name": form.get("name", ""), "role": form.get("role") or None,
            "email": form.get("email") or None, "phone": form.get("phone") or None,
            "language": form.get("language") if form.get("language") in i18n.LANGUAGES else None})
        created = signing.create_request(current_user.company_id, ticket_id, body,
                                            actor=current_user.email)
    except ServiceError as error:
        if error.status == 404:
            raise
        return _review_panel(ticket_id, status=422, sign_error=error)
    return _review_panel(ticket_id, new_request=created)


@bp.post("/tickets/<ticket_id>/signature-requests/<request_id>/revoke")
@login_required
def revoke_request_page(ticket_id: str, request_id: str) -> Response:
    """Revoke a signing link from the ticket page."""
    signing.revoke_request(current_user.company_id, ticket_id, request_id)
    return _review_panel(ticket_id, message="The signing link no longer works.")


# ------------------------------------------------------------------ the signer's pages

def _signing_response(body: str, status: int = 200) -> Response:
    """An HTML answer for a signing page: never cached, never sent on with a referrer."""
    response = Response(body, status=status, mimetype="text/html")
    response.headers.update(CREDENTIAL_HEADERS)
    response.vary.add("Accept-Language")
    response.vary.add("Cookie")
    return i18n.remember_choice(response)


def _token() -> str:
    """The signing token of this request's path."""
    return str((request.view_args or {}).get("token", ""))[:64]


def _count(limit_name: str, scope: str) -> None:
    """Count this request against its token's limit (unknown tokens against their address)."""
    token = _token()
    try:
        signing.resolve(token)
        key = signing.limit_key(token)
    except signing.SigningLinkRefused as refused:
        key = signing.limit_key(token) if refused.request is not None \
            else "sign-unknown:" + (request.remote_addr or "")
    count_or_refuse(current_app.config[limit_name], scope, key,
                    "too many tries with this link just now")


def _gone_page(refused: signing.SigningLinkRefused, status: int | None = None) -> Response:
    """The plain page for a link that cannot be used, saying why; a used one shows its signature
    (200 when opened again, 409 when sent to again), or that it was voided."""
    context = {"state": refused.state, "signed": None, "voided": None, "reference": None,
               "signed_time": None}
    if refused.request is not None:
        db.session.expire_all()
        record = db.session.get(SignatureRequestRecord, refused.request.id)
        ticket = find_ticket(record.company_id, record.ticket_id)
        context["reference"] = short_reference(ticket.id)
        if refused.state == "signed":
            context["signed"], context["voided"] = signing.signed_through(record, ticket)
            if context["voided"] is not None:
                context["state"] = "voided"
            elif context["signed"] is not None:
                context["signed_time"] = signing.on_jobsite_clock(
                    record, context["signed"]["signed_at"])
    if status is None:
        status = 200 if context["signed"] is not None and request.method == "GET" \
            else refused.status
    return _signing_response(render_template("signing/gone.html", token=_token(), **context),
                             status=status)


def _refused_page(state: str, error: ServiceError) -> Response:
    """The plain page for a refusal that names no ticket (too many tries, a signature that did
    not arrive, a document not ready), with the refusal's status and headers."""
    response = _signing_response(render_template("signing/gone.html", state=state, signed=None,
                                                 voided=None, reference=None, token=_token()),
                                 status=error.status)
    response.headers.update(error.headers)
    return response


def _page(view: signing.SigningView, *, values: dict | None = None,
          errors: dict | None = None, status: int = 200) -> Response:
    """The signing page: the ticket as the signer sees it and the form to sign it."""
    request_record = view.request
    values = values or {"name": request_record.signer_name, "role": request_record.signer_role or ""}
    return _signing_response(render_template(
        "signing/page.html", view=view, token=_token(), values=values, errors=errors or {},
        priced=signatures.priced, all_priced=signatures.all_priced,
        reference=short_reference(view.ticket.id),
        expires=signing.on_jobsite_clock(request_record, request_record.expires_at),
        script_messages=i18n.script_messages("signing.js")), status=status)


@bp.get("/s/<token>")
def signing_page(token: str) -> Response:
    """The ticket a signing link was sent for, and the pad to sign it, made for a phone."""
    try:
        _count("SIGNING_RATE_LIMIT", "signing")
        record = signing.resolve(token)
        shown = signing.view(record)
        if shown.ticket.status == "written":
            raise signing.SigningLinkRefused("closed", record)
        if shown.ticket.status == "rejected":
            raise signing.SigningLinkRefused("sent_back", record)
        if shown.ticket.signature:
            raise signing.SigningLinkRefused("taken", record)
        return _page(shown)
    except signing.SigningLinkRefused as refused:
        return _gone_page(refused)
    except ServiceError as error:
        if error.status == 429:
            return _refused_page("limited", error)
        raise


def _refuse_before_body() -> Response | None:
    """Before a signature's body is read: count it against the link's limit."""
    try:
        _count("SIGNING_RATE_LIMIT", "signing")
    except ServiceError as error:
        return _refused_page("limited", error)
    return None


# The fields of the signing form that show their own refusal beside them.
SIGNING_FIELDS = frozenset({"name", "role", "qualifier", "qualifier_reason", "image"})


def _form_errors(error: ValidationFailed) -> dict[str, str]:
    """A refused signature's problems by form field, in plain words."""
    words = {"image": gettext("Please sign in the box."),
             "qualifier": gettext("Please choose one.")}
    found = {}
    for detail in error.details or []:
        if isinstance(detail, dict):
            name = {"signature.image": "image"}.get(detail["field"], detail["field"])
            if name not in SIGNING_FIELDS:  # never a refusal the page has no place to show
                name = "_form"
            if detail["message"] == REASON_NEEDED:
                found[name] = gettext("Please say why it is not verified.")
            else:
                found[name] = words.get(name) or plain_message(detail["message"])
    return found


@bp.post("/s/<token>")
def sign(token: str) -> Response:
    """Sign the ticket: drawing, typed name and role, what the signature vouches for."""
    form = request.form
    values = {name: form.get(name, "") for name in ("name", "role", "qualifier", "qualifier_reason")}
    try:
        shown = signing.view(signing.resolve(token))
        signing.sign(token, _signing_input(form), form.get("content_sha256", ""),
                        ip_address=request.remote_addr,
                        user_agent=request.headers.get("User-Agent"))
    except signing.SigningLinkRefused as refused:
        return _gone_page(refused)
    except signing.TicketChanged:
        return _page(signing.view(shown.request), values=values, status=409,
                     errors={"_form": gettext("The ticket changed while it was open. Read it "
                                              "again, then sign.")})
    except ValidationFailed as error:
        return _page(shown, values=values, errors=_form_errors(error), status=400)
    except ServiceError as error:
        if error.code == "ticket_already_signed":
            return _gone_page(signing.SigningLinkRefused("taken", shown.request))
        if error.code == "ticket_written":
            return _gone_page(signing.SigningLinkRefused("closed", shown.request))
        if error.code == "ticket_rejected":
            return _gone_page(signing.SigningLinkRefused("sent_back", shown.request))
        if error.status in (429, 507):
            return _page(shown, values=values, status=error.status, errors={
                "_form": gettext("The signature was not kept: the server is busy or full. "
                                 "Try again in a few minutes.")})
        raise
    return _gone_page(signing.SigningLinkRefused("signed", shown.request), status=200)


sign.before_body = _refuse_before_body


@bp.errorhandler(ServiceError)
def _signature_not_received(error: ServiceError) -> Response:
    """A signature whose sending failed before it was read (too slow on a weak connection, cut
    off, too large, or the server busy): a plain page saying nothing was kept, with the way
    back to the ticket. Every other refusal answers as anywhere else."""
    if request.endpoint != "signatures.sign":
        return error_response(error.status, error.code, error.message, error.details,
                              error.headers)
    return _refused_page("not_received", error)


def _signing_input(form) -> SignatureIn:
    """The one check of a signature sent from the signing page."""
    problems = []
    for name, message in (("name", "Please fill this in."), ("qualifier", "Please choose one.")):
        if not (form.get(name) or "").strip():
            problems.append({"field": name, "message": message})
    try:
        data = validate(SignatureIn, {
            "name": form.get("name") or None, "role": form.get("role") or None,
            "qualifier": form.get("qualifier") or None,
            "qualifier_reason": form.get("qualifier_reason") or None,
            "image": form.get("image") or None})
    except ValidationFailed as error:
        raise ValidationFailed(error.message, details=problems + list(error.details or [])) from error
    if data.qualifier is None and not problems:  # free text where a choice belongs
        problems.append({"field": "qualifier", "message": "Please choose one."})
    if problems:
        raise ValidationFailed("the signature has problems", details=problems)
    return data


def _open_or_signed(token: str) -> SignatureRequestRecord:
    """The request of a link that is open or was used to sign; SigningLinkRefused otherwise."""
    try:
        return signing.resolve(token)
    except signing.SigningLinkRefused as refused:
        if refused.state != "signed":
            raise
        return refused.request


def _evidence(token: str, photo_id: int, thumbnail: bool) -> Response:
    """One photo of the link's ticket, while the link is open or was used."""
    try:
        _count("SIGNING_PHOTO_RATE_LIMIT", "signing-photo")
        request_record = _open_or_signed(token)
        stored = evidence.photo_image(request_record.company_id, request_record.ticket_id,
                                     photo_id, thumbnail=thumbnail)
    except signing.SigningLinkRefused as refused:
        return Response(status=refused.status, headers=CREDENTIAL_HEADERS)
    except ServiceError as error:
        return Response(status=error.status, headers={**CREDENTIAL_HEADERS, **error.headers})
    response = image_answer(stored, "image/jpeg")
    response.headers.update(CREDENTIAL_HEADERS)
    response.headers["Cache-Control"] = "private, max-age=600"
    return response


@bp.get("/s/<token>/photos/<int:photo_id>")
def signing_photo(token: str, photo_id: int) -> Response:
    """A photo of the ticket, for its signer (the link opens it; no account)."""
    return _evidence(token, photo_id, thumbnail=False)


@bp.get("/s/<token>/photos/<int:photo_id>/thumbnail")
def signing_photo_thumbnail(token: str, photo_id: int) -> Response:
    """A photo's thumbnail, for its signer."""
    return _evidence(token, photo_id, thumbnail=True)


@bp.get("/s/<token>/document.pdf")
def signed_document(token: str) -> Response:
    """The ticket document (PDF) for the person the link was sent to, before or after signing."""
    try:
        _count("SIGNING_RATE_LIMIT", "signing-document")
        request_record = _open_or_signed(token)
        ticket = find_ticket(request_record.company_id, request_record.ticket_id)
        pdf = documents.render_ticket_document(
            ticket, amounts=signatures.amounts_shown(ticket.company_id))
    except signing.SigningLinkRefused as refused:
        return _gone_page(refused)
    except documents.DocumentBusy as busy:
        return _refused_page("document", busy)
    except ServiceError as error:
        if error.status == 429:
            return _refused_page("limited", error)
        raise
    response = Response(pdf, mimetype=documents.MEDIA_TYPE, headers=CREDENTIAL_HEADERS)
    response.headers["Content-Disposition"] = \
        f'attachment; filename="{documents.document_filename(ticket.id)}"'
    return response


