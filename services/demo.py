"""Demo companies: a complete, independent tenant for trying the service.

Only the `flask` commands import this (and with it the embedded sandbox's seeding); a serving
process never does.
"""
from __future__ import annotations

import secrets
from typing import Any

from flask import current_app
from sqlalchemy import func, select

from models import Company, db
from sandbox.seed import create_demo_company as seed_sandbox_company
from services.accounts import companies, keys, reviewers
from services.capture import links
from services.project_system import connections


def has_any_company() -> bool:
    """Tell whether the database already holds a company."""
    return bool(db.session.scalar(select(func.count(Company.id))))


def connect_embedded_sandbox(company_id: int, name: str) -> dict:
    """Create a fresh company in the embedded sandbox and connect this company to it."""
    seeded = seed_sandbox_company(current_app.config["SANDBOX_DB_PATH"], name=name)
    connections.save_connection(company_id, environment=connections.EMBEDDED,
                                client_id=seeded["client_id"],
                                client_secret=seeded["client_secret"],
                                remote_company_id=seeded["company_id"])
    return seeded


def create_demo_company() -> dict[str, Any]:
    """Create a new demo company with a reviewer login and an API key, and describe it."""
    suffix = secrets.token_hex(3)
    company = companies.create_company(f"Demo Mechanical {suffix}")
    password = secrets.token_urlsafe(12)
    reviewer = reviewers.create_reviewer(company.id, f"pm-{suffix}@demo.example", password,
                                       is_admin=True)
    issued = keys.issue_key(company.id, "demo")
    seeded = connect_embedded_sandbox(company.id, name=company.name)
    hosts = connections.hosts_for(connections.get_connection(company.id))
    with_tool = next(p for p in seeded["projects"] if p["change_events"])
    link = links.create_link_for_known_project(company.id, str(with_tool["id"]), with_tool["name"],
                                               "Site trailer (demo)")
    return {
        "company_id": company.id,
        "api_key": issued.secret,
        "reviewer": {"email": reviewer.email, "password": password},
        "projects": [{"id": str(p["id"]), "name": p["name"], "change_events": p["change_events"]}
                     for p in seeded["projects"]],
        "capture_url": link.url,
        "project_system": {
            "api_base": hosts.api_base,
            "oauth_base": hosts.oauth_base,
            "client_id": seeded["client_id"],
            "client_secret": seeded["client_secret"],
            "company_id": seeded["company_id"],
        },
    }
