"""OAuth 2.0 client-credentials tokens, bearer checks and the per-company hourly rate limit."""
from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import time
from typing import Any

from flask import Blueprint, Response, current_app, g, jsonify, request
from werkzeug.http import http_date

from sandbox.common import ApiError, get_db
from sandbox.store import iso_now, write_transaction

bp = Blueprint("sandbox_oauth", __name__)

INVALID_TOKEN = "The access token is invalid"
INVALID_CLIENT = ("Client authentication failed due to unknown client, no client authentication "
                  "included, or unsupported authentication method.")
MISSING_COMPANY_HEADER = (
    "Missing Procore-Company-Id header!\n\n"
    "Each call your application makes to the Procore API must contain a request header that "
    "includes the Procore-Company-Id field.\n"
    "This request header field specifies the id of the company into which you are making "
    "the call."
)
RATE_LIMITED = ("You have surpassed the max number of requests for an hour. "
                "Please wait until your limit resets.")
RATE_WINDOW_S = 3600
SPIKE_WINDOW_S = 10
# Procore documents one 429 body for both limits; this one says which was hit, for people.
RATE_LIMITED_SPIKE = ("You have surpassed the max number of requests in a short time. "
                      "Please wait until your limit resets.")


def _digest(secret: str) -> str:
    """SHA-256 hex digest; only digests of client secrets and tokens are stored."""
    return hashlib.sha256(secret.encode()).hexdigest()


def _oauth_error(status: int, error: str, description: str) -> Response:
    """An RFC 6749 error body, as Doorkeeper (Procore's OAuth server) answers."""
    response = jsonify({"error": error, "error_description": description})
    response.status_code = status
    return response


@bp.post("/oauth/token")
def token() -> Response:
    """Issue an access token for the client_credentials grant (form, multipart or JSON body)."""
    params: dict[str, Any] = dict(request.form)
    payload = request.get_json(silent=True) if request.is_json else None
    if isinstance(payload, dict):
        params.update(payload)
    if request.authorization and request.authorization.type == "basic":
        params.setdefault("client_id", request.authorization.username)
        params.setdefault("client_secret", request.authorization.password)
    if params.get("grant_type") != "client_credentials":
        return _oauth_error(400, "unsupported_grant_type",
                            "The authorization grant type is not supported by the "
                            "authorization server.")
    client_id = str(params.get("client_id") or "")
    client_secret = str(params.get("client_secret") or "")
    db = get_db()
    client = next(db.query("SELECT company_id, secret_sha256 FROM clients WHERE client_id = ?",
                           [client_id]), None)
    if client is None or not hmac.compare_digest(client["secret_sha256"],
                                                 _digest(client_secret)):
        return _oauth_error(401, "invalid_client", INVALID_CLIENT)
    access_token = secrets.token_urlsafe(32)
    ttl = int(current_app.config["SANDBOX_TOKEN_TTL"])
    now = time.time()
    with write_transaction(db):
        db.table("tokens").insert({"token_sha256": _digest(access_token),
                                   "company_id": client["company_id"],
                                   "expires_at": now + ttl, "revoked": 0,
                                   "created_at": iso_now()})
    return jsonify({"access_token": access_token, "token_type": "bearer", "expires_in": ttl,
                    "created_at": int(now)})


def bearer_company() -> int:
    """The company of the request's bearer token; 401 when it is missing, expired or revoked."""
    scheme, _, access_token = request.headers.get("Authorization", "").partition(" ")
    row = None
    if scheme.lower() == "bearer" and access_token.strip():
        row = next(get_db().query(
            "SELECT company_id FROM tokens WHERE token_sha256 = ? AND revoked = 0 "
            "AND expires_at > ?", [_digest(access_token.strip()), time.time()]), None)
    if row is None:
        raise ApiError(401, INVALID_TOKEN, headers={
            "WWW-Authenticate": f'Bearer realm="Doorkeeper", error="invalid_token", '
                                f'error_description="{INVALID_TOKEN}"'})
    return int(row["company_id"])


def check_company_header(company_id: int) -> None:
    """Require a Procore-Company-Id header naming the token's company."""
    header = request.headers.get("Procore-Company-Id", "").strip()
    if not header:
        raise ApiError(400, MISSING_COMPANY_HEADER)
    if header != str(company_id):
        raise ApiError(403, "App is not connected to this company")


def revoke_tokens(company_id: int) -> int:
    """Revoke every live token of a company; returns how many were revoked."""
    db = get_db()
    with write_transaction(db):
        cursor = db.execute("UPDATE tokens SET revoked = 1 WHERE company_id = ? AND revoked = 0",
                            [company_id])
    return cursor.rowcount


def sandbox_now(db: Any, company_id: int) -> float:
    """The company's sandbox clock: real (or frozen) time plus the offset tests move it by."""
    row = db.execute("SELECT clock_offset_s, clock_frozen_at FROM companies WHERE id = ?",
                     [company_id]).fetchone()
    offset, frozen = (row[0] or 0.0, row[1]) if row else (0.0, None)
    return (time.time() if frozen is None else frozen) + offset


