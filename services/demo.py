"""Demo companies: a complete, independent tenant for trying the service."""
from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy import func, select

from models import Company, db
from services import companies, keys, reviewers


def has_any_company() -> bool:
    """Tell whether the database already holds a company."""
    return bool(db.session.scalar(select(func.count(Company.id))))


def create_demo_company() -> dict[str, Any]:
    """Create a new demo company with a reviewer login and an API key, and describe it."""
    suffix = secrets.token_hex(3)
    company = companies.create_company(f"Demo Mechanical {suffix}")
    password = secrets.token_urlsafe(12)
    reviewer = reviewers.create_reviewer(company.id, f"pm-{suffix}@demo.example", password)
    issued = keys.issue_key(company.id, "demo")
    return {
        "company_id": company.id,
        "api_key": issued.secret,
        "reviewer": {"email": reviewer.email, "password": password},
    }
