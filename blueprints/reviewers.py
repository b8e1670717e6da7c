"""The /reviewers page: a company admin sees the company's reviewers and disables or enables them."""
from __future__ import annotations

from flask import Blueprint, Response, abort
from flask_login import current_user, login_required

from services.accounts import keys, reviewers
from services.platform.errors import ServiceError
from services.platform.web import render_page

bp = Blueprint("reviewers", __name__)


def _require_admin() -> None:
    """Only a company admin may manage reviewers."""
    if not current_user.is_admin:
        abort(403)


def _render(error: str | None = None, status: int = 200, notice: str | None = None) -> Response:
    """The reviewers page, or its panel for htmx, with the live keys each reviewer made."""
    people = reviewers.company_reviewers(current_user.company_id)
    response = render_page("review/reviewers.html", "review/_reviewers.html", reviewers=people,
                           keys_made={person.id: keys.live_keys_made_by(person.id) for person in people},
                           error=error, notice=notice)
    response.status_code = status
    return response


@bp.get("/reviewers")
@login_required
def reviewers_page() -> Response:
    """List the company's reviewers."""
    _require_admin()
    return _render()


@bp.post("/reviewers/<int:reviewer_id>/disable")
@login_required
def disable_reviewer(reviewer_id: int) -> Response:
    """Disable a reviewer: it cannot sign in, its open sessions end, the keys it made are revoked."""
    _require_admin()
    try:
        made = keys.live_keys_made_by(reviewer_id) if 0 < reviewer_id < 2**31 else []
        reviewer = reviewers.set_disabled_by_admin(current_user, reviewer_id, True)
    except ServiceError as error:
        return _render(error=error.message, status=error.status)
    revoked = ", ".join(f"{key.name} ({key.prefix})" for key in made)
    return _render(notice=f"{reviewer.email} is disabled" + (
        f"; the keys they made no longer work: {revoked}." if made else "."))


@bp.post("/reviewers/<int:reviewer_id>/enable")
@login_required
def enable_reviewer(reviewer_id: int) -> Response:
    """Let a disabled reviewer sign in again."""
    _require_admin()
    try:
        reviewers.set_disabled_by_admin(current_user, reviewer_id, False)
    except ServiceError as error:
        return _render(error=error.message, status=error.status)
    return _render()
