"""Image files no ticket refers to: listed, removed on request, and never a referenced one."""
from __future__ import annotations

import datetime as dt
import fcntl
import os
import threading
import time
from pathlib import Path

import pytest
import time_machine

from services.files import photo_sweep
from services.files.storage import FolderStore, file_store
from support.images import data_url, jpeg_bytes, png_bytes
from tests.plugins.storage import FOLDER_ONLY, stored_names

DAY_S = 24 * 3600


def age(path: Path, seconds: float) -> None:
    """Make a file look last changed `seconds` ago."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def signed_ticket_with_photo(client, acme) -> dict:
    """A ticket made through the API with one photo and a signature."""
    answer = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": acme.project()["id"], "description": "Patched the slab",
        "reason": "The plumber cut it", "directed_by": "Sam Ortiz",
        "photos": [{"data_url": data_url(jpeg_bytes(800, 600, color=(10, 200, 30)))}],
        "signature": {"name": "Sam Ortiz", "image": data_url(png_bytes(), "image/png")}})
    assert answer.status_code in (200, 201), answer.get_data(as_text=True)
    return answer.json


def referenced_paths(app, store: FolderStore) -> list[Path]:
    """The files the tickets refer to."""
    with app.app_context():
        keys = photo_sweep.referenced_image_keys()
    return [store.path_for(key) for key in keys]


@pytest.mark.both_stores
def test_the_sweep_takes_only_files_no_ticket_names_once_they_are_old(app, client, acme, runner):
    signed_ticket_with_photo(client, acme)
    with app.app_context():
        referenced = photo_sweep.referenced_image_keys()
        orphan = file_store().put(jpeg_bytes(color=(1, 2, 3)), "jpg")
    assert len(referenced) == 3  # the photo, its thumbnail and the signature
    young = runner.invoke(args=["photos", "orphans", "--remove"])
    assert young.exit_code == 0 and "removed 0 of 0" in young.output
    with time_machine.travel(dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=2)):
        listed = runner.invoke(args=["photos", "orphans"])
        assert orphan in listed.output and "1 orphaned files" in listed.output
        assert not any(key in listed.output for key in referenced)
        removed = runner.invoke(args=["photos", "orphans", "--remove"])
        assert "removed 1 of 1" in removed.output
    assert stored_names(app) == sorted(referenced)


def name_of(store: FolderStore, path: Path) -> str:
    """How the sweep names a folder file: its path under the store."""
    return str(path.relative_to(store.root))


@FOLDER_ONLY  # a folder file's time can be set; a bucket object's cannot
def test_orphans_are_listed_then_removed_and_referenced_files_stay(app, client, acme, runner):
    """In a folder, with an unfinished write left behind too."""
    signed_ticket_with_photo(client, acme)
    store = FolderStore(app.config["PHOTO_DIR"])
    referenced = referenced_paths(app, store)
    assert len(referenced) == 3  # the photo, its thumbnail and the signature
    # Left by requests refused after storing their images: one long ago, one just now.
    old_orphan = store.path_for(store.put(jpeg_bytes(color=(1, 2, 3)), "jpg"))
    young_orphan = store.path_for(store.put(jpeg_bytes(color=(4, 5, 6)), "jpg"))
    leftover = old_orphan.parent / ".tmp-interrupted.part"
    leftover.write_bytes(b"half a photo")
    for path in [*referenced, old_orphan, leftover]:
        age(path, 2 * DAY_S)

    listed = runner.invoke(args=["photos", "orphans"])
    assert listed.exit_code == 0, listed.output
    assert name_of(store, old_orphan) in listed.output and name_of(store, leftover) in listed.output
    assert name_of(store, young_orphan) not in listed.output
    assert not any(name_of(store, path) in listed.output for path in referenced)
    assert "2 orphaned files" in listed.output
    assert old_orphan.exists() and leftover.exists()  # listing removes nothing

    removed = runner.invoke(args=["photos", "orphans", "--remove"])
    assert removed.exit_code == 0, removed.output
    assert "removed 2 of 2" in removed.output
    assert not old_orphan.exists() and not leftover.exists()
    assert young_orphan.exists()
    assert all(path.exists() for path in referenced)


@FOLDER_ONLY  # a folder file's time can be set; a bucket object's cannot
def test_a_file_stored_again_is_young_again_and_stays(app, runner):
    """A crew's queued retry stores the same photo a refused attempt left a day ago."""
    store = FolderStore(app.config["PHOTO_DIR"])
    photo = jpeg_bytes(color=(7, 8, 9))
    path = store.path_for(store.put(photo, "jpg"))
    age(path, 2 * DAY_S)
    store.put(photo, "jpg")
    with app.app_context():
        report = photo_sweep.sweep_orphans(DAY_S, remove=True)
    assert report.found == [] and path.exists()


