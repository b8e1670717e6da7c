"""Reviewer accounts: project managers who log in to the review queue."""
from __future__ import annotations

import re

from argon2 import PasswordHasher, profiles
from flask import current_app
from sqlalchemy import select

from models import Company, Reviewer
from services.database import write_transaction
from services.errors import Conflict, NotFound, ValidationFailed, field_problem

EMAIL_PATTERN = re.compile(r"^[^@\s]{1,64}@[^@\s]{1,190}\.[^@\s]{2,}$")
MIN_PASSWORD_LENGTH = 10


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
    if len(password or "") < MIN_PASSWORD_LENGTH:
        problems.append(field_problem("password", f"at least {MIN_PASSWORD_LENGTH} characters"))
    if problems:
        raise ValidationFailed("the reviewer account has problems", details=problems)
    return email


def create_reviewer(company_id: int, email: str, password: str) -> Reviewer:
    """Create a reviewer login for a company."""
    email = _check_credentials(email, password)
    password_hash = password_hasher().hash(password)
    with write_transaction() as session:
        if session.get(Company, company_id) is None:
            raise NotFound(f"no company with id {company_id}", code="company_not_found")
        if session.scalar(select(Reviewer.id).where(Reviewer.email == email)) is not None:
            raise Conflict(f"a reviewer with e-mail {email} already exists", code="reviewer_exists")
        reviewer = Reviewer(company_id=company_id, email=email, password_hash=password_hash)
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
    return reviewer
