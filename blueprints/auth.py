"""Reviewer sign-in and sign-out pages."""
from __future__ import annotations

import re
import urllib.parse

from flask import Blueprint, Response, current_app, redirect, render_template, request, url_for
from flask_login import current_user, login_required, login_user, logout_user

from services.accounts import auth, reviewers
from services.accounts.ratelimit import count, count_or_refuse
from services.platform import mail
from services.platform.web import is_htmx

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


def _config(name: str) -> str:
    """One of the sign-in limits."""
    return current_app.config[name]


def _count_address_attempt() -> None:
    """Before the form is read: count every attempt from this address (a ceiling on floods,
    which also bounds how many wrong passwords can be in flight at once)."""
    count_or_refuse(_config("LOGIN_ADDRESS_ATTEMPTS_LIMIT"), "login-address", request.remote_addr or "",
                    "too many sign-in attempts from this address; wait and try again")


def _count_account_attempt(email: str, device: str | None) -> None:
    """Once the form is read: count this attempt at the account, before its password is checked:
    in the browser's own bucket when it signed in to the account before, else in the bucket
    every other client shares (so many addresses cannot take turns, nor lock the owner out)."""
    if device is not None:
        count_or_refuse(_config("LOGIN_DEVICE_RATE_LIMIT"), "login-device", device,
                        "too many sign-in attempts from this browser; wait and try again")
        return
    count_or_refuse(_config("LOGIN_ACCOUNT_RATE_LIMIT"), "login-account",
                    "account:" + auth.account_digest(email),
                    "too many sign-in attempts at this account; wait and try again")
    count_or_refuse(_config("LOGIN_RATE_LIMIT"), "login-address-failures", request.remote_addr or "",
                    "too many wrong passwords from this address; wait and try again",
                    counting=False)


@auth.login_manager.unauthorized_handler
def unauthorized() -> Response:
    """Send a signed-out browser to the sign-in page (htmx gets HX-Redirect, not a swap)."""
    target = url_for("auth.login", next=request.full_path if request.method == "GET" else None)
    if is_htmx():
        return Response("", status=401, headers={"HX-Redirect": target})
    return redirect(target)


@bp.route("/login", methods=["GET", "POST"])
# Every attempt counts at its account before its password is checked, so concurrent tries
# cannot slip past the limit; a wrong password also counts at its address, a right one never.
def login() -> Response | str:
    """Show the sign-in form and check it."""
    if request.method == "GET":
        if current_user.is_authenticated:
            return redirect(_safe_next(request.args.get("next")))
        return render_template("review/login.html", error=None, email="")
    email = request.form.get("email", "")
    device = auth.trusted_device(email)
    _count_account_attempt(email, device)
    reviewer = auth.check_login(email, request.form.get("password", ""))
    if reviewer is None:
        count(_config("LOGIN_RATE_LIMIT"), "login-address-failures", request.remote_addr or "")
        body = render_template("review/login.html", error="That e-mail and password do not match.",
                               email=email)
        return Response(body, status=401, mimetype="text/html")
    login_user(reviewer)
    response = redirect(_safe_next(request.args.get("next")))
    auth.remember_device(response, email, device)
    return response


LINK_SENT = ("If that e-mail has a login here, a sign-in link is on its way to it. It works once, "
             "for {minutes} minutes.")


@bp.post("/login/link")
def request_link() -> Response | str:
    """E-mail a one-time sign-in link (the answer is the same whether the e-mail has a login)."""
    if not mail.configured():
        body = render_template("review/login.html", email="", error=(
            "E-mail is not set up on this server, so no sign-in link can be sent; ask your "
            "company admin to reset your password."))
        return Response(body, status=503, mimetype="text/html")
    email = request.form.get("link_email", "")
    auth.send_sign_in_link(email)
    return render_template("review/login.html", error=None, email=email,
                           notice=LINK_SENT.format(minutes=_config("SIGN_IN_LINK_MINUTES")))


@bp.route("/login/link/<token>", methods=["GET", "POST"])
def link_sign_in(token: str) -> Response | str:
    """A sign-in link: a page with one button (mail scanners open links), which signs in once."""
    reviewer = auth.link_reviewer(token) if request.method == "GET" else auth.use_sign_in_link(token)
    if reviewer is None:
        body = render_template("review/login.html", email="", error=(
            "That sign-in link has been used or is too old. Ask for a new one below."))
        return Response(body, status=404, mimetype="text/html")  # no such link (any more)
    if request.method == "GET":
        return render_template("review/login_link.html", email=reviewer.email)
    login_user(reviewer)
    response = redirect(url_for("tickets.queue_page"))
    auth.remember_device(response, reviewer.email, None)
    return response


@bp.post("/logout")
@login_required
def logout() -> Response:
    """Sign out, ending this reviewer's sessions on every device."""
    reviewers.end_sessions(current_user.id)
    logout_user()
    return redirect(url_for("auth.login"))


login.before_body = _count_address_attempt
request_link.before_body = _count_address_attempt
link_sign_in.before_body = _count_address_attempt