def count_request(company_id: int) -> Response | None:
    """Count a call against the hourly window and the spike window; a 429 once either is used.

    The spike window is fixed (10 s, or 60 s) by default; a company switched to a rolling
    window counts the calls of the last `spike_window_s` seconds, and its reset is when the
    oldest of them leaves the window (one call free again, not all).
    """
    db = get_db()
    now = sandbox_now(db, company_id)
    offset, frozen = db.execute("SELECT clock_offset_s, clock_frozen_at FROM companies "
                                "WHERE id = ?", [company_id]).fetchone() or (None, None)
    if offset or frozen is not None:  # the company's clock is not ours: the Date says its time
        g.sandbox_now = now
    window = int(now // RATE_WINDOW_S) * RATE_WINDOW_S
    with write_transaction(db):
        override, spike_limit, spike_s, rolling = db.execute(
            "SELECT rate_limit_per_hour, spike_limit, spike_window_s, spike_rolling "
            "FROM companies WHERE id = ?", [company_id]).fetchone() or (None, None, None, None)
        if spike_limit is None:  # the company's own setting, else the sandbox's default
            spike_limit = int(current_app.config["SANDBOX_SPIKE_LIMIT"] or 0)
        spike_limit = spike_limit if spike_limit > 0 else None  # 0: no spike limit
        db.execute("DELETE FROM rate_windows WHERE company_id = ? AND window_start < ?",
                   [company_id, window])
        used = db.execute(
            "INSERT INTO rate_windows (company_id, window_start, count) VALUES (?, ?, 1) "
            "ON CONFLICT (company_id, window_start) DO UPDATE SET count = count + 1 "
            "RETURNING count", [company_id, window]).fetchone()[0]
        spike_used, spike_reset = _count_spike(db, company_id, now, spike_limit,
                                               spike_s or SPIKE_WINDOW_S, rolling)
    limit = int(override if override is not None
                else current_app.config["SANDBOX_RATE_LIMIT_PER_HOUR"])
    reset = window + RATE_WINDOW_S
    g.rate = (limit, max(limit - used, 0), reset)
    # The headers report the limit most likely to be hit first (rate_limiting.md).
    spike_left = None if spike_limit is None else max(spike_limit - spike_used, 0)
    if spike_left is not None and spike_left < limit - used:
        g.rate = (spike_limit, spike_left, spike_reset)
    if used > limit:
        response = Response(RATE_LIMITED, status=429, mimetype="text/plain")
        response.headers["Retry-After"] = str(math.ceil(reset - now))
        return response
    if spike_limit is not None and spike_used > spike_limit:
        g.rate = (spike_limit, 0, spike_reset)
        response = Response(RATE_LIMITED_SPIKE, status=429, mimetype="text/plain")
        response.headers["Retry-After"] = str(max(math.ceil(spike_reset - now), 1))
        return response
    return None


def _count_spike(db: Any, company_id: int, now: float, spike_limit: int | None, spike_s: int,
                 rolling: Any) -> tuple[int, float]:
    """Count a call in the spike window (fixed, or the last `spike_s` seconds when `rolling`):
    the calls it holds with this one, and when one is free again. Inside the caller's write."""
    spike_window = int(now // spike_s) * spike_s
    spike_reset: float = spike_window + spike_s
    spike_used = 0
    if spike_limit is not None and rolling:
        db.execute("DELETE FROM spike_calls WHERE company_id = ? AND at <= ?",
                   [company_id, now - spike_s])
        spike_used, oldest = db.execute(
            "SELECT count(*), min(at) FROM spike_calls WHERE company_id = ?",
            [company_id]).fetchone()
        spike_used += 1
        if spike_used <= spike_limit:
            db.execute("INSERT INTO spike_calls (company_id, at) VALUES (?, ?)",
                       [company_id, now])
        spike_reset = math.ceil((oldest if oldest is not None else now) + spike_s)
    elif spike_limit is not None:
        db.execute("DELETE FROM spike_windows WHERE company_id = ? AND window_start < ?",
                   [company_id, spike_window])
        spike_used = db.execute(
            "INSERT INTO spike_windows (company_id, window_start, count) VALUES (?, ?, 1) "
            "ON CONFLICT (company_id, window_start) DO UPDATE SET count = count + 1 "
            "RETURNING count", [company_id, spike_window]).fetchone()[0]
    return spike_used, spike_reset


def rate_headers() -> dict[str, str]:
    """X-Rate-Limit-* headers for this response (a fresh window when nothing was counted)."""
    limit, remaining, reset = g.get("rate") or (
        int(current_app.config["SANDBOX_RATE_LIMIT_PER_HOUR"]),
        int(current_app.config["SANDBOX_RATE_LIMIT_PER_HOUR"]),
        int(time.time() // RATE_WINDOW_S) * RATE_WINDOW_S + RATE_WINDOW_S)
    headers = {"X-Rate-Limit-Limit": str(limit), "X-Rate-Limit-Remaining": str(remaining),
               "X-Rate-Limit-Reset": str(int(reset))}
    if g.get("sandbox_now") is not None:  # the company's clock, frozen or set apart
        headers["Date"] = http_date(g.sandbox_now)
    return headers
