"""Reviewer sign-in and sign-out pages."""
from __future__ import annotations

from flask import Blueprint, Response, current_app, redirect, render_template, request, url_for
from flask_login import current_user, login_required, login_user, logout_user

from services import auth
from services.ratelimit import limiter
from services.web import is_htmx

bp = Blueprint("auth", __name__)


def _safe_next(target: str | None) -> str:
    """Follow `next` only to a path on this site."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return url_for("tickets.queue_page")


def _login_limit() -> str:
    """How many failed sign-ins an address may make."""
    return current_app.config["LOGIN_RATE_LIMIT"]


@auth.login_manager.unauthorized_handler
def unauthorized() -> Response:
    """Send a signed-out browser to the sign-in page (htmx gets HX-Redirect, not a swap)."""
    target = url_for("auth.login", next=request.full_path if request.method == "GET" else None)
    if is_htmx():
        return Response("", status=401, headers={"HX-Redirect": target})
    return redirect(target)


@bp.route("/login", methods=["GET", "POST"])
@limiter.limit(_login_limit, methods=["POST"], deduct_when=lambda response: response.status_code == 401)
def login() -> Response | str:
    """Show the sign-in form and check it."""
    if request.method == "GET":
        if current_user.is_authenticated:
            return redirect(_safe_next(request.args.get("next")))
        return render_template("review/login.html", error=None, email="")
    email = request.form.get("email", "")
    reviewer = auth.check_login(email, request.form.get("password", ""))
    if reviewer is None:
        body = render_template("review/login.html", error="That e-mail and password do not match.",
                               email=email)
        return Response(body, status=401, mimetype="text/html")
    login_user(reviewer)
    return redirect(_safe_next(request.args.get("next")))


@bp.post("/logout")
@login_required
def logout() -> Response:
    """Sign out."""
    logout_user()
    return redirect(url_for("auth.login"))
