"""Moving an install's stored files from its folder to a bucket (`flask storage migrate --to`).

Every file of PHOTO_DIR is copied to the bucket unless it is there already, and every file in
the bucket is read back and checked against its name (the SHA-256 of its bytes). Only then is
STORAGE_URL written into instance/config.py. Keys do not change, so no row does. Running it
again copies only what the folder took meanwhile and changes nothing else.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from flask import current_app

from services.files import storage


@dataclass(frozen=True)
class MigrationReport:
    """What a migration did."""

    copied: int
    present: int
    config_file: Path


def migrate(url: str, endpoint: str | None) -> MigrationReport:
    """Copy and check every file of the folder in the bucket at `url`, then switch to it."""
    source = storage.FolderStore(current_app.config["PHOTO_DIR"])
    target = storage.BucketStore(url, endpoint)
    copied = present = 0
    for entry in source.entries():
        if entry.key is None:
            continue  # a write that never finished
        if target.exists(entry.key):
            present += 1
        else:
            data = source.open(entry.key)
            if not storage.digest_matches(entry.key, data):
                raise ValueError(f"{entry.name} in the folder is damaged; restore it from a backup")
            target.put(data, entry.key.rsplit(".", 1)[1])
            copied += 1
        if not storage.digest_matches(entry.key, target.open(entry.key)):
            raise ValueError(f"{entry.key} in the bucket is not what its name promises")
    config_file = Path(current_app.instance_path) / "config.py"
    switch_config(config_file, {"STORAGE_URL": url, "S3_ENDPOINT_URL": endpoint})
    current_app.config.update(STORAGE_URL=url, S3_ENDPOINT_URL=endpoint)
    return MigrationReport(copied=copied, present=present, config_file=config_file)


def switch_config(config_file: Path, settings: dict[str, str | None]) -> None:
    """Set `NAME = value` lines in config.py, replacing earlier ones; unchanged if already so."""
    text = config_file.read_text() if config_file.exists() else ""
    for name, value in settings.items():
        line = f"{name} = {value!r}"
        pattern = re.compile(rf"^{name}\s*=.*$", re.MULTILINE)
        if pattern.search(text):
            text = pattern.sub(lambda _match, line=line: line, text)
        else:
            text += ("" if not text or text.endswith("\n") else "\n") + line + "\n"
    if not config_file.exists() or config_file.read_text() != text:
        config_file.parent.mkdir(parents=True, exist_ok=True)
        config_file.write_text(text)
