"""Reviewer sign-in: password checks with Argon2id, and the login manager."""
from __future__ import annotations

import hashlib
import secrets

from argon2.exceptions import InvalidHashError, VerificationError
from flask import Response, current_app, request, url_for
from flask_login import LoginManager
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy import select, update

from models import Reviewer, db
from services.accounts.ratelimit import count_or_refuse
from services.accounts.reviewers import password_hasher
from services.platform import mail
from services.platform.database import write_transaction
from services.platform.errors import ServiceError
from services.platform.web import public_base_url

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


def _password_mark(email: str) -> str:
    """A short digest of the account's current password hash: a reset changes it ('' if none)."""
    stored = db.session.scalar(select(Reviewer.password_hash)
                               .where(Reviewer.email == (email or "").strip().lower()))
    return hashlib.sha256(stored.encode()).hexdigest()[:16] if stored else ""


def trusted_device(email: str) -> str | None:
    """The id of this browser's device cookie when it signed in to this account under its
    current password, else None (a password reset voids every device cookie)."""
    value = request.cookies.get(DEVICE_COOKIE)
    if not value:
        return None
    try:
        data = _device_signer().loads(value, max_age=int(current_app.config["DEVICE_COOKIE_DAYS"]) * 86400)
    except (BadSignature, ValueError, TypeError):
        return None
    if not isinstance(data, dict) or data.get("a") != account_digest(email):
        return None
    if not data.get("p") or data.get("p") != _password_mark(email):
        return None
    device = data.get("n")
    return device if isinstance(device, str) and device else None


def remember_device(response: Response, email: str, device: str | None) -> None:
    """After a right password: give (or renew) this browser's device cookie for the account."""
    value = _device_signer().dumps({"a": account_digest(email), "n": device or secrets.token_urlsafe(16),
                                    "p": _password_mark(email)})
    response.set_cookie(DEVICE_COOKIE, value, max_age=int(current_app.config["DEVICE_COOKIE_DAYS"]) * 86400,
                        httponly=True, samesite="Lax", path="/login",
                        secure=bool(current_app.config["SESSION_COOKIE_SECURE"]) or request.is_secure)


# One-time sign-in links by e-mail: the way in for the account's owner while an attack holds
# the password limits (a new browser has no device cookie of its own).
def _link_signer() -> URLSafeTimedSerializer:
    """Signs sign-in links with the instance's secret key."""
    return URLSafeTimedSerializer(current_app.secret_key, salt="ewt-sign-in-link")


def send_sign_in_link(email: str) -> None:
    """E-mail a one-time sign-in link to the reviewer with this e-mail, if there is one.

    The caller answers the same either way, and as fast, since the e-mail goes after the answer
    (no one learns which e-mails have a login). Past `SIGN_IN_LINK_RATE_LIMIT` per account
    nothing more is sent, and the links already sent keep working: asking for links cannot void
    the owner's.
    """
    reviewer = db.session.scalar(select(Reviewer).where(Reviewer.email == (email or "").strip().lower()))
    if reviewer is None or reviewer.disabled_at is not None:
        return
    try:
        count_or_refuse(current_app.config["SIGN_IN_LINK_RATE_LIMIT"], "sign-in-link",
                        "account:" + account_digest(reviewer.email), "")
    except ServiceError:
        return
    token = _link_signer().dumps({"r": reviewer.id, "n": reviewer.sign_in_link_epoch})
    minutes = int(current_app.config["SIGN_IN_LINK_MINUTES"])
    address = public_base_url() + url_for("auth.link_sign_in", token=token)
    mail.send_after_answer(reviewer.email, "Your sign-in link",
              f"Open this link to sign in to review tickets. It works once, for {minutes} "
              f"minutes:\n\n{address}\n\nIf you did not ask for it, ignore this e-mail; "
              "your password still works as before.\n")


def link_reviewer(token: str) -> Reviewer | None:
    """The active reviewer a sign-in link names while it is fresh and unused, else None."""
    try:
        data = _link_signer().loads(token, max_age=int(current_app.config["SIGN_IN_LINK_MINUTES"]) * 60)
        reviewer = db.session.get(Reviewer, int(data["r"]))
        epoch = int(data["n"])
    except (BadSignature, ValueError, TypeError, KeyError):
        return None
    if reviewer is None or reviewer.disabled_at is not None or reviewer.sign_in_link_epoch != epoch:
        return None
    return reviewer


def use_sign_in_link(token: str) -> Reviewer | None:
    """Spend a sign-in link: its reviewer, once (this link and every earlier one stop working)."""
    reviewer = link_reviewer(token)
    if reviewer is None:
        return None
    with write_transaction() as session:
        spent = session.execute(update(Reviewer)
                                .where(Reviewer.id == reviewer.id,
                                       Reviewer.sign_in_link_epoch == reviewer.sign_in_link_epoch)
                                .values(sign_in_link_epoch=Reviewer.sign_in_link_epoch + 1)).rowcount
    if spent != 1:
        return None  # used meanwhile by another request
    db.session.expire(reviewer)
    return reviewer
