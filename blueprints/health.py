"""GET /healthz: for monitoring; no key needed and nothing secret in the answer."""
from __future__ import annotations

from flask import Blueprint, Response, jsonify

from services import health

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    """200 when the service can serve (the project system only degrades it), else 503."""
    report, healthy = health.health()
    response = jsonify(report)
    response.status_code = 200 if healthy else 503
    response.headers["Cache-Control"] = "no-store"
    return response
