"""API keys: issue, authenticate, list and revoke.

A key is `ewt_` followed by 43 URL-safe characters (256 random bits). Only its
SHA-256 digest and a short display prefix are stored; a fast hash is enough
because the secret is long and random, and it keeps every request cheap.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import re
import secrets
from dataclasses import dataclass

from flask import current_app
from sqlalchemy import select

from models import ApiKey, Company, db, utcnow
from services.platform.database import write_transaction
from services.platform.errors import AdminOnly, NotFound, Unauthorized, ValidationFailed, field_problem

KEY_PREFIX = "ewt_"
KEY_PATTERN = re.compile(r"^ewt_[A-Za-z0-9_-]{43}$")
DISPLAY_PREFIX_LENGTH = 12


@dataclass(frozen=True)
class Caller:
    """Who an authenticated /v1 request comes from: the key and its company."""

    key_id: int
    company_id: int
    company_name: str
    name: str
    prefix: str
    created_at: dt.datetime | None = None
    created_by: str | None = None
    last_used_at: dt.datetime | None = None

    @property
    def actor(self) -> str:
        """How this key is named in audit fields such as approved_by."""
        return f"key:{self.name} ({self.prefix})"


@dataclass(frozen=True)
class IssuedKey:
    """A freshly created key: the secret is only ever available here."""

    secret: str
    record: ApiKey


def key_digest(secret: str) -> str:
    """Return the hex SHA-256 digest under which a key is stored."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def rate_limit_bucket(secret: str) -> str:
    """A non-secret bucket id for the rate limiter, derived from the key's digest."""
    return "key:" + key_digest(secret)[:32]


def issue_key_by_reviewer(reviewer, name: str) -> IssuedKey:
    """A key made on the keys page: only a company admin may make one (it acts for the company)."""
    if not getattr(reviewer, "is_admin", False):
        raise AdminOnly("only a company admin can make API keys; ask one of them")
    return issue_key(reviewer.company_id, name, created_by_id=reviewer.id)


def issue_key(company_id: int, name: str, created_by_id: int | None = None) -> IssuedKey:
    """Create a key for a company (made by a reviewer, or on the command line), shown once."""
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise ValidationFailed("the key needs a name of 1 to 100 characters",
                               details=[field_problem("name", "1 to 100 characters")])
    with write_transaction() as session:
        if session.get(Company, company_id) is None:
            raise NotFound(f"no company with id {company_id}", code="company_not_found")
        while True:
            secret = KEY_PREFIX + secrets.token_urlsafe(32)
            prefix = secret[:DISPLAY_PREFIX_LENGTH]
            if session.scalar(select(ApiKey.id).where(ApiKey.prefix == prefix)) is None:
                break
        record = ApiKey(company_id=company_id, name=name, prefix=prefix, digest=key_digest(secret),
                        created_by_id=created_by_id)
        session.add(record)
    return IssuedKey(secret=secret, record=record)


def authenticate(secret: str | None, *, malformed_header: bool = False) -> Caller:
    """Resolve a presented key to its live record, or raise 401 with a precise code."""
    if malformed_header:
        raise Unauthorized("the Authorization header must be 'Bearer <API key>'",
                           code="api_key_malformed")
    if not secret:
        raise Unauthorized("an API key is required: send 'Authorization: Bearer <key>' "
                           "or 'X-API-Key: <key>'", code="api_key_missing")
    if not KEY_PATTERN.match(secret):
        raise Unauthorized("the API key is malformed", code="api_key_malformed")
    row = db.session.execute(
        select(ApiKey, Company.name).join(Company, Company.id == ApiKey.company_id)
        .where(ApiKey.digest == key_digest(secret))).first()
    if row is None:
        raise Unauthorized("the API key is not valid", code="api_key_invalid")
    key, company_name = row
    if key.revoked_at is not None:
        raise Unauthorized("the API key has been revoked", code="api_key_revoked")
    used = _touch(key.id, key.last_used_at)
    return Caller(key_id=key.id, company_id=key.company_id, company_name=company_name,
                  name=key.name, prefix=key.prefix, created_at=key.created_at,
                  created_by=key.created_by.email if key.created_by else None, last_used_at=used)


def is_live(secret: str) -> bool:
    """Whether a presented key is one of a live (not revoked) key, without recording its use."""
    return bool(KEY_PATTERN.match(secret)) and db.session.scalar(
        select(ApiKey.id).where(ApiKey.digest == key_digest(secret),
                                ApiKey.revoked_at.is_(None))) is not None


def _touch(key_id: int, last_used_at: dt.datetime | None) -> dt.datetime:
    """Record last use, at most once per configured interval to spare the write lock; the time kept."""
    now = utcnow()
    interval = dt.timedelta(seconds=current_app.config["API_KEY_TOUCH_INTERVAL_S"])
    if last_used_at is not None and now - last_used_at < interval:
        return last_used_at
    with write_transaction() as session:
        session.execute(
            ApiKey.__table__.update().where(ApiKey.id == key_id).values(last_used_at=now)
        )
    return now


def list_keys(company_id: int | None = None) -> list[ApiKey]:
    """List keys, newest first, for one company or for all."""
    query = select(ApiKey).order_by(ApiKey.created_at.desc(), ApiKey.id.desc())
    if company_id is not None:
        query = query.where(ApiKey.company_id == company_id)
    return list(db.session.scalars(query))


def revoke_key(prefix: str, company_id: int | None = None) -> ApiKey:
    """Revoke the key with this display prefix; revoking twice is harmless."""
    with write_transaction() as session:
        query = select(ApiKey).where(ApiKey.prefix == prefix)
        if company_id is not None:
            query = query.where(ApiKey.company_id == company_id)
        record = session.scalar(query)
        if record is None:
            raise NotFound("no such key", code="key_not_found")
        if record.revoked_at is None:
            record.revoked_at = utcnow()
    return record


def live_keys_made_by(reviewer_id: int) -> list[ApiKey]:
    """The keys a reviewer made that still work (disabling the reviewer revokes them)."""
    return list(db.session.scalars(select(ApiKey).where(ApiKey.created_by_id == reviewer_id,
                                                        ApiKey.revoked_at.is_(None))
                                   .order_by(ApiKey.created_at, ApiKey.id)))
