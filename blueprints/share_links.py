"""Share links: the /v1 API, the PM's form on the links page, and the sub's live log `/l/<token>`."""
from __future__ import annotations

import datetime as dt

from flask import Blueprint, Response, current_app, g, render_template, request
from flask_login import current_user, login_required

from blueprints.api import PROJECT_SYSTEM_ERRORS, api_route, error_codes, to_json
from models import utcnow
from models.schemas import ShareLinkCreated, ShareLinkInput, ShareLinkList, ShareLinkListQuery
from services.accounts.ratelimit import count_or_refuse
from services.capture import links
from services.platform import i18n
from services.platform.errors import ServiceError
from services.platform.validation import validate
from services.platform.web import CREDENTIAL_HEADERS, render_page
from services.project_system import projects
from services.project_system.zones import UTC
from services.reports import share_links
from services.tickets import documents

bp = Blueprint("share_links", __name__)

# ------------------------------------------------------------------ /v1

@api_route(bp, "/share-links", tag="share-links", query=ShareLinkListQuery, response=ShareLinkList)
def list_share_links(query: ShareLinkListQuery) -> ShareLinkList:
    """List the company's share links, newest first, ended and expired ones too.

    Their addresses are not shown again; `total` counts every link, whatever `limit` and
    `offset` are.
    """
    return share_links.list_links(g.company_id, query.limit, query.offset)


@api_route(bp, "/share-links", method="POST", tag="share-links", body=ShareLinkInput,
           response=ShareLinkCreated, success=201,
           errors=error_codes({409: ("project_not_found",)}, PROJECT_SYSTEM_ERRORS),
           extra_responses={409: "`project_not_found`: `project_id` is not one of the company's "
                                 "projects; `project_system_not_connected`: a `project_id` was "
                                 "given before the company connected a project system."})
def create_share_link(body: ShareLinkInput) -> Response:
    """Make a share link for a sub's tickets; answers its address once.

    Anyone holding `url` reads that sub's tickets (of `project_id` when given) until the link
    is ended or `expires_at` passes.
    """
    response = to_json(share_links.create(g.company_id, body, g.actor))
    response.headers["Cache-Control"] = "no-store"
    return response


@api_route(bp, "/share-links/<int:share_link_id>", method="DELETE", tag="share-links",
           success=204, errors={404: ("share_link_not_found",)})
def delete_share_link(share_link_id: int) -> None:
    """End a share link; ending it again is harmless.

    Its page then answers 410. The link stays listed, with `ended_at`.
    """
    share_links.end(g.company_id, share_link_id)


# ------------------------------------------------------------------ the PM's form

def share_panel_context(*, made: ShareLinkCreated | None = None, error: str | None = None,
                        choices: list | None = None) -> dict:
    """What the links page's share panel shows: the form's choices, the links, a new address."""
    company_id = current_user.company_id
    if choices is None:
        names = projects.project_names(company_id)
        choices = sorted(names.items(), key=lambda item: item[1].casefold())
    found = share_links.list_links(company_id, limit=200).data
    return {"links": found, "projects": choices,
            "last_days": {link.id: share_links.last_day(company_id, link.project_id,
                                                        link.expires_at) for link in found},
            "project_names": dict(choices), "subs": links.labels(company_id), "made": made,
            "error": error, "now": utcnow()}


@bp.app_template_global("share_panel")
def share_panel() -> dict:
    """The share panel's context as the links page opens it (its template calls this)."""
    return share_panel_context()


def _share_panel(status: int = 200, **context) -> Response:
    """The share panel for htmx, else a page of its own (a form posted without scripts)."""
    response = render_page("review/share_links.html", "review/_share_links.html",
                           panel=share_panel_context(**context))
    response.status_code = status
    return response


def _form_expiry(text: str, project_id: str | None) -> str | None:
    """The expiry a date of the form means: the end of that day on the project's clock (UTC for
    every project), as RFC 3339; None when none was given or it is no date."""
    try:
        day = dt.date.fromisoformat(text.strip()[:10]) if text.strip() else None
        if day is None:
            return None
        day += dt.timedelta(days=1)
    except (ValueError, OverflowError):  # no date, or the last day a calendar has
        return "not a day"
    zone = (projects.cached_time_zone(current_user.company_id, project_id) if project_id
            else None) or UTC
    return dt.datetime.combine(day, dt.time(), zone).isoformat()


