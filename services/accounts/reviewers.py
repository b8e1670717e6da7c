"""Reviewer accounts: project managers who log in to the review queue."""
from __future__ import annotations

import functools
import re
from pathlib import Path

from argon2 import PasswordHasher, profiles
from flask import current_app
from sqlalchemy import select, update

from models import ApiKey, Company, Reviewer, db, utcnow
from services.platform.database import write_transaction
from services.platform.errors import Conflict, NotFound, ValidationFailed, field_problem

EMAIL_PATTERN = re.compile(r"^[^@\s]{1,64}@[^@\s]{1,190}\.[^@\s]{2,}$")
MIN_PASSWORD_LENGTH = 10
# "aaaaaaaaaa" and "abababababab" are long enough but guessed at once.
MIN_DISTINCT_CHARACTERS = 5
_COMMON_PASSWORDS = Path(__file__).with_name("common_passwords.txt")
_SEQUENCES = ("abcdefghijklmnopqrstuvwxyz", "qwertyuiopasdfghjklzxcvbnm", "01234567890")


@functools.cache
def common_passwords() -> frozenset[str]:
    """The list of most-picked passwords, lower case."""
    lines = _COMMON_PASSWORDS.read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def password_weakness(password: str, email: str = "") -> str | None:
    """Why a new password is too easy to guess, in plain words, or None when it will do."""
    if len(password) < MIN_PASSWORD_LENGTH:
        return f"at least {MIN_PASSWORD_LENGTH} characters"
    lowered = password.lower()
    if len(set(lowered)) < MIN_DISTINCT_CHARACTERS:
        return f"at least {MIN_DISTINCT_CHARACTERS} different characters"
    core = lowered.rstrip("0123456789!@#$%^&*.?_- ")
    listed = common_passwords()
    if lowered in listed or core in listed or lowered.lstrip("0123456789") in listed:
        return "one of the most common passwords; pick another"
    if any(lowered in sequence or lowered in sequence[::-1] for sequence in _SEQUENCES):
        return "a run of keys or letters; pick another"
    local = (email or "").split("@")[0].lower()
    if len(local) >= 4 and local in lowered:
        return "must not contain the e-mail address"
    return None


def password_hasher() -> PasswordHasher:
    """Argon2id hasher; tests may select the cheapest profile through config."""
    if current_app.config.get("PASSWORD_HASH_PROFILE") == "cheapest":
        return PasswordHasher.from_parameters(profiles.CHEAPEST)
    return PasswordHasher()


def _check_credentials(email: str, password: str) -> str:
    """Validate an e-mail and password pair, returning the normalised e-mail."""
    email = (email or "").strip().lower()
    problems = []
    if not EMAIL_PATTERN.match(email):
        problems.append(field_problem("email", "not a valid e-mail address"))
    weakness = password_weakness(password or "", email)
    if weakness:
        problems.append(field_problem("password", weakness))
    if problems:
        raise ValidationFailed("the reviewer account has problems", details=problems)
    return email


def create_reviewer(company_id: int, email: str, password: str, *, is_admin: bool = False) -> Reviewer:
    """Create a reviewer login for a company; an admin may disable the company's other reviewers."""
    email = _check_credentials(email, password)
    password_hash = password_hasher().hash(password)
    with write_transaction() as session:
        if session.get(Company, company_id) is None:
            raise NotFound(f"no company with id {company_id}", code="company_not_found")
        if session.scalar(select(Reviewer.id).where(Reviewer.email == email)) is not None:
            raise Conflict(f"a reviewer with e-mail {email} already exists", code="reviewer_exists")
        reviewer = Reviewer(company_id=company_id, email=email, password_hash=password_hash,
                            is_admin=is_admin)
        session.add(reviewer)
    return reviewer


def reset_password(email: str, password: str) -> Reviewer:
    """Set a new password for an existing reviewer."""
    email = _check_credentials(email, password)
    password_hash = password_hasher().hash(password)
    with write_transaction() as session:
        reviewer = session.scalar(select(Reviewer).where(Reviewer.email == email))
        if reviewer is None:
            raise NotFound(f"no reviewer with e-mail {email}", code="reviewer_not_found")
        reviewer.password_hash = password_hash
        reviewer.session_epoch = reviewer.session_epoch + 1  # every open session ends
    return reviewer


def end_sessions(reviewer_id: int) -> None:
    """End every session of a reviewer, on every device (sign-out does this)."""
    with write_transaction() as session:
        session.execute(update(Reviewer).where(Reviewer.id == reviewer_id)
                        .values(session_epoch=Reviewer.session_epoch + 1))


def _set_disabled(reviewer: Reviewer, disabled: bool) -> Reviewer:
    """Disable (ending every session and revoking the keys they made) or enable a reviewer."""
    with write_transaction() as session:
        current = session.get(Reviewer, reviewer.id)
        if disabled and current.disabled_at is None:
            now = utcnow()
            current.disabled_at = now
            current.session_epoch = current.session_epoch + 1
            session.execute(update(ApiKey).where(ApiKey.created_by_id == current.id,
                                                 ApiKey.revoked_at.is_(None))
                            .values(revoked_at=now))
        elif not disabled:
            current.disabled_at = None
    return current


def set_disabled_by_email(email: str, disabled: bool) -> Reviewer:
    """Disable or enable the reviewer with this e-mail (the command line's way)."""
    reviewer = db.session.scalar(select(Reviewer).where(Reviewer.email == (email or "").strip().lower()))
    if reviewer is None:
        raise NotFound(f"no reviewer with e-mail {email}", code="reviewer_not_found")
    return _set_disabled(reviewer, disabled)


def company_reviewers(company_id: int) -> list[Reviewer]:
    """The company's reviewers, by e-mail."""
    return list(db.session.scalars(select(Reviewer).where(Reviewer.company_id == company_id)
                                   .order_by(Reviewer.email)))


def set_disabled_by_admin(admin: Reviewer, reviewer_id: int, disabled: bool) -> Reviewer:
    """A company admin disables or enables another reviewer of the same company."""
    reviewer = db.session.get(Reviewer, reviewer_id) if 0 < reviewer_id < 2**31 else None
    if reviewer is None or reviewer.company_id != admin.company_id:
        raise NotFound("no such reviewer on this company", code="reviewer_not_found")
    if reviewer.id == admin.id:
        raise Conflict("you cannot disable your own login", code="reviewer_is_you")
    return _set_disabled(reviewer, disabled)
