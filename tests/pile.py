"""A week of tickets from several subs, seeded through the service layer in one go."""
from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import update

from models import Ticket, db, utcnow
from models.schemas import TicketInput
from services.capture import links, tickets
from services.project_system import projects
from support.images import data_url, png_bytes

SUBS = ("Apex Concrete", "Bolt Electric", "Cedar Framing", "Delta Drywall")
# The subs whose commitment the sandbox's directory only suggests (two commitments, a near
# name): their tickets are written once a PM confirmed it; the others' need no confirmation.
SUGGESTED_COMMITMENT = ("Bolt Electric", "Cedar Framing")
PROJECT_COUNT = 3


@dataclass(frozen=True)
class Seeded:
    """One seeded ticket and what the tests need to know about it."""

    id: str
    project_id: str
    project_name: str
    sub: str
    recorded_by: str
    age_hours: float
    total: Decimal
    signed: bool
    clean: bool  # every line on an exact budget code


def seed_pile(app, tenant, count: int = 60, now: dt.datetime | None = None) -> list[Seeded]:
    """`count` tickets across 3 projects and 4 subs, one every 3 hours back from now.

    Every third ticket has a line with no cost code (a line to check); every fourth is unsigned.
    """
    now = now or utcnow()
    projects = tenant.projects[:PROJECT_COUNT]
    signature = data_url(png_bytes(), "image/png")
    seeded = []
    with app.app_context():
        tokens = {}
        for project in projects:
            for sub in SUBS:
                tokens[project["id"], sub] = links.create_link_for_known_project(
                    tenant.company_id, str(project["id"]), project["name"], sub).token
        ages = {}
        for i in range(count):
            project = projects[i % len(projects)]
            sub = SUBS[i % len(SUBS)]
            clean = i % 3 != 0
            signed = i % 4 != 0
            labor = [{"trade": "Laborer", "hours": 1 + i % 5, "rate": 50, "costCode": "02-200"}]
            if not clean:
                labor.append({"trade": "Mystery", "hours": 1, "rate": 10})
            body = TicketInput.model_validate({
                "project_id": str(project["id"]), "description": f"Pile ticket {i:02d} at grid {i}",
                "reason": f"Reason {i:02d}", "directed_by": f"Super {i % 5}",
                "captured_by": f"Foreman {sub.split()[0]}", "labor": labor,
                "signature": {"name": "Gene Carter", "role": "GC super", "image": signature}
                if signed else None})
            ticket, _ = tickets.create_ticket(tenant.company_id, body, captured_via="link",
                                              link_token=tokens[project["id"], sub],
                                              project_checked=True)
            age_hours = 3 * i + 1
            ages[ticket.id] = now - dt.timedelta(hours=age_hours)
            seeded.append(Seeded(id=ticket.id, project_id=str(project["id"]),
                                 project_name=project["name"], sub=sub,
                                 recorded_by=f"Foreman {sub.split()[0]}", age_hours=age_hours,
                                 total=ticket.total, signed=signed, clean=clean))
        for ticket_id, captured_at in ages.items():
            db.session.execute(update(Ticket).where(Ticket.id == ticket_id)
                               .values(captured_at=captured_at))
        db.session.commit()
    return seeded


def procore_reads_settled(app, tenant, timeout_s: float = 30) -> None:
    """Wait until the app's reads of Procore have ended and the company is not thought away.

    On a loaded machine a page's first read of a company can outlast the page's wait: the page
    is then drawn from what was known (nothing yet) and says Procore is away until the read ends.
    """
    deadline = time.monotonic() + timeout_s
    with app.app_context():
        projects.wait_for_background_reads(timeout_s)
        while projects.away_since(tenant.company_id) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
