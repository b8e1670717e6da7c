"""Reviewer sign-in and sign-out pages."""
from __future__ import annotations

import hashlib
import re
import urllib.parse

from flask import Blueprint, Response, current_app, redirect, render_template, request, url_for
from flask_login import current_user, login_required, login_user, logout_user

from services import auth, reviewers
from services.ratelimit import count_or_refuse
from services.web import is_htmx

bp = Blueprint("auth", __name__)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _safe_next(target: str | None) -> str:
    """Follow `next` only to a bare path on this site, else go to the queue.

    Browsers drop tabs and newlines from URLs, so "/%09/evil.example" would become
    "//evil.example", another site: control characters go before anything is checked.
    """
    target = _CONTROL.sub("", target or "")
    parts = urllib.parse.urlsplit(target)
    if (target.startswith("/") and not target.startswith("//") and "\\" not in target
            and not parts.scheme and not parts.netloc):
        return target
    return url_for("tickets.queue_page")


def _login_limit() -> str:
    """How many sign-in attempts an address may make."""
    return current_app.config["LOGIN_RATE_LIMIT"]


def _account_limit() -> str:
    """How many sign-in attempts one account may receive, from any number of addresses."""
    return current_app.config["LOGIN_ACCOUNT_RATE_LIMIT"]


def _account_key() -> str:
    """The limit bucket of the account a sign-in names: a digest, so no e-mail is kept or logged."""
    email = (request.form.get("email") or "").strip().lower()
    return "account:" + hashlib.sha256(email.encode("utf-8", "replace")).hexdigest()[:24]


def _count_address_attempt() -> None:
    """Before the form is read: count this attempt from the client's address."""
    count_or_refuse(_login_limit(), "login-address", request.remote_addr or "",
                    "too many sign-in attempts from this address; wait and try again")


def _count_account_attempt() -> None:
    """Once the form is read: count this attempt at the named account, from any address."""
    count_or_refuse(_account_limit(), "login-account", _account_key(),
                    "too many sign-in attempts at this account; wait and try again")


@auth.login_manager.unauthorized_handler
def unauthorized() -> Response:
    """Send a signed-out browser to the sign-in page (htmx gets HX-Redirect, not a swap)."""
    target = url_for("auth.login", next=request.full_path if request.method == "GET" else None)
    if is_htmx():
        return Response("", status=401, headers={"HX-Redirect": target})
    return redirect(target)


@bp.route("/login", methods=["GET", "POST"])
# Every attempt counts before its password is checked, so concurrent tries cannot slip past
# the limit; per address (before the body is read) and per account (once the form is read),
# so many addresses cannot take turns at one account.
def login() -> Response | str:
    """Show the sign-in form and check it."""
    if request.method == "GET":
        if current_user.is_authenticated:
            return redirect(_safe_next(request.args.get("next")))
        return render_template("review/login.html", error=None, email="")
    _count_account_attempt()
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
    """Sign out, ending this reviewer's sessions on every device."""
    reviewers.end_sessions(current_user.id)
    logout_user()
    return redirect(url_for("auth.login"))


login.before_body = _count_address_attempt
