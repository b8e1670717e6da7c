"""Capture links: the /v1 API for managing them and the public pages crews open on site."""
from __future__ import annotations

import os

from flask import Blueprint, Response, current_app, g, jsonify, render_template, request
from flask_babel import gettext
from flask_login import current_user, login_required

from blueprints.api import PROJECT_SYSTEM_ERRORS, api_route, error_codes, read_json_object
from models import short_reference
from models.schemas import (
    CaptureSettings,
    CaptureSettingsInput,
    Link,
    LinkInput,
    LinkList,
    SubCommitmentInput,
)
from services.accounts.ratelimit import count_or_refuse
from services.capture import capture, evidence, links
from services.files import photo_uploads
from services.platform import assets, i18n
from services.platform.errors import ServiceError
from services.platform.validation import validate
from services.platform.web import (
    CREDENTIAL_HEADERS,
    is_capture_script_request,
    render_page,
    token_digest,
)
from services.project_system import commitments, projects
from services.tickets.plain_words import commitment_sentence, plain_error

bp = Blueprint("links", __name__)

@api_route(bp, "/links", tag="links", response=LinkList)
def list_links() -> LinkList:
    """List the company's capture links with how many tickets came through each.

    Revoked links are listed too, with `revoked_at`. Each carries its token, its three
    addresses (`urls`), its QR code and poster addresses and an `sms:` link.
    """
    return LinkList(data=links.list_links(g.company_id))


@api_route(bp, "/links", method="POST", tag="links", body=LinkInput, response=Link,
           errors=error_codes({404: ("project_not_found",)}, PROJECT_SYSTEM_ERRORS))
def create_link(body: LinkInput) -> Link:
    """Create a capture link for a project; the token in it is a credential.

    Anyone holding the link can send tickets for the project until it is revoked. `label`
    says who or where it is for, and names the sub in the review queue.
    """
    return links.create_link(g.company_id, body.project_id, body.label)


@api_route(bp, "/links/<token>/revoke", method="POST", tag="links", response=Link,
           errors={404: ("link_not_found",)})
def revoke_link(token: str) -> Link:
    """Stop a link from working; revoking again is harmless.

    Its page then answers 410 and takes no more tickets; tickets already sent through it
    stay as they are. The answer is the link with `revoked_at` set.
    """
    return links.revoke_link(g.company_id, token)


@api_route(bp, "/capture-settings", tag="capture-settings", response=CaptureSettings)
def get_capture_settings() -> CaptureSettings:
    """How the capture form asks crews for tickets (whether crews enter prices and cost codes).

    `crew_enters_prices` is false when the office prices and codes the tickets.
    """
    return capture.capture_settings(g.company_id)


@api_route(bp, "/capture-settings", method="PUT", tag="capture-settings", body=CaptureSettingsInput,
           response=CaptureSettings)
def put_capture_settings(body: CaptureSettingsInput) -> CaptureSettings:
    """Change how the capture form asks crews for tickets.

    With `crew_enters_prices` false, crews' forms show no rates, unit costs or cost codes and
    signing links show no amounts.
    """
    return capture.set_capture_settings(g.company_id, body.crew_enters_prices)


def _capture_response(body: str, status: int = 200) -> Response:
    """An HTML answer for a capture page, with the headers a credential-bearing URL needs."""
    response = Response(body, status=status, mimetype="text/html")
    response.headers.update(CREDENTIAL_HEADERS)
    response.vary.add("Accept-Language")
    response.vary.add("Cookie")
    return i18n.remember_choice(response)


def _gone_page(error: ServiceError) -> Response:
    """The page a crew sees for a revoked or unknown link."""
    return _capture_response(render_template(
        "capture/gone.html", token=_token_arg(),
        gone_messages=i18n.script_messages("capture-gone.js")), status=error.status)


def _token_arg() -> str:
    """The link token of the current capture request, for the page's own checks."""
    return str((request.view_args or {}).get("token", ""))[:64]


def _form_context(link, via: str, values: dict | None = None, errors: dict | None = None) -> dict:
    """Everything the capture form template needs."""
    prices = capture.capture_settings(link.company_id).crew_enters_prices
    return {"link": link, "via": via, "values": values or {}, "errors": errors or {},
            "cost_codes": capture.cost_code_choices(link.company_id, link.project_id) if prices else [],
            "classifications": capture.classification_choices(link.company_id, link.project_id),
            "crew_prices": prices, "script_messages": i18n.script_messages("capture.js"),
            "row_kinds": capture.ROW_KINDS, "ticket_schema": capture.ticket_schema(),
            "asked_fields": capture.asked_fields()}


