"""Reviewer sign-in: password checks with Argon2id, and the login manager."""
from __future__ import annotations

from argon2.exceptions import InvalidHashError, VerificationError
from flask_login import LoginManager
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
