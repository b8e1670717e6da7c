"""Human-readable pages for the records the API creates, and attachment downloads.

The paths mirror Procore's web app (``/{project_id}/project/change_events/events/{id}``) so
the URL a client builds opens a page. The sandbox is a local test double: these pages
need no login.
"""
from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, abort, current_app, render_template, send_file

from sandbox.change_events import change_event_v11
from sandbox.common import get_db
from sandbox.daily_log import manpower_json

bp = Blueprint("sandbox_web", __name__)


@bp.after_request
def lock_down(response: Response) -> Response:
    """Pages carry no scripts; downloads never render in the sandbox's origin."""
    response.headers["Content-Security-Policy"] = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; sandbox")
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@bp.get("/")
def index() -> str:
    """What this server is."""
    return render_template("index.html")


def _record_of_project(db, table: str, record_id: int, project_id: int) -> dict:
    """A record of a project, or 404 when the project has no such record."""
    row = next(db.query(f"SELECT * FROM {table} WHERE id = ? AND project_id = ?",
                        [record_id, project_id]), None)
    if row is None:
        abort(404)
    return row


@bp.get("/<int:project_id>/project/change_events/events/<int:event_id>")
def change_event_page(project_id: int, event_id: int) -> str:
    """A change event with its line items and attachments."""
    db = get_db()
    row = _record_of_project(db, "change_events", event_id, project_id)
    return render_template("change_event.html", event=change_event_v11(db, row),
                           project=db.table("projects").get(project_id))


@bp.get("/<int:project_id>/project/daily_log/manpower_logs/<int:log_id>")
def manpower_log_page(project_id: int, log_id: int) -> str:
    """A daily log manpower entry."""
    db = get_db()
    row = _record_of_project(db, "manpower_logs", log_id, project_id)
    return render_template("manpower_log.html", log=manpower_json(db, row),
                           project=db.table("projects").get(project_id))


@bp.get("/_sandbox/files/<int:attachment_id>")
def download(attachment_id: int) -> Response:
    """An attachment's bytes, always as a download."""
    row = next(get_db().query("SELECT * FROM attachments WHERE id = ?", [attachment_id]), None)
    if row is None:
        abort(404)
    path = Path(current_app.config["SANDBOX_FILES_DIR"]) / str(row["id"])
    return send_file(path, mimetype=row["content_type"], as_attachment=True,
                     download_name=row["filename"])