@bp.get("/c/sw.js")
def capture_service_worker() -> Response:
    """The capture pages' service worker, served under /c/ so its scope covers every link."""
    with open(os.path.join(current_app.static_folder, "capture-sw.js"), encoding="utf-8") as script:
        text = assets.with_versioned_imports(script.read())
    response = current_app.response_class(text, mimetype="text/javascript")
    response.headers["Service-Worker-Allowed"] = "/c/"
    response.headers["Cache-Control"] = "no-cache"
    # An ETag for the browser's update checks; a changed import changes the worker's script.
    response.add_etag()
    return response.make_conditional(request)


@bp.get("/c/<token>", defaults={"via": "link"})
@bp.get("/c/<token>/q", defaults={"via": "qr"})
@bp.get("/c/<token>/s", defaults={"via": "sms"})
def capture_page(token: str, via: str) -> Response:
    """The ticket form a crew opens from a QR code, a text message or a plain link."""
    try:
        link = links.resolve_token(token)
    except ServiceError as error:
        return _gone_page(error)
    return _capture_response(render_template("capture/page.html", **_form_context(link, via)))


def _json_refusal(error: ServiceError) -> Response:
    """A capture route's refusal for the phone's script: the error shape, never cached or sent on."""
    body = {"error": {"code": error.code, "message": error.message}}
    if error.details is not None:
        body["error"]["details"] = error.details
    response = jsonify(body)
    response.status_code = error.status
    response.headers.update(CREDENTIAL_HEADERS)
    response.headers.update(error.headers)
    return response


def _submitted_link():
    """The live link of this submission, or the ServiceError that refuses it (looked up once)."""
    if "capture_link" not in g:
        try:
            g.capture_link = links.resolve_token((request.view_args or {}).get("token", ""))
            g.capture_refusal = None
        except ServiceError as error:
            g.capture_link, g.capture_refusal = None, error
    return g.capture_link, g.capture_refusal


def _capture_limit_key() -> str:
    """Rate-limit submissions per live link (by a digest, so no token is kept or logged); every
    unknown or revoked token from one address shares one bucket, so made-up tokens gain nothing."""
    link, _ = _submitted_link()
    if link is None:
        return "capture-unknown:" + (request.remote_addr or "")
    return "link:" + token_digest(link.token)


def _refuse_before_body() -> Response | None:
    """Before the body is read: count the submission against its link's limit (unknown tokens
    against their address's), and answer one to an unknown or revoked link at once. A photo's
    later pieces count as part of the photo, which its first piece counted."""
    link, error = _submitted_link()
    try:
        if link is None or not photo_uploads.continues(request.headers.get(photo_uploads.HEADER)):
            count_or_refuse(_capture_limit(), "capture", _capture_limit_key(),
                            "too many tickets through this link just now; send again in a minute")
    except ServiceError as refused:
        error = refused
    if error is None:
        return None
    if is_capture_script_request():
        return _json_refusal(error)
    if error.status == 429:
        raise error
    return _gone_page(error)


def _refuse_status_before_body() -> Response | None:
    """Before the body is read: count a status look-up against its link's limit."""
    _, error = _submitted_link()
    try:
        count_or_refuse(current_app.config["CAPTURE_STATUS_RATE_LIMIT"], "capture-status",
                        _capture_limit_key(), "too many look-ups through this link just now; "
                        "try again in a minute")
    except ServiceError as refused:
        error = refused
    return None if error is None else _json_refusal(error)


def _capture_limit() -> str:
    """The configured per-link submission limit."""
    return current_app.config["CAPTURE_RATE_LIMIT"]


@bp.post("/c/<token>/tickets")
def capture_submit(token: str) -> Response:
    """Take a ticket from the phone (JSON, possibly a queued resend) or from the plain form."""
    as_json = is_capture_script_request()
    via = request.args.get("via") or request.form.get("via") or "link"
    try:
        if as_json:
            payload = read_json_object()
        else:
            payload = capture.form_to_payload(request.form, request.files)
        ticket, created = capture.submit(token, payload, via)
    except ServiceError as error:
        if as_json:
            return _json_refusal(error)
        if error.status in (404, 410):
            return _gone_page(error)
        link = links.resolve_token(token)
        errors = {d["field"]: capture.plain_message(d["message"])
                  for d in (error.details or []) if isinstance(d, dict)}
        if error.status == 503:  # a busy server: nothing is wrong with the ticket or its photos
            errors["_form"] = gettext("The ticket was not sent: the office is busy just now. Keep "
                                      "this page open and press Send again in a minute.")
        if error.status in (429, 507):
            errors["_form"] = gettext("The ticket was not sent: %(reason)s. Keep this page open "
                                      "and press Send again later.", reason=error.message)
        errors.setdefault("_form", gettext("Please fix the marked fields.") if error.status == 400
                          else error.message)
        response = _capture_response(render_template(
            "capture/page.html", **_form_context(link, via, request.form.to_dict(), errors)),
            status=error.status if error.status in (429, 503, 507) else 400)
        response.headers.update(error.headers)
        return response
    reference = short_reference(ticket.id)
    if as_json:
        response = jsonify({"id": ticket.id, "reference": reference, "created": created,
                            "photo_count": ticket.photo_count,
                            "photo_keys": evidence.photo_keys(ticket.id),
                            "signed": ticket.signature is not None})
        response.headers.update(CREDENTIAL_HEADERS)
        return response
    return _capture_response(render_template("capture/done.html", reference=reference,
                                             ticket=ticket, token=token, via=via))


