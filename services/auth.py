"""Reviewer sign-in: password checks with Argon2id, and the login manager."""
from __future__ import annotations

import hashlib
import secrets

from argon2.exceptions import InvalidHashError, VerificationError
from flask import Response, current_app, request
from flask_login import LoginManager
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy import select

from models import Reviewer, db
from services.database import write_transaction
from services.reviewers import password_hasher

login_manager = LoginManager()
login_manager.login_view = "auth.login"
login_manager.login_message = "Please sign in to see the review queue."
login_manager.session_protection = "strong"

# Verifying against a real hash even for an unknown e-mail keeps both paths equally slow.
_DUMMY_HASH: dict[str, str] = {}


@login_manager.user_loader
def load_reviewer(session_id: str) -> Reviewer | None:
    """Load the signed-in reviewer for a request: only while the session's epoch is current.

    A session names "<reviewer id>:<epoch>"; signing out, a password reset or disabling
    raises the reviewer's epoch, so every session opened before no longer loads.
    """
    reviewer_id, _, epoch = str(session_id).partition(":")
    try:
        reviewer = db.session.get(Reviewer, int(reviewer_id))
        wanted = int(epoch)
    except (TypeError, ValueError):
        return None
    if reviewer is None or reviewer.session_epoch != wanted or reviewer.disabled_at is not None:
        return None
    return reviewer


def _dummy_hash(hasher) -> str:
    """A hash of no one's password, computed once per hasher profile."""
    key = str(hasher.memory_cost)
    if key not in _DUMMY_HASH:
        _DUMMY_HASH[key] = hasher.hash("not a password of anyone")
    return _DUMMY_HASH[key]


def check_login(email: str, password: str) -> Reviewer | None:
    """The reviewer with this e-mail and password, or None."""
    hasher = password_hasher()
    reviewer = db.session.scalar(select(Reviewer).where(Reviewer.email == (email or "").strip().lower()))
    if reviewer is None:
        # One verification, as for a known e-mail; the dummy hash itself is made only once.
        try:
            hasher.verify(_dummy_hash(hasher), password or "")
        except VerificationError:
            pass
        return None
    try:
        hasher.verify(reviewer.password_hash, password or "")
    except (VerificationError, InvalidHashError):
        return None
    if reviewer.disabled_at is not None:
        return None
    if hasher.check_needs_rehash(reviewer.password_hash):
        with write_transaction() as session:
            session.get(Reviewer, reviewer.id).password_hash = hasher.hash(password)
    return reviewer


# A browser that signed in to an account carries this cookie; its attempts at that account are
# counted in its own bucket, not in the one every other client shares (OWASP's device cookies).
DEVICE_COOKIE = "ewt_device"


def account_digest(email: str) -> str:
    """The account a sign-in names, as a digest: no e-mail is kept in limits or cookies."""
    normal = (email or "").strip().lower()
    return hashlib.sha256(normal.encode("utf-8", "replace")).hexdigest()[:24]


def _device_signer() -> URLSafeTimedSerializer:
    """Signs device cookies with the instance's secret key."""
    return URLSafeTimedSerializer(current_app.secret_key, salt="ewt-device-cookie")


def trusted_device(email: str) -> str | None:
    """The id of this browser's device cookie when it signed in to this account, else None."""
    value = request.cookies.get(DEVICE_COOKIE)
    if not value:
        return None
    try:
        data = _device_signer().loads(value, max_age=int(current_app.config["DEVICE_COOKIE_DAYS"]) * 86400)
    except (BadSignature, ValueError, TypeError):
        return None
    if not isinstance(data, dict) or data.get("a") != account_digest(email):
        return None
    device = data.get("n")
    return device if isinstance(device, str) and device else None


def remember_device(response: Response, email: str, device: str | None) -> None:
    """After a right password: give (or renew) this browser's device cookie for the account."""
    value = _device_signer().dumps({"a": account_digest(email), "n": device or secrets.token_urlsafe(16)})
    response.set_cookie(DEVICE_COOKIE, value, max_age=int(current_app.config["DEVICE_COOKIE_DAYS"]) * 86400,
                        httponly=True, samesite="Lax", path="/login",
                        secure=bool(current_app.config["SESSION_COOKIE_SECURE"]) or request.is_secure)