def _plain(error: ServiceError) -> str:
    """What went wrong with a share link made on the page, in a PM's words."""
    fields = {str(d.get("field")) for d in (error.details or []) if isinstance(d, dict)}
    if error.status == 400 and "sub" in fields:
        return "Name the sub whose tickets the link shows (as its tickets name it)."
    if error.status == 400 and "expires_at" in fields:
        return "Pick a day from today on for the link to work until, or leave it empty."
    if error.code == "project_not_found":
        return "That project is not in Procore any more; pick another, or every project."
    if error.status >= 500 or error.code == "project_system_not_connected":
        return "Procore could not be reached to check the project; nothing was made. Try again " \
               "in a moment."
    return "The share link could not be made; nothing was changed."


@bp.post("/links/share")
@login_required
def create_share_link_page() -> Response:
    """Make a share link from the links page; its address is shown this once."""
    form = request.form
    project_id = (form.get("project_id") or "").strip() or None
    try:
        body = validate(ShareLinkInput, {"sub": form.get("sub", ""), "project_id": project_id,
                                         "expires_at": _form_expiry(form.get("expires", ""),
                                                                    project_id)})
        made = share_links.create(current_user.company_id, body, current_user.email)
    except ServiceError as error:
        return _share_panel(status=422, error=_plain(error))
    return _share_panel(made=made)


@bp.post("/links/share/<int:share_link_id>/end")
@login_required
def end_share_link_page(share_link_id: int) -> Response:
    """End a share link from the links page."""
    share_links.end(current_user.company_id, share_link_id)
    return _share_panel()


# ------------------------------------------------------------------ the sub's log

def _token() -> str:
    """The share token of this request's path."""
    return str((request.view_args or {}).get("token", ""))[:64]


def _answer(body: str | bytes, status: int = 200, mimetype: str = "text/html") -> Response:
    """An answer of the log's pages: never cached, never sent on with a referrer."""
    response = Response(body, status=status, mimetype=mimetype)
    response.headers.update(CREDENTIAL_HEADERS)
    response.vary.add("Accept-Language")
    response.vary.add("Cookie")
    return i18n.remember_choice(response)


def _refused(state: str, error: ServiceError) -> Response:
    """The plain page of a link that does not work, or of too many requests."""
    response = _answer(render_template("share/gone.html", state=state), status=error.status)
    response.headers.update(error.headers)
    return response


def _open_link():
    """Count this request against its link's limit (unknown tokens against their address),
    then the working link; ServiceError when refused."""
    token = _token()
    found = share_links.find(token)
    key = share_links.limit_key(token) if found is not None \
        else "share-unknown:" + (request.remote_addr or "")
    count_or_refuse(current_app.config["SHARE_LINK_RATE_LIMIT"], "share-link", key,
                    "too many requests through this link just now")
    return share_links.resolve(token)


def _guarded(answer):
    """Run a log page's answer, turning a refusal into its plain page."""
    try:
        return answer(_open_link())
    except share_links.ShareLinkGone as error:
        return _refused("gone", error)
    except documents.DocumentBusy as error:
        return _refused("busy", error)
    except ServiceError as error:
        if error.status == 429:
            return _refused("limited", error)
        if error.status == 404:
            return _refused("unknown", error)
        raise


@bp.get("/l/<token>")
def share_log(token: str) -> Response:
    """A sub's tickets and where each stands, newest first, a page at a time (no account)."""
    page = request.args.get("page", "1")
    number = int(page) if page.isdecimal() and len(page) < 7 else 1

    def answer(link) -> Response:
        return _answer(render_template(
            "share/log.html", link=link, token=token, log=share_links.log_page(link, number),
            project_name=projects.known_project_name(link.company_id, link.project_id)
            if link.project_id else None, record_text=share_links.record_text,
            change_order_text=share_links.change_order_text,
            last_day=share_links.last_day(link.company_id, link.project_id, link.expires_at)))
    return _guarded(answer)


@bp.get("/l/<token>/log.csv")
def share_log_csv(token: str) -> Response:
    """The sub's log as CSV for a spreadsheet: the page's rows, every page."""
    def answer(link) -> Response:
        response = _answer(share_links.log_csv(link), mimetype="text/csv")
        response.headers["Content-Disposition"] = \
            f'attachment; filename="tickets-{utcnow():%Y-%m-%d}.csv"'
        return response
    return _guarded(answer)


@bp.get("/l/<token>/tickets/<ticket_id>/document.pdf")
def share_document(token: str, ticket_id: str) -> Response:
    """The document (PDF) of one of the log's tickets, made like the ticket's own."""
    def answer(link) -> Response:
        ticket = share_links.ticket_of(link, ticket_id)
        response = _answer(documents.render_ticket_document(ticket), mimetype=documents.MEDIA_TYPE)
        response.headers["Content-Disposition"] = \
            f'attachment; filename="{documents.document_filename(ticket.id)}"'
        return response
    return _guarded(answer)
