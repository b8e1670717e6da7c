"""The start page."""
from __future__ import annotations

from flask import Blueprint, render_template

bp = Blueprint("home", __name__)


@bp.get("/")
def index() -> str:
    """Show the start page with pointers to the queue and the API description."""
    return render_template("home.html")


@bp.get("/favicon.ico")
def favicon() -> tuple[str, int, dict[str, str]]:
    """No icon: answer quickly so browsers stop asking."""
    return "", 204, {"Cache-Control": "public, max-age=86400"}
