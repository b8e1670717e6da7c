"""Seed tickets through the ORM: copies of a ticket the service made, older than the run's own.

Every column of the Ticket model is copied from the template (a ticket the service stored
for a POST /v1/tickets), so a new column needs no change here. Each copy gets its own id,
capture time and description, and goes through a SQLAlchemy Session like any other write,
so whatever the model's flush and commit hooks do happens to seeded tickets too.
"""
from __future__ import annotations

import datetime as dt
import uuid

import requests
from flask import Flask
from sqlalchemy import func, inspect, select, text

WORK = ["Cut and patched slab for a missed sleeve", "Moved a wall 300 mm after a layout change",
        "Extra cleanup after the drywall crew", "Re-ran conduit around a new duct",
        "Added blocking for owner-supplied shelving", "Chipped out honeycombed concrete"]


def make_template(base_url: str, key: str, project_id: str) -> str:
    """Create one ticket through POST /v1/tickets (the bench's standard create); return its id."""
    from bench.approve import ticket_body

    answer = requests.post(f"{base_url}/v1/tickets", json=ticket_body(project_id), timeout=30,
                           headers={"Authorization": f"Bearer {key}"})
    answer.raise_for_status()
    return answer.json()["id"]


def ticket_count(app: Flask, company_id: int) -> int:
    """How many tickets the company has."""
    from models import Ticket, db

    with app.app_context():
        count = int(db.session.scalar(select(func.count()).select_from(Ticket)
                                      .where(Ticket.company_id == company_id)))
        db.session.remove()
    return count


def seeded_status(i: int) -> str:
    """The status of the i-th seeded ticket: of every 100, 95 written, 4 sent back and 1 still
    awaiting review (at 100,000 tickets, a queue of 1,000), spread over every age."""
    return "submitted" if i % 100 == 0 else ("rejected" if i % 100 < 5 else "written")


def seed_tickets(app: Flask, company_id: int, template_id: str, target: int,
                 chunk: int = 5000) -> int:
    """Add copies of the template ticket until the company has `target`; return how many were added.

    Copies are captured 20 s apart before the oldest ticket there is, so the newest page
    holds the run's own tickets when it has them. Like a firm's history, most are written
    (`seeded_status`).
    """
    from models import Ticket, db

    missing = target - ticket_count(app, company_id)
    if missing <= 0:
        return 0
    with app.app_context():
        template = db.session.get(Ticket, template_id)
        if template is None or template.company_id != company_id:
            raise RuntimeError(f"template ticket {template_id} is not the company's")
        keys = [attr.key for attr in inspect(Ticket).column_attrs]
        values = {key: getattr(template, key) for key in keys}
        oldest = db.session.scalar(select(func.min(Ticket.captured_at))
                                   .where(Ticket.company_id == company_id))
        start = oldest - dt.timedelta(seconds=20)
        db.session.expunge_all()
        # (the reads' transaction ends here: on SQLite, one that read before a write of the
        # service's and then writes is refused at once, whatever the busy timeout)
        db.session.commit()
        added = 0
        while added < missing:
            batch = range(added, min(missing, added + chunk))
            db.session.add_all(
                Ticket(**{**values, "id": str(uuid.uuid4()),
                          "captured_at": start - dt.timedelta(seconds=20 * i),
                          "description": f"{WORK[i % len(WORK)]} (seeded {i})",
                          "status": seeded_status(i)})
                for i in batch)
            db.session.commit()
            db.session.expunge_all()
            added += len(batch)
        if db.engine.dialect.name == "sqlite":
            # Seeded tickets are history: what a running install wrote long ago is in the
            # database file, not still in the write-ahead log for a request to checkpoint.
            db.session.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        db.session.remove()
    return missing
