"""Seed tickets fast: direct inserts into the tickets table, in the service's own format.

Lines are priced by services.tickets.price_lines from validated TicketInput, and rows
go through the Ticket model's table (its column types store money, JSON and times
exactly as the service does), many thousands per transaction. Where the service keeps
per-status ticket counts, the same transaction moves them as the service would.
"""
from __future__ import annotations

import datetime as dt
import itertools
import uuid

from flask import Flask
from sqlalchemy import func, select

TRADES = [("Concrete finisher", "03-300"), ("Laborer", "02-200"), ("Carpenter", "06-100"),
          ("Electrician", "26-050"), ("Plumber", "22-100"), ("Painter", "09-900"),
          ("Drywall hanger", "09-250"), ("Ironworker", "05-120")]
EQUIPMENT = [("Core drill", "03-300"), ("Mini excavator", "31-230"), ("Scissor lift", "05-500"),
             ("Concrete saw", "03-300")]
MATERIALS = [("Non-shrink grout", "03-300"), ("2x4 studs", "06-100"), ("THHN wire", "26-050"),
             ("PVC sleeve", "22-100"), ("Joint compound", "09-250")]
WORK = ["Cut and patched slab for a missed sleeve", "Moved a wall 300 mm after a layout change",
        "Extra cleanup after the drywall crew", "Re-ran conduit around a new duct",
        "Added blocking for owner-supplied shelving", "Chipped out honeycombed concrete"]


def ticket_variants(project_id: str) -> list[dict]:
    """A few dozen distinct tickets (three lines each), priced by the service's own code."""
    from models.schemas import TicketInput
    from services.tickets import price_lines

    variants = []
    combos = itertools.product(range(len(TRADES)), range(len(EQUIPMENT)), range(len(MATERIALS)))
    for n, (t, e, m) in enumerate(itertools.islice(combos, 0, None, 7)):
        data = TicketInput.model_validate({
            "project_id": project_id,
            "description": f"{WORK[n % len(WORK)]} (bench {n})",
            "reason": "Directed on site; not in our contract scope",
            "directed_by": "Sam Ortiz, GC superintendent", "captured_by": "Lee Park",
            "labor": [{"trade": TRADES[t][0], "workers": 1 + n % 3, "hours": 2 + n % 5,
                       "rate": "72.50", "costCode": TRADES[t][1]}],
            "equipment": [{"description": EQUIPMENT[e][0], "hours": 1 + n % 4, "rate": 45,
                           "costCode": EQUIPMENT[e][1]}],
            "materials": [{"description": MATERIALS[m][0], "quantity": 1 + n % 6,
                           "unitCost": "29.40", "costCode": MATERIALS[m][1]}],
        })
        lines, total, warnings = price_lines(data)
        variants.append({"description": data.description, "reason": data.reason,
                         "directed_by": data.directed_by, "captured_by": data.captured_by,
                         "lines": lines, "total": total, "warnings": warnings})
    return variants


def ticket_count(app: Flask, company_id: int) -> int:
    """How many tickets the company has."""
    from models import Ticket, db

    with app.app_context():
        return int(db.session.scalar(select(func.count()).select_from(Ticket)
                                     .where(Ticket.company_id == company_id)))


def seed_tickets(app: Flask, company_id: int, project_id: str, target: int,
                 chunk: int = 5000) -> int:
    """Insert submitted tickets until the company has `target`; returns how many were added.

    Seeded tickets are older than anything made during the run (captured up to a few
    weeks back, 20 s apart), so the newest page holds the run's own tickets when it has them.
    """
    from models import Ticket, db
    from services import tickets as service
    from services.database import write_transaction

    count_ticket = getattr(service, "count_ticket", None)
    # Where the service keeps each ticket's rendered summary, seeded rows get theirs too.
    summary_document = getattr(service, "summary_document", None)
    missing = target - ticket_count(app, company_id)
    if missing <= 0:
        return 0
    variants = ticket_variants(project_id)
    with app.app_context():
        oldest = db.session.scalar(select(func.min(Ticket.captured_at))
                                   .where(Ticket.company_id == company_id))
        start = (oldest or dt.datetime.now(dt.timezone.utc)) - dt.timedelta(seconds=20)
        table = Ticket.__table__
        added = 0
        while added < missing:
            rows = []
            for i in range(added, min(missing, added + chunk)):
                variant = variants[i % len(variants)]
                rows.append({
                    "id": str(uuid.uuid4()), "company_id": company_id, "project_id": project_id,
                    "status": "submitted", "captured_at": start - dt.timedelta(seconds=20 * i),
                    "captured_via": "api", "link_token": None, "client_ref": None,
                    "signature": None, "photo_count": 0, "approved_by": None,
                    "approved_at": None, "external": None, "written_routing": None,
                    "approval_claim_id": None, "approval_claimed_at": None,
                    "approval_destinations": None, **variant})
                if summary_document is not None:
                    rows[-1]["summary_json"] = summary_document(Ticket(**rows[-1]))
            with write_transaction() as session:
                session.execute(table.insert(), rows)
                if count_ticket is not None:  # the service keeps per-status counts
                    count_ticket(session, company_id, project_id, "submitted", len(rows))
            added += len(rows)
        db.session.remove()
    return missing
