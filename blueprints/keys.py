"""API keys: the /keys page where reviewers create, see and revoke keys for programs, and see
the company's webhook endpoints with their recent deliveries (admins may send one again)."""
from __future__ import annotations

from flask import Blueprint, Response, request
from flask_login import current_user, login_required

from services.accounts import keys
from services.platform.errors import ServiceError
from services.platform.web import render_page
from services.webhooks import webhooks

bp = Blueprint("keys", __name__)


def _render(new_key: str | None = None, error: str | None = None, status: int = 200,
            template: str = "review/_keys.html", notice: str | None = None) -> Response:
    """The keys page, or one of its panels for htmx."""
    on_webhooks = template == "review/_webhooks.html"
    response = render_page("review/keys.html", template,
                           keys=keys.list_keys(current_user.company_id), new_key=new_key,
                           error=None if on_webhooks else error,
                           webhooks=webhooks.page_listing(current_user.company_id),
                           webhook_error=error if on_webhooks else None, webhook_notice=notice)
    response.status_code = status
    if new_key:
        response.headers["Cache-Control"] = "no-store"
    return response


@bp.get("/keys")
@login_required
def keys_page() -> Response:
    """List the company's API keys."""
    return _render()


@bp.post("/keys")
@login_required
def create_key() -> Response:
    """Create a key and show it once (company admins only)."""
    try:
        issued = keys.issue_key_by_reviewer(current_user, request.form.get("name", ""))
    except ServiceError as error:
        return _render(error=error.message, status=403 if error.status == 403 else 422)
    return _render(new_key=issued.secret)


@bp.post("/keys/<prefix>/revoke")
@login_required
def revoke_key(prefix: str) -> Response:
    """Revoke one of the company's keys."""
    try:
        keys.revoke_key(prefix, company_id=current_user.company_id)
    except ServiceError as error:
        return _render(error=error.message, status=error.status)
    return _render()


@bp.post("/keys/webhooks/<int:endpoint_id>/deliveries/<delivery_id>/replay")
@login_required
def replay_delivery(endpoint_id: int, delivery_id: str) -> Response:
    """Send one webhook delivery again (company admins only)."""
    panel = "review/_webhooks.html"
    try:
        webhooks.replay_by_reviewer(current_user, endpoint_id, delivery_id)
    except ServiceError as error:
        return _render(error=error.message, status=error.status, template=panel)
    return _render(template=panel, notice="It will be sent again within a few seconds.")
