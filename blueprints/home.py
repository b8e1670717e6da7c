"""The start page."""
from __future__ import annotations

from flask import Blueprint, render_template

bp = Blueprint("home", __name__)


@bp.get("/")
def index() -> str:
    """Show the start page with pointers to the queue and the API description."""
    return render_template("home.html")