capture_submit.before_body = _refuse_before_body


@bp.post("/c/<token>/mine")
def capture_mine(token: str) -> Response:
    """The state of the tickets this phone sent through the link, by the references it holds."""
    try:
        body = read_json_object()
        refs = body.get("client_refs")
        found = capture.phone_tickets(token, refs if isinstance(refs, list) else [])
    except ServiceError as error:
        return _json_refusal(error)
    response = jsonify({"data": found})
    response.headers.update(CREDENTIAL_HEADERS)
    return response


capture_mine.before_body = _refuse_status_before_body


@bp.post("/c/<token>/signature-requests")
def capture_signature_request(token: str) -> Response:
    """A signing link for a ticket this phone sent, to text or e-mail to the person who signs."""
    try:
        created = capture.request_signature(token, read_json_object())
    except ServiceError as error:
        return _json_refusal(error)
    response = jsonify({"url": created.url, "sms_href": created.sms_href,
                        "emailed": created.emailed_at is not None, "email": created.email,
                        "expires_at": created.expires_at.isoformat()})
    response.headers.update(CREDENTIAL_HEADERS)
    return response


def _refuse_signature_request_before_body() -> Response | None:
    """Before the body is read: the link's submission limit, then its limit on signing links."""
    refused = _refuse_before_body()
    if refused is not None:
        return refused
    try:
        count_or_refuse(current_app.config["CAPTURE_SIGNATURE_REQUEST_RATE_LIMIT"],
                        "capture-signature-request", _capture_limit_key(),
                        "too many signing links made through this link just now; try again later")
    except ServiceError as error:
        return _json_refusal(error)
    return None


capture_signature_request.before_body = _refuse_signature_request_before_body


def _whole_body() -> bytes:
    """The upload's body, or a 408 when the connection dropped before all of it came."""
    raw = request.get_data()
    if request.content_length is not None and len(raw) < request.content_length:
        raise UploadCutOff()
    return raw


class UploadCutOff(ServiceError):
    """The signal dropped during the upload: nothing is wrong with what was sent; send it again."""

    status = 408
    code = "upload_cut_off"

    def __init__(self) -> None:
        super().__init__("the upload was cut off; send it again")


def _piece_answer(progress: photo_uploads.Progress) -> Response:
    """202 to a piece of a photo that was not its last, with the capture page's headers."""
    response = photo_uploads.progress_answer(progress)
    response.headers.update(CREDENTIAL_HEADERS)
    return response


def _part_answer(token: str, work) -> Response:
    """Run one per-part upload of a capture ticket and answer the phone in JSON: the ticket
    with the photos it holds, or how far a photo sent in pieces has come."""
    try:
        answer = work()
    except ServiceError as error:
        return _json_refusal(error)
    if isinstance(answer, photo_uploads.Progress):
        return _piece_answer(answer)
    ticket, created = answer
    response = jsonify({"id": ticket.id, "reference": short_reference(ticket.id),
                        "created": created, "photo_count": ticket.photo_count,
                        "photos_expected": ticket.photos_expected,
                        "photo_keys": evidence.photo_keys(ticket.id),
                        "signed": ticket.signature is not None})
    response.headers.update(CREDENTIAL_HEADERS)
    return response


@bp.put("/c/<token>/tickets/<client_ref>/photos/<key>")
def capture_photo(token: str, client_ref: str, key: str) -> Response:
    """One photo of a ticket whose text already arrived: the image bytes as the body, whole or
    a piece at a time (Content-Range, services/files/photo_uploads.py).

    The same key again changes nothing, so a phone can resend after any drop.
    """
    return _part_answer(token, lambda: capture.put_photo(
        token, client_ref, key, _whole_body(), request.args,
        request.headers.get(photo_uploads.HEADER)))


