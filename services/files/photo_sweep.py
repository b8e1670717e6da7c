"""Image files no ticket refers to: listed, and removed when asked.

A request stores its photos and signature before the transaction that refers to them
commits (services.capture.tickets), so a request refused after that point, or a process that
dies there, leaves files no ticket names; so can a restore of an older backup. Only
files unchanged for a grace period are taken. That period also covers every request
still in flight: storing a file again refreshes its time (services/files/storage.py), and no
request runs for an hour, let alone a day. The same holds for a folder and for a bucket.
"""
from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field

from flask import current_app
from sqlalchemy import delete, func, select

from models import StagedPhoto, Ticket, TicketPhoto, db, utcnow
from services.files import storage
from services.platform.database import write_transaction

MIN_AGE_FLOOR_S = 3600


@dataclass(frozen=True)
class OrphanFile:
    """A store file no ticket refers to (`name`: its path under the folder, or its key)."""

    name: str
    size: int
    modified: float


@dataclass
class SweepReport:
    """What a sweep found, and what it removed (nothing unless asked)."""

    found: list[OrphanFile] = field(default_factory=list)
    removed: list[OrphanFile] = field(default_factory=list)


def drop_stale_staged(remove: bool, now: dt.datetime | None = None) -> int:
    """Photos staged for a ticket whose text never came within STAGED_PHOTO_DAYS: how many,
    and their rows deleted when `remove` (their files are then orphans like any other)."""
    cutoff = (now or utcnow()) - dt.timedelta(days=float(current_app.config["STAGED_PHOTO_DAYS"]))
    stale = StagedPhoto.created_at < cutoff
    if not remove:
        return db.session.scalar(select(func.count()).select_from(StagedPhoto).where(stale))
    with write_transaction() as session:
        return session.execute(delete(StagedPhoto).where(stale)).rowcount


def referenced_image_keys() -> set[str]:
    """Every image key a ticket refers to: its photos, their thumbnails, its signature and the
    signature's thumbnail, and those of its voided signatures."""
    keys: set[str] = set()
    for image_key, thumb_key in db.session.execute(
            select(TicketPhoto.image_key, TicketPhoto.thumb_key)):
        keys.update((image_key, thumb_key))
    for image_key, thumb_key in db.session.execute(  # photos of tickets still being written
            select(StagedPhoto.image_key, StagedPhoto.thumb_key)):
        keys.update((image_key, thumb_key))
    for signature, voided in db.session.execute(select(Ticket.signature, Ticket.voided_signatures)):
        for kept in [signature, *(voided if isinstance(voided, list) else [])]:
            if isinstance(kept, dict):
                keys.update(kept[name] for name in ("image_key", "thumb_key") if kept.get(name))
    return keys


def sweep_orphans(min_age_s: float, *, remove: bool) -> SweepReport:
    """Store files no ticket refers to and unchanged for `min_age_s`; removed when `remove`."""
    if min_age_s < MIN_AGE_FLOOR_S:
        raise ValueError("the grace period must be at least an hour")
    store = storage.file_store()
    # The cutoff is fixed before the references are read: a file stored after it is too
    # young to take, and one stored before it was committed long before the read.
    cutoff = time.time() - min_age_s
    referenced = referenced_image_keys()
    report = SweepReport()
    for entry in store.entries():
        if (entry.key is not None and entry.key in referenced) or entry.modified >= cutoff:
            continue
        orphan = OrphanFile(name=entry.name, size=entry.size, modified=entry.modified)
        report.found.append(orphan)
        if remove and store.remove_if_unchanged_since(entry.name, cutoff) is not None:
            report.removed.append(orphan)
    return report
