"""The /reviewers page: a company admin sees the company's reviewers and disables or enables them;
/digest: each reviewer turns their morning e-mail off or on, signed in or from the e-mail's link."""
from __future__ import annotations

from flask import Blueprint, Response, abort, render_template, request
from flask_login import current_user, login_required

from services.accounts import keys, reviewers
from services.platform.errors import ServiceError
from services.platform.web import CREDENTIAL_HEADERS, render_page
from services.reports import digest

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


@bp.get("/digest")
@login_required
def digest_page() -> Response:
    """Whether the signed-in reviewer gets the morning e-mail, and the form that changes it."""
    return render_page("review/digest.html", "review/_digest.html", on=not current_user.digest_off,
                       sent_at=digest.sent_at(current_user.company_id))


@bp.post("/digest")
@login_required
def digest_choice() -> Response:
    """Turn the signed-in reviewer's morning e-mail on or off."""
    on = request.form.get("digest") == "on"
    digest.set_digest(current_user.id, on)
    return render_page("review/digest.html", "review/_digest.html", on=on,
                       sent_at=digest.sent_at(current_user.company_id),
                       notice="You will get the morning e-mail." if on
                       else "You will get no more morning e-mails.")


@bp.get("/digest/stop/<token>")
def digest_stop_page(token: str) -> Response:
    """The page a digest's 'stop' link opens, with no sign-in: one button turns it off (opening
    the link alone changes nothing, since mail scanners open links too)."""
    reviewer = digest.stop_reviewer(token)
    if reviewer is None:
        abort(404)
    return Response(render_template("review/digest_stop.html", email=reviewer.email,
                                    off=reviewer.digest_off, token=token), mimetype="text/html",
                    headers=CREDENTIAL_HEADERS)


@bp.post("/digest/stop/<token>")
def digest_stop(token: str) -> Response:
    """Turn off the morning e-mail of the reviewer a stop link was made for."""
    reviewer = digest.stop_reviewer(token)
    if reviewer is None:
        abort(404)
    digest.set_digest(reviewer.id, False)
    return Response(render_template("review/digest_stop.html", email=reviewer.email, off=True,
                                    token=token, done=True), mimetype="text/html",
                    headers=CREDENTIAL_HEADERS)
