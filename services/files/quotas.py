"""Storage quotas: bytes per link, per company and for everyone per UTC day, and a disk reserve.

A public capture link must not be able to fill the disk, and one company must not be able to
use up the server for the others. Before a request stores any image it reserves its bytes
(and, through a link, its ticket) against daily counts in the database, so they hold across
restarts and processes. In this order:

- the link's and the company's own daily caps (`QUOTA_LINK_...`, `QUOTA_COMPANY_...`);
- the server-wide daily total and the shared disk reserve, which refuse only a company past
  its own share of the day (`QUOTA_COMPANY_SHARE_BYTES_PER_DAY`): a company that stayed
  within its share still stores after others used up the total;
- the hard disk reserve (`DISK_RESERVE_BYTES`), which refuses everyone.

The disk reserves apply to a folder; files in a bucket have only the daily counts.

A refusal is a 507 with a stable code and nothing is stored:

- `storage_quota_exceeded`: a daily quota is used up (it frees itself the next UTC day);
- `storage_full`: the disk is at its reserve (an operator must make room).
"""
from __future__ import annotations

import datetime as dt

from flask import current_app
from sqlalchemy import select

from models import StorageUsage, utcnow
from services.files import storage
from services.platform.database import insert_or_merge, write_transaction
from services.platform.errors import ServiceError
from services.platform.web import token_digest


class StorageFull(ServiceError):
    """The disk has no room left above its reserve."""

    status = 507
    code = "storage_full"


class QuotaExceeded(ServiceError):
    """A daily storage quota is used up."""

    status = 507
    code = "storage_quota_exceeded"


FULL_MESSAGE = "the server has no room for more photos right now; send the ticket again later"


def free_disk() -> int | None:
    """Free bytes on the disk that holds the files (None when they are in a bucket)."""
    return storage.file_store().free_bytes()


def check_disk(incoming: int) -> None:
    """Refuse everyone when storing `incoming` bytes would leave less free disk than the reserve."""
    free = free_disk()
    if free is not None and free - incoming < int(current_app.config["DISK_RESERVE_BYTES"]):
        raise StorageFull(FULL_MESSAGE)


def _tomorrow_in_seconds(now: dt.datetime) -> int:
    """Seconds until the next UTC day, when the daily quotas start again."""
    tomorrow = (now + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(1, int((tomorrow - now).total_seconds()))


def reserve(company_id: int, link_token: str | None, incoming: int, *, tickets: int = 0) -> None:
    """Count `incoming` bytes (and `tickets`) against today's quotas, or refuse without counting."""
    config = current_app.config
    if incoming <= 0 and tickets <= 0:
        return
    now = utcnow()
    day = now.date().isoformat()
    scopes = [("all", ""), ("company", str(company_id))]
    if link_token:
        scopes.append(("link", token_digest(link_token)))
    retry = {"Retry-After": str(_tomorrow_in_seconds(now))}
    with write_transaction() as session:
        statement = _add_usage(session)
        for scope, key in scopes:
            session.execute(statement, {"scope": scope, "key": key, "day": day, "bytes": incoming,
                                        "tickets": tickets})
        used = {scope: session.execute(select(StorageUsage.bytes, StorageUsage.tickets).where(
            StorageUsage.scope == scope, StorageUsage.key == key, StorageUsage.day == day)).one()
            for scope, key in scopes}
        if "link" in used:
            ticket_limit = int(config["CAPTURE_TICKETS_PER_DAY"])
            if tickets and used["link"].tickets > ticket_limit:
                raise ServiceError(f"this link has taken its {ticket_limit} tickets for today; "
                                   "send the ticket again tomorrow", status=429, code="rate_limited",
                                   headers=retry)
            if incoming and used["link"].bytes > int(config["QUOTA_LINK_BYTES_PER_DAY"]):
                raise QuotaExceeded(_quota_message("link"), headers=retry)
        if not incoming:
            return
        if used["company"].bytes > int(config["QUOTA_COMPANY_BYTES_PER_DAY"]):
            raise QuotaExceeded(_quota_message("company"), headers=retry)
        within_share = used["company"].bytes <= int(config["QUOTA_COMPANY_SHARE_BYTES_PER_DAY"])
        if not within_share and used["all"].bytes > int(config["QUOTA_TOTAL_BYTES_PER_DAY"]):
            raise QuotaExceeded(_quota_message("all"), headers=retry)
        shared_reserve = int(config["DISK_RESERVE_BYTES"]) + int(config["DISK_SHARED_RESERVE_BYTES"])
        free = free_disk()
        if not within_share and free is not None and free - incoming < shared_reserve:
            raise StorageFull(FULL_MESSAGE)


def _quota_message(scope: str) -> str:
    """What a crew or a program is told when a quota is used up."""
    whose = {"link": "this link", "company": "this company", "all": "the server"}[scope]
    return f"{whose} has stored all the photos it may store today; send the ticket again tomorrow"


def _add_usage(session):
    """Add to a day's usage row, creating it on the first use, in one statement."""
    table = StorageUsage.__table__
    statement = insert_or_merge(session, table)
    return statement.on_conflict_do_update(
        index_elements=[table.c.scope, table.c.key, table.c.day],
        set_={"bytes": table.c.bytes + statement.excluded.bytes,
              "tickets": table.c.tickets + statement.excluded.tickets})