@FOLDER_ONLY  # a folder file's time can be set; a bucket object's cannot
def test_removal_waits_for_a_store_in_progress(app):
    """Removing takes the store's lock exclusively, so a put halfway through finishes first;
    here the put refreshes the file's time, and the removal then leaves it."""
    store = FolderStore(app.config["PHOTO_DIR"])
    path = store.path_for(store.put(jpeg_bytes(color=(11, 12, 13)), "jpg"))
    age(path, 2 * DAY_S)
    outcome: list[int | None] = []
    with store._locked(fcntl.LOCK_SH):  # what put holds
        remover = threading.Thread(
            target=lambda: outcome.append(store.remove_if_unchanged_since(
                name_of(store, path), time.time() - DAY_S)))
        remover.start()
        remover.join(timeout=0.3)
        assert remover.is_alive() and outcome == []  # waiting for the lock
        os.utime(path)  # the put's refresh
    remover.join(timeout=30)
    assert outcome == [None] and path.exists()


def test_a_grace_period_under_an_hour_is_refused(app, runner):
    with app.app_context(), pytest.raises(ValueError):
        photo_sweep.sweep_orphans(60, remove=True)
    answer = runner.invoke(args=["photos", "orphans", "--min-age-hours", "0.5", "--remove"])
    assert answer.exit_code == 2 and "0.5" in answer.output


@FOLDER_ONLY
@pytest.mark.sqlite_only  # the backup command copies SQLite; PostgreSQL uses pg_dump
def test_a_backup_goes_on_when_the_sweep_takes_a_file_it_was_about_to_copy(
        app, runner, tmp_path, monkeypatch):
    store = FolderStore(app.config["PHOTO_DIR"])
    kept = store.path_for(store.put(jpeg_bytes(color=(20, 21, 22)), "jpg"))
    orphan = store.path_for(store.put(jpeg_bytes(color=(23, 24, 25)), "jpg"))
    opened = FolderStore.stream

    def sweep_then_open(self, key):
        if key == orphan.name:
            orphan.unlink()  # the sweep got there first
        return opened(self, key)

    monkeypatch.setattr(FolderStore, "stream", sweep_then_open)
    answer = runner.invoke(args=["backup", str(tmp_path / "backup")])
    assert answer.exit_code == 0, answer.output
    copied = [path.name for path in (tmp_path / "backup" / "photos").rglob("*") if path.is_file()]
    assert copied == [kept.name]


@FOLDER_ONLY  # a folder file's time can be set; a bucket object's cannot
def test_photos_staged_for_a_ticket_that_never_came_are_dropped_after_a_week(
        app, client, acme, runner):
    import datetime as dt

    import time_machine

    from models import StagedPhoto, db

    token = client.post("/v1/links", headers=acme.headers,
                        json={"project_id": acme.project()["id"]}).json["token"]
    start = dt.datetime.now(dt.timezone.utc)
    with time_machine.travel(start - dt.timedelta(days=8), tick=False):
        old = client.put(f"/c/{token}/drafts/never-came-0001/photos/p1",
                         data=jpeg_bytes(color=(9, 9, 9)), content_type="image/jpeg")
    recent = client.put(f"/c/{token}/drafts/still-coming-01/photos/p1",
                        data=jpeg_bytes(color=(8, 8, 8)), content_type="image/jpeg")
    assert old.status_code == 200 and recent.status_code == 200
    store = FolderStore(app.config["PHOTO_DIR"])
    with app.app_context():
        staged = {row.client_ref: row for row in db.session.query(StagedPhoto)}
    old_files = [store.path_for(staged["never-came-0001"].image_key),
                 store.path_for(staged["never-came-0001"].thumb_key)]
    kept_files = [store.path_for(staged["still-coming-01"].image_key)]
    for path in old_files:
        age(path, 8 * DAY_S)
    listed = runner.invoke(args=["photos", "orphans"])
    assert "found 1 photo(s) staged over 7 days" in listed.output
    removed = runner.invoke(args=["photos", "orphans", "--remove"])
    assert removed.exit_code == 0, removed.output
    assert "dropped 1 photo(s) staged over 7 days" in removed.output
    assert not any(path.exists() for path in old_files)
    assert all(path.exists() for path in kept_files)
    with app.app_context():
        assert [row.client_ref for row in db.session.query(StagedPhoto)] == ["still-coming-01"]
