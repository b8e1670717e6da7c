"""The start page."""
from __future__ import annotations

from flask import Blueprint, Response, redirect, render_template, url_for
from flask_login import current_user

bp = Blueprint("home", __name__)


@bp.get("/")
def index() -> Response | str:
    """Signed-in reviewers go to the queue; everyone else sees the start page."""
    if current_user.is_authenticated:
        return redirect(url_for("tickets.queue_page"))
    return render_template("home.html")


@bp.get("/favicon.ico")
def favicon() -> tuple[str, int, dict[str, str]]:
    """No icon: answer quickly so browsers stop asking."""
    return "", 204, {"Cache-Control": "public, max-age=86400"}
