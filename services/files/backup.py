"""Backups: a consistent copy of the database and the stored files, taken while the service runs.

The database is copied first with SQLite's online backup API, which gives a snapshot
of one moment even while writers continue. Stored files are written before the
transaction that refers to them commits and are never changed afterwards, so every
file the snapshot knows is already stored when the files are copied next.

A backup goes to a new folder, or to a bucket (`s3://BUCKET/PREFIX`) encrypted with the
firm's key (BACKUP_KEY_FILE, a Fernet key from `backup new-key`): each stored file once,
under a name keyed by that key, and per backup the database in parts and a manifest, each a
Fernet token (AES-128-CBC with HMAC-SHA256: nothing can be read or changed unnoticed
without the key). `verify_latest` restores the newest into a scratch folder and checks it.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import hmac
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from flask import current_app

from models import db
from services.files import storage

DATABASE_FILE = "tickets.sqlite3"
PHOTOS_DIR = "photos"
MANIFEST = "manifest.json"
# The database goes to a bucket in parts of this size, so none is held whole in memory.
PART_BYTES = 8 << 20


class BackupError(Exception):
    """A backup or restore that cannot be done, with the reason."""


@dataclass(frozen=True)
class BackupSummary:
    """What a backup holds."""

    path: Path | str
    tickets: int
    photo_files: int
    database_sha256: str


def _sqlite_path() -> Path:
    """The database file of this app, or a clear refusal for other databases."""
    url = db.engine.url
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        raise BackupError("this database is not a SQLite file; back PostgreSQL up with pg_dump "
                          "(see README, Backups) and copy the stored files")
    return Path(url.database)


def _file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _snapshot(destination: Path) -> int:
    """Write a consistent copy of the database to `destination`; its ticket count."""
    source = sqlite3.connect(str(_sqlite_path()), timeout=30)
    snapshot = sqlite3.connect(str(destination))
    try:
        source.backup(snapshot)
        return snapshot.execute("SELECT count(*) FROM tickets").fetchone()[0]
    finally:
        snapshot.close()
        source.close()


def _stored_keys(store: storage.FileStore) -> Iterator[str]:
    """The keys of every finished file of a store."""
    return (entry.key for entry in store.entries() if entry.key is not None)


def _key_path(folder: Path, key: str) -> Path:
    """Where a backup folder keeps a stored file."""
    return folder / PHOTOS_DIR / key[:2] / key[2:4] / key


def create_backup(target: str | os.PathLike) -> BackupSummary:
    """Write a backup: to a new folder, or encrypted to a bucket when `target` is s3://..."""
    if str(target).startswith("s3://"):
        return BucketBackup(str(target)).create()
    destination = Path(target)
    if destination.exists() and any(destination.iterdir()):
        raise BackupError(f"{destination} is not empty; choose a new folder")
    destination.mkdir(parents=True, exist_ok=True)
    tickets = _snapshot(destination / DATABASE_FILE)
    store = storage.file_store()
    copied = 0
    for key in _stored_keys(store):
        try:
            stream = store.stream(key)
        except KeyError:
            continue  # an orphan the sweep took meanwhile (`flask photos orphans`)
        path = _key_path(destination, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as handle:
            for chunk in stream.chunks:
                handle.write(chunk)
        copied += 1
    summary = BackupSummary(path=destination, tickets=tickets, photo_files=copied,
                            database_sha256=_file_sha256(destination / DATABASE_FILE))
    (destination / MANIFEST).write_text(json.dumps({
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "tickets": summary.tickets, "photo_files": summary.photo_files,
        "database_sha256": summary.database_sha256}, indent=2))
    return summary


def restore_backup(source: str | os.PathLike) -> BackupSummary:
    """Put a backup (folder, or the newest in a bucket) in place of this instance's database
    and files (service stopped)."""
    if str(source).startswith("s3://"):
        with tempfile.TemporaryDirectory(dir=current_app.instance_path) as scratch:
            BucketBackup(str(source)).restore_latest_into(Path(scratch))
            return dataclasses.replace(restore_backup(scratch), path=str(source))
    origin = Path(source)
    manifest = _checked_manifest(origin)
    database = _sqlite_path()
    db.engine.dispose()
    for suffix in ("-wal", "-shm"):
        Path(str(database) + suffix).unlink(missing_ok=True)
    staged = database.with_suffix(".restoring")
    shutil.copy2(origin / DATABASE_FILE, staged)
    os.replace(staged, database)
    store = storage.file_store()
    restored = 0
    for path in sorted((origin / PHOTOS_DIR).rglob("*")) if (origin / PHOTOS_DIR).is_dir() else []:
        if path.is_file() and storage.KEY_RE.fullmatch(path.name):
            store.put(path.read_bytes(), path.name.rsplit(".", 1)[1])
            restored += 1
    return BackupSummary(path=origin, tickets=manifest["tickets"], photo_files=restored,
                         database_sha256=manifest["database_sha256"])


def _checked_manifest(origin: Path) -> dict:
    """A backup folder's manifest, once its database matches it."""
    manifest_path = origin / MANIFEST
    if not manifest_path.is_file():
        raise BackupError(f"{origin} has no {MANIFEST}; is it a backup folder?")
    manifest = json.loads(manifest_path.read_text())
    if _file_sha256(origin / DATABASE_FILE) != manifest["database_sha256"]:
        raise BackupError("the backup's database does not match its manifest; it is damaged")
    return manifest


def verify_backup(origin: Path) -> BackupSummary:
    """Check a backup folder: its database is whole and matches its manifest, and every file a
    ticket refers to is there with the bytes its name promises."""
    manifest = _checked_manifest(origin)
    connection = sqlite3.connect(f"file:{origin / DATABASE_FILE}?mode=ro", uri=True)
    try:
        if connection.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            raise BackupError("the backup's database is damaged")
        tickets = connection.execute("SELECT count(*) FROM tickets").fetchone()[0]
        referenced = _referenced_keys(connection)
    finally:
        connection.close()
    if tickets != manifest["tickets"]:
        raise BackupError(f"the backup holds {tickets} tickets, its manifest says {manifest['tickets']}")
    for key in sorted(referenced):
        path = _key_path(origin, key)
        if not path.is_file() or not storage.digest_matches(key, path.read_bytes()):
            raise BackupError(f"the backup lacks the file {key}, or it is damaged")
    files = sum(1 for path in (origin / PHOTOS_DIR).rglob("*") if path.is_file()) \
        if (origin / PHOTOS_DIR).is_dir() else 0
    return BackupSummary(path=origin, tickets=tickets, photo_files=files,
                         database_sha256=manifest["database_sha256"])


def _referenced_keys(connection: sqlite3.Connection) -> set[str]:
    """Every stored-file key a backed-up database refers to (as the sweep reads them)."""
    keys: set[str] = set()
    for table in ("ticket_photos", "staged_photos"):
        for image_key, thumb_key in connection.execute(f"SELECT image_key, thumb_key FROM {table}"):
            keys.update(key for key in (image_key, thumb_key) if key)
    for signature, voided in connection.execute("SELECT signature, voided_signatures FROM tickets"):
        kept = [json.loads(signature) if signature else None,
                *(json.loads(voided) if voided else [])]
        for item in kept:
            if isinstance(item, dict):
                keys.update(item[name] for name in ("image_key", "thumb_key") if item.get(name))
    return keys


def new_key(path: str | os.PathLike) -> None:
    """Write a new backup key to `path` (readable by its owner only); never over another one."""
    from cryptography.fernet import Fernet

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(Fernet.generate_key() + b"\n")


class BucketBackup:
    """Encrypted backups under `s3://BUCKET/PREFIX`: `files/<name>` once per stored file,
    `<time>/database.<n>` and `<time>/manifest` per backup."""

    def __init__(self, url: str) -> None:
        """The bucket of `url`, at S3_ENDPOINT_URL, and the firm's key from BACKUP_KEY_FILE."""
        from cryptography.fernet import Fernet, InvalidToken

        key_file = current_app.config.get("BACKUP_KEY_FILE")
        if not key_file:
            raise BackupError("set BACKUP_KEY_FILE to the firm's backup key (flask backup new-key)")
        try:
            key = Path(key_file).read_bytes().strip()
            self.fernet = Fernet(key)
        except (OSError, ValueError) as error:
            raise BackupError(f"cannot use the backup key in {key_file}: {error}") from None
        self.invalid = InvalidToken
        # File names are keyed, so the bucket does not show which photos it holds.
        self.name_key = hashlib.sha256(b"ewt-backup-names" + key).digest()
        try:
            self.bucket, self.prefix = storage.parse_bucket_url(url)
        except ValueError as error:
            raise BackupError(str(error)) from None
        self.url = url
        self.client = storage.s3_client(current_app.config.get("S3_ENDPOINT_URL") or None)

    def _file_name(self, key: str) -> str:
        """The object a stored file is kept under."""
        return f"{self.prefix}files/{hmac.new(self.name_key, key.encode(), 'sha256').hexdigest()}"

    def _put(self, name: str, data: bytes) -> None:
        """Encrypt and upload one object."""
        with storage.bucket_errors():
            self.client.put_object(Bucket=self.bucket, Key=name, Body=self.fernet.encrypt(data))

    def _get(self, name: str) -> bytes:
        """Download and decrypt one object; BackupError if it is missing or not ours."""
        from botocore.exceptions import ClientError

        try:
            with storage.bucket_errors():
                try:
                    token = self.client.get_object(Bucket=self.bucket, Key=name)["Body"].read()
                except ClientError as error:
                    if storage.is_missing(error):
                        raise BackupError(f"the backup lacks {name}") from None
                    raise
            return self.fernet.decrypt(token)
        except self.invalid:
            raise BackupError(f"{name} does not open with this key, or it was changed") from None

    def _names_under(self, prefix: str) -> set[str]:
        """Every object name under a prefix of the bucket, in one listing."""
        with storage.bucket_errors():
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix)
            return {item["Key"] for page in pages for item in page.get("Contents", [])}

    def create(self) -> BackupSummary:
        """Back up the database and every stored file not already in the bucket."""
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H%M%S.%fZ")
        store = storage.file_store()
        with tempfile.TemporaryDirectory(dir=current_app.instance_path) as scratch:
            snapshot = Path(scratch) / DATABASE_FILE
            tickets = _snapshot(snapshot)
            kept = self._names_under(f"{self.prefix}files/")
            keys = []
            for key in _stored_keys(store):
                if self._file_name(key) not in kept:
                    try:
                        self._put(self._file_name(key), store.open(key))
                    except KeyError:
                        continue  # an orphan the sweep took meanwhile
                keys.append(key)
            parts = []
            with snapshot.open("rb") as handle:
                for number, chunk in enumerate(iter(lambda: handle.read(PART_BYTES), b"")):
                    name = f"{self.prefix}{stamp}/database.{number:05d}"
                    self._put(name, chunk)
                    parts.append({"name": name, "sha256": hashlib.sha256(chunk).hexdigest()})
            summary = BackupSummary(path=f"{self.url.rstrip('/')}/{stamp}", tickets=tickets,
                                    photo_files=len(keys), database_sha256=_file_sha256(snapshot))
        manifest = {"created_at": stamp, "tickets": tickets, "files": sorted(keys),
                    "database_parts": parts, "database_sha256": summary.database_sha256}
        self._put(f"{self.prefix}{stamp}/manifest", json.dumps(manifest).encode())
        return summary

    def latest_manifest(self) -> dict:
        """The newest backup's manifest."""
        with storage.bucket_errors():
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix, Delimiter="/")
            stamps = sorted(item["Prefix"][len(self.prefix):-1] for page in pages
                            for item in page.get("CommonPrefixes", []))
        stamps = [stamp for stamp in stamps if stamp != "files"]
        if not stamps:
            raise BackupError(f"{self.url} holds no backup")
        return json.loads(self._get(f"{self.prefix}{stamps[-1]}/manifest"))

    def restore_latest_into(self, folder: Path) -> dict:
        """Write the newest backup as a backup folder (database, files, manifest); its manifest."""
        manifest = self.latest_manifest()
        with (folder / DATABASE_FILE).open("wb") as handle:
            for part in manifest["database_parts"]:
                chunk = self._get(part["name"])
                if hashlib.sha256(chunk).hexdigest() != part["sha256"]:
                    raise BackupError(f"{part['name']} is not the part the manifest names")
                handle.write(chunk)
        for key in manifest["files"]:
            data = self._get(self._file_name(key))
            if not storage.digest_matches(key, data):
                raise BackupError(f"the backup's file {key} is damaged")
            path = _key_path(folder, key)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (folder / MANIFEST).write_text(json.dumps({
            "created_at": manifest["created_at"], "tickets": manifest["tickets"],
            "photo_files": len(manifest["files"]), "database_sha256": manifest["database_sha256"]}))
        return manifest


def verify_latest(url: str) -> BackupSummary:
    """Restore the newest backup in a bucket into a scratch folder and check it there."""
    backups = BucketBackup(url)
    with tempfile.TemporaryDirectory(dir=current_app.instance_path) as scratch:
        manifest = backups.restore_latest_into(Path(scratch))
        summary = verify_backup(Path(scratch))
    return dataclasses.replace(summary, path=f"{url.rstrip('/')}/{manifest['created_at']}")
