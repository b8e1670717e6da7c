"""Backups: a consistent copy of the database and the photos, taken while the service runs.

The database is copied first with SQLite's online backup API, which gives a snapshot
of one moment even while writers continue. Photo files are written before the
transaction that refers to them commits and are never changed afterwards, so every
photo the snapshot knows is already on disk when the files are copied next.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from flask import current_app

from models import db

DATABASE_FILE = "tickets.sqlite3"
PHOTOS_DIR = "photos"
MANIFEST = "manifest.json"


class BackupError(Exception):
    """A backup or restore that cannot be done, with the reason."""


@dataclass(frozen=True)
class BackupSummary:
    """What a backup holds."""

    path: Path
    tickets: int
    photo_files: int
    database_sha256: str


def _sqlite_path() -> Path:
    """The database file of this app, or a clear refusal for other databases."""
    url = db.engine.url
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        raise BackupError("this database is not a SQLite file; back PostgreSQL up with pg_dump "
                          "(see README, Backups) and copy the photo folder")
    return Path(url.database)


def _file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def create_backup(target: str | os.PathLike) -> BackupSummary:
    """Write a backup folder: the database snapshot, the photo files and a manifest."""
    destination = Path(target)
    if destination.exists() and any(destination.iterdir()):
        raise BackupError(f"{destination} is not empty; choose a new folder")
    destination.mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(str(_sqlite_path()), timeout=30)
    snapshot = sqlite3.connect(str(destination / DATABASE_FILE))
    try:
        source.backup(snapshot)
        tickets = snapshot.execute("SELECT count(*) FROM tickets").fetchone()[0]
    finally:
        snapshot.close()
        source.close()
    photos_source = Path(current_app.config["PHOTO_DIR"])
    copied = 0
    if photos_source.is_dir():
        for folder, _, names in os.walk(photos_source):
            for name in names:
                if name.startswith("."):
                    continue  # a write in progress; not referenced by any committed ticket
                relative = Path(folder, name).relative_to(photos_source)
                (destination / PHOTOS_DIR / relative).parent.mkdir(parents=True, exist_ok=True)
                try:
                    shutil.copy2(Path(folder, name), destination / PHOTOS_DIR / relative)
                except FileNotFoundError:
                    continue  # an orphan the sweep took meanwhile (`flask photos orphans`)
                copied += 1
    summary = BackupSummary(path=destination, tickets=tickets, photo_files=copied,
                            database_sha256=_file_sha256(destination / DATABASE_FILE))
    (destination / MANIFEST).write_text(json.dumps({
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "tickets": summary.tickets, "photo_files": summary.photo_files,
        "database_sha256": summary.database_sha256}, indent=2))
    return summary


def restore_backup(source: str | os.PathLike) -> BackupSummary:
    """Put a backup back in place of this instance's database and photos (service stopped)."""
    origin = Path(source)
    manifest_path = origin / MANIFEST
    if not manifest_path.is_file():
        raise BackupError(f"{origin} has no {MANIFEST}; is it a backup folder?")
    manifest = json.loads(manifest_path.read_text())
    if _file_sha256(origin / DATABASE_FILE) != manifest["database_sha256"]:
        raise BackupError("the backup's database does not match its manifest; it is damaged")
    database = _sqlite_path()
    db.engine.dispose()
    for suffix in ("-wal", "-shm"):
        Path(str(database) + suffix).unlink(missing_ok=True)
    staged = database.with_suffix(".restoring")
    shutil.copy2(origin / DATABASE_FILE, staged)
    os.replace(staged, database)
    photos_target = Path(current_app.config["PHOTO_DIR"])
    restored = 0
    if (origin / PHOTOS_DIR).is_dir():
        for folder, _, names in os.walk(origin / PHOTOS_DIR):
            for name in names:
                relative = Path(folder, name).relative_to(origin / PHOTOS_DIR)
                (photos_target / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(Path(folder, name), photos_target / relative)
                restored += 1
    return BackupSummary(path=origin, tickets=manifest["tickets"], photo_files=restored,
                         database_sha256=manifest["database_sha256"])
