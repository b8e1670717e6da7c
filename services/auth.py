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
def load_reviewer(reviewer_id: str) -> Reviewer | None:
    """Load the signed-in reviewer for a request."""
    try:
        return db.session.get(Reviewer, int(reviewer_id))
    except (TypeError, ValueError):
        return None


def check_login(email: str, password: str) -> Reviewer | None:
    """The reviewer with this e-mail and password, or None."""
    hasher = password_hasher()
    reviewer = db.session.scalar(select(Reviewer).where(Reviewer.email == (email or "").strip().lower()))
    if reviewer is None:
        key = str(hasher.memory_cost)
        _DUMMY_HASH.setdefault(key, hasher.hash("not a password of anyone"))
        try:
            hasher.verify(_DUMMY_HASH[key], password or "")
        except VerificationError:
            pass
        return None
    try:
        hasher.verify(reviewer.password_hash, password or "")
    except (VerificationError, InvalidHashError):
        return None
    if hasher.check_needs_rehash(reviewer.password_hash):
        with write_transaction() as session:
            session.get(Reviewer, reviewer.id).password_hash = hasher.hash(password)
    return reviewer
