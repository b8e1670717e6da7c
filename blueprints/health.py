"""GET /healthz: for monitoring; no key needed and nothing secret in the answer."""
from __future__ import annotations

import hmac
import ipaddress

from flask import Blueprint, Response, current_app, jsonify, request

from services import health

bp = Blueprint("health", __name__)


def _may_see_detail() -> bool:
    """Whether this caller sees the checks: a loopback caller, or one sending HEALTHZ_KEY.

    Without a trusted proxy a forwarded request still arrives from loopback, so a request
    that carries X-Forwarded-For is then taken as coming from outside.
    """
    key = current_app.config.get("HEALTHZ_KEY")
    offered = request.headers.get("X-Health-Key")
    if key and offered and hmac.compare_digest(offered.encode(), str(key).encode()):
        return True
    if not current_app.config["TRUSTED_PROXIES"] and "X-Forwarded-For" in request.headers:
        return False
    try:
        return ipaddress.ip_address(request.remote_addr or "").is_loopback
    except ValueError:
        return False


@bp.get("/healthz")
def healthz() -> Response:
    """200 when the service can serve (the project system only degrades it), else 503.

    Loopback callers (and callers with the key) get every check; others only "ok" or
    "degraded".
    """
    report, healthy = health.health()
    if _may_see_detail():
        response = jsonify(report)
    else:
        response = jsonify({"status": "ok" if report["status"] == "ok" else "degraded"})
    response.status_code = 200 if healthy else 503
    response.headers["Cache-Control"] = "no-store"
    return response
