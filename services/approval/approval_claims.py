"""A ticket's approval claim: taken by one approval at a time, renewed while its write lasts,
given back after a failed write, and expired only when its process crashed."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import math
import threading
from collections.abc import Iterator

from flask import current_app

from models import Ticket as TicketRecord
from models import utcnow
from services.platform.database import write_transaction
from services.platform.errors import Conflict
from services.tickets.ticket_records import locked

log = logging.getLogger(__name__)

RETRY_AFTER_MAX_S = 5


@dataclasses.dataclass(frozen=True)
class Claim:
    """This approval's hold on a ticket, and where earlier attempts may have written."""

    id: str
    earlier: tuple[str, ...]


def claim_expires(ticket: TicketRecord) -> dt.datetime | None:
    """When the approval claim on a ticket runs out, or None when it has none."""
    if ticket.approval_claim_id is None or ticket.approval_claimed_at is None:
        return None
    return ticket.approval_claimed_at + dt.timedelta(
        seconds=current_app.config["APPROVAL_CLAIM_TTL_S"])


def being_written(ticket: TicketRecord, now: dt.datetime | None = None) -> bool:
    """Whether an approval holds a live claim on the ticket, so it is being written right now."""
    expires = claim_expires(ticket)
    return expires is not None and expires > (now or utcnow())


def refuse_claimed(ticket: TicketRecord, now: dt.datetime) -> None:
    """409 approval_in_progress, with Retry-After, while another approval's claim is live."""
    if not being_written(ticket, now):
        return
    expires = claim_expires(ticket)
    wait = max(1, min(RETRY_AFTER_MAX_S, math.ceil((expires - now).total_seconds())))
    raise Conflict("another approval of this ticket is writing it now; retry shortly to see "
                   "its outcome", code="approval_in_progress", headers={"Retry-After": str(wait)})


def renew(ticket_id: str, claim_id: str) -> bool:
    """Move this approval's claim forward to now; False once the claim is no longer ours."""
    with write_transaction() as session:
        ticket = locked(session, ticket_id)
        if ticket.approval_claim_id != claim_id:
            return False
        ticket.approval_claimed_at = utcnow()
        return True


@contextlib.contextmanager
def keeping_claim(ticket_id: str, claim_id: str) -> Iterator[None]:
    """Renew the claim every APPROVAL_CLAIM_RENEW_S (default a quarter of its TTL) until the
    block ends, so only a crashed process's claim ever expires."""
    app = current_app._get_current_object()
    every = float(app.config.get("APPROVAL_CLAIM_RENEW_S") or app.config["APPROVAL_CLAIM_TTL_S"] / 4)
    done = threading.Event()

    def keep() -> None:
        with app.app_context():
            while not done.wait(every):
                try:
                    if not renew(ticket_id, claim_id):
                        return
                except Exception:  # noqa: BLE001 - a busy database: try again next round
                    log.warning("could not renew an approval claim; trying again")

    keeper = threading.Thread(target=keep, name="approval-claim", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        done.set()
        keeper.join()


def release(ticket_id: str, claim_id: str) -> None:
    """Give the ticket back after a failed write, if this approval still holds it."""
    with write_transaction() as session:
        ticket = locked(session, ticket_id)
        if ticket.approval_claim_id == claim_id:
            ticket.approval_claim_id = None
            ticket.approval_claimed_at = None
