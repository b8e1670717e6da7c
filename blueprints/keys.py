"""API keys: the /keys page where reviewers create, see and revoke keys for programs."""
from __future__ import annotations

from flask import Blueprint, Response, request
from flask_login import current_user, login_required

from services import keys
from services.errors import ServiceError
from services.web import render_page

bp = Blueprint("keys", __name__)


def _render(new_key: str | None = None, error: str | None = None, status: int = 200) -> Response:
    """The keys page, or its panel for htmx."""
    response = render_page("review/keys.html", "review/_keys.html",
                           keys=keys.list_keys(current_user.company_id), new_key=new_key, error=error)
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