@bp.put("/c/<token>/drafts/<client_ref>/photos/<key>")
def capture_draft_photo(token: str, client_ref: str, key: str) -> Response:
    """A photo uploaded as it is taken, while the crew is still writing its ticket (whole or a
    piece at a time, as above).

    Kept under the phone's reference until the ticket's text arrives and lists it; the
    same key again changes nothing.
    """
    try:
        answer = capture.stage_photo(token, client_ref, key, _whole_body(), request.args,
                                     request.headers.get(photo_uploads.HEADER))
    except ServiceError as error:
        return _json_refusal(error)
    if isinstance(answer, photo_uploads.Progress):
        return _piece_answer(answer)
    response = jsonify(answer)
    response.headers.update(CREDENTIAL_HEADERS)
    return response


@bp.put("/c/<token>/tickets/<client_ref>/signature")
def capture_signature(token: str, client_ref: str) -> Response:
    """The signature (PNG bytes as the body) of a ticket whose text already arrived; kept once."""
    return _part_answer(token, lambda: capture.put_signature(token, client_ref, _whole_body(),
                                                             request.args))


for _part_route in (capture_photo, capture_draft_photo, capture_signature):
    _part_route.before_body = _refuse_before_body


@bp.get("/c/<token>/qr.svg")
def capture_qr(token: str) -> Response:
    """The QR code of a link, as SVG, for screens and posters."""
    try:
        links.resolve_token(token)
    except ServiceError as error:
        return _gone_page(error)
    response = Response(links.qr_svg(token), mimetype="image/svg+xml")
    response.headers.update(CREDENTIAL_HEADERS)
    return response


@bp.get("/c/<token>/poster")
def capture_poster(token: str) -> Response:
    """A printable poster for the site trailer: project, QR code, three lines of instructions."""
    try:
        link = links.resolve_token(token)
    except ServiceError as error:
        return _gone_page(error)
    return _capture_response(render_template("capture/poster.html", link=link,
                                             qr=links.qr_svg(token),
                                             url=links.capture_url(token, "qr")))


def _links_panel(error: str | None = None, status: int = 200, *, message: str | None = None,
                 sub: tuple[str, str] | None = None) -> Response:
    """The links page, or its panel for htmx; with `sub` (project id, label), the commitment
    that sub's tickets would go on, to confirm."""
    try:
        choices = projects.list_projects(current_user.company_id)
    except ServiceError:
        choices = []
    response = render_page("review/links.html", "review/_links.html",
                           links=links.list_links(current_user.company_id), projects=choices,
                           error=error, message=message, sub=_sub_commitment(sub))
    response.status_code = status
    return response


def _sub_commitment(sub: tuple[str, str] | None) -> dict | None:
    """What the page shows to confirm a new link's sub's commitment (None when nothing to say)."""
    if sub is None:
        return None
    project_id, label = sub
    found = commitments.shown(current_user.company_id, project_id, label, briefly=True)
    if found is None:
        return None
    return {"project_id": project_id, "sub": label, "commitment": found,
            "text": commitment_sentence(found),
            "choices": commitments.choices(current_user.company_id, project_id)}


@bp.get("/links")
@login_required
def links_page() -> Response:
    """List capture links with their QR codes, SMS links and posters."""
    return _links_panel()


@bp.post("/links")
@login_required
def create_link_page() -> Response:
    """Create a capture link from the page."""
    label = request.form.get("label", "").strip()[:120] or None
    try:
        made = links.create_link(current_user.company_id, request.form.get("project_id", ""),
                                 label)
    except ServiceError as error:
        return _links_panel(error=plain_error(error).message, status=422)
    return _links_panel(sub=(made.project_id, label) if label else None)


@bp.post("/links/commitment")
@login_required
def confirm_commitment_page() -> Response:
    """Confirm the commitment a link's sub's tickets go on, kept for the sub and project."""
    form = request.form.to_dict()
    chosen = (form.get("contract_id") or "").strip()
    try:
        body = validate(SubCommitmentInput, {
            "sub": form.get("sub"),
            "contract_id": int(chosen) if chosen.isdecimal() and len(chosen) < 18
            else chosen or None})
        commitments.confirm(current_user.company_id, form.get("project_id", ""), body.sub,
                            body.contract_id, current_user.email)
    except ServiceError as error:
        return _links_panel(error=plain_error(error).message, status=422,
                            sub=(form.get("project_id", ""), form.get("sub", "")))
    return _links_panel(message=f"Confirmed: {body.sub}'s tickets on this project go on the "
                                "commitment chosen." if body.contract_id else
                        f"Confirmed: {body.sub}'s lines carry no commitment on this project.")


@bp.post("/links/<token>/revoke")
@login_required
def revoke_link_page(token: str) -> Response:
    """Revoke a capture link from the page."""
    try:
        links.revoke_link(current_user.company_id, token)
    except ServiceError as error:
        return _links_panel(error=plain_error(error).message, status=error.status)
    return _links_panel()
