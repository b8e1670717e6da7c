"""The file store, the same on both backends (a folder, a bucket on a loopback S3 server); moving
to a bucket; backups to one."""
from __future__ import annotations

import datetime as dt
import hashlib
import os
from pathlib import Path

import pytest

from models import Ticket, TicketPhoto, db
from services.files import photo_sweep, storage
from services.files.storage import (
    BucketStore,
    FileStore,
    FolderStore,
    StorageUnavailable,
    file_store,
    s3_client,
)
from support.images import data_url, noise_jpeg, png_bytes
from support.servers import free_port, new_bucket
from tests.plugins.storage import FOLDER_ONLY, stored_names
from tests.test_hostile_input import stored_state


@pytest.fixture(params=["folder", "bucket"])
def store(request, tmp_path) -> FileStore:
    """An empty store of each backend."""
    if request.param == "folder":
        return FolderStore(tmp_path / "nested" / "store")
    endpoint = request.getfixturevalue("s3_endpoint")
    return BucketStore(f"s3://{new_bucket(endpoint)}/some/prefix", endpoint)


def test_same_bytes_same_key_one_file(store):
    data = b"\xff\xd8 a photo"
    key = store.put(data, "jpg")
    assert store.put(data, "jpg") == key == hashlib.sha256(data).hexdigest() + ".jpg"
    assert [entry.key for entry in store.entries()] == [key]
    assert store.exists(key) and store.open(key) == data


def test_round_trips_streams_and_reports_missing_keys(store):
    blobs = {store.put(bytes([n]) * (n + 1), "png"): bytes([n]) * (n + 1) for n in range(5)}
    big = os.urandom(300_000)
    blobs[store.put(big, "jpg")] = big
    for key, blob in blobs.items():
        assert store.open(key) == blob
    stream = store.stream(store.put(big, "jpg"))
    chunks = list(stream.chunks)
    assert stream.size == len(big) and len(chunks) > 1 and b"".join(chunks) == big
    missing = "0" * 64 + ".jpg"
    assert not store.exists(missing)
    with pytest.raises(KeyError):
        store.open(missing)


@pytest.mark.parametrize("key", ["../../etc/passwd", "abc.jpg", "a" * 64 + ".exe", "a" * 64,
                                 "A" * 64 + ".jpg", "a" * 64 + ".JPG", "a" * 63 + ".jpg",
                                 "a" * 64 + ".jpg\n", "a" * 64 + ".jpg/../../x",
                                 "../" + "a" * 61 + ".jpg", ""])
def test_refuses_keys_that_are_not_content_hashes(tmp_path, key):
    store = FolderStore(tmp_path)
    with pytest.raises(ValueError):
        store.open(key)
    assert store.exists(key) is False


def test_refuses_unknown_extensions(store):
    for extension in ("exe", "JPG", "jpeg", "../jpg", ""):
        with pytest.raises(ValueError):
            store.put(b"data", extension)
    assert list(store.entries()) == []


def test_putting_a_stored_file_again_refreshes_its_time(store):
    """Not written again, but new for the sweep's grace period."""
    key = store.put(b"first", "png")
    if isinstance(store, FolderStore):
        path = store.path_for(key)
        os.utime(path, (1_000_000_000, 1_000_000_000))
        inode = path.stat().st_ino
        store.put(b"first", "png")
        assert path.stat().st_ino == inode and path.read_bytes() == b"first"
    else:
        before = next(store.entries()).modified
        store.put(b"first", "png")
        assert store.open(key) == b"first"
        assert next(store.entries()).modified >= before
    assert store.remove_if_unchanged_since(key if not isinstance(store, FolderStore)
                                           else str(Path(key[:2], key[2:4], key)),
                                           cutoff=dt.datetime(2001, 1, 1).timestamp()) is None
    assert store.exists(key)


def test_a_store_failing_halfway_takes_back_what_it_created(store, monkeypatch):
    kept = store.put(b"stored before", "png")  # another ticket's file: never taken back
    calls = []
    real = type(store)._put

    def fail_third(self, data, extension):
        calls.append(data)
        if len(calls) == 3:
            raise OSError("the store went away")
        return real(self, data, extension)

    monkeypatch.setattr(type(store), "_put", fail_third)
    with pytest.raises(OSError):
        store.put_all([(b"new one", "jpg"), (b"stored before", "png"), (b"never", "jpg")])
    assert [entry.key for entry in store.entries() if entry.key] == [kept]


def test_an_unreachable_bucket_is_a_503_not_a_500():
    store = BucketStore("s3://nowhere/x", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(StorageUnavailable) as raised:
        store.put(b"data", "jpg")
    assert raised.value.status == 503



# ------------------------------------------------------------------ in the app


def photo_ticket(client, tenant, photos: int = 2) -> dict:
    """A ticket sent through the API with photos and a signature."""
    return client.post("/v1/tickets", headers=tenant.headers, json={
        "project_id": tenant.project()["id"], "description": "Core drill", "reason": "GC asked",
        "directed_by": "Sam", "photos": [{"data_url": data_url(noise_jpeg(seed=n))}
                                         for n in range(photos)],
        "signature": {"name": "Sam", "image": data_url(png_bytes(), "image/png")}})


@pytest.mark.both_stores
def test_a_store_failing_halfway_leaves_no_ticket_and_no_file(app, client, acme, monkeypatch):
    with app.app_context():
        store_type = type(file_store())
    real, calls = store_type._put, []

    def fail_third(self, data, extension):
        calls.append(extension)
        if len(calls) == 3:
            raise StorageUnavailable("the file store cannot be reached right now")
        return real(self, data, extension)

    monkeypatch.setattr(store_type, "_put", fail_third)
    answer = photo_ticket(client, acme)
    assert answer.status_code == 503 and answer.json["error"]["code"] == "storage_unavailable"
    assert stored_state(app) == (0, 0, 0)  # not acknowledged, no row, no file left behind
    monkeypatch.setattr(store_type, "_put", real)
    again = photo_ticket(client, acme)  # the phone sends it again: all of it is kept
    assert again.status_code == 200 and stored_state(app)[:2] == (1, 2)
    with app.app_context():
        assert stored_names(app) == sorted(photo_sweep.referenced_image_keys())


@pytest.mark.both_stores
def test_photos_and_signatures_stream_from_the_store(app, client, acme):
    ticket = photo_ticket(client, acme).json
    photo = ticket["photos"][0]["id"]
    answer = client.get(f"/v1/tickets/{ticket['id']}/photos/{photo}", headers=acme.headers,
                        buffered=False)
    assert answer.is_streamed and answer.mimetype == "image/jpeg"
    body = answer.get_data()
    assert int(answer.headers["Content-Length"]) == len(body) and body[:2] == b"\xff\xd8"
    signature = client.get(f"/v1/tickets/{ticket['id']}/signature", headers=acme.headers)
    assert signature.mimetype == "image/png" and signature.data[:4] == b"\x89PNG"
    with app.app_context():
        key = db.session.query(TicketPhoto).filter_by(id=photo).one().image_key
        assert file_store().open(key) == body


@pytest.mark.both_stores
def test_a_file_the_store_lost_is_a_404_not_a_500(app, client, acme):
    ticket = photo_ticket(client, acme, photos=1).json
    with app.app_context():
        photo = db.session.query(TicketPhoto).one()
        photo.image_key = "0" * 64 + ".jpg"
        db.session.commit()
    answer = client.get(f"/v1/tickets/{ticket['id']}/photos/{photo.id}", headers=acme.headers)
    assert answer.status_code == 404 and answer.json["error"]["code"] == "photo_not_found"


@FOLDER_ONLY
def test_migrate_copies_checks_and_switches_and_twice_changes_nothing(app, client, acme, runner,
                                                                       s3_endpoint):
    photo_ticket(client, acme)
    folder_files = stored_names(app)
    url = f"s3://{new_bucket(s3_endpoint)}/tickets"
    first = runner.invoke(args=["storage", "migrate", "--to", url, "--endpoint", s3_endpoint])
    assert first.exit_code == 0, first.output
    assert f"copied {len(folder_files)}, already there 0" in first.output
    config_file = Path(app.instance_path) / "config.py"
    written = config_file.read_text()
    assert f"STORAGE_URL = {url!r}" in written and f"S3_ENDPOINT_URL = {s3_endpoint!r}" in written
    assert app.config["STORAGE_URL"] == url
    assert stored_names(app) == folder_files  # now read from the bucket
    listed = client.get("/v1/tickets", headers=acme.headers).json["data"][0]
    ticket = client.get(f"/v1/tickets/{listed['id']}", headers=acme.headers).json
    photo = client.get(f"/v1/tickets/{ticket['id']}/photos/{ticket['photos'][0]['id']}",
                       headers=acme.headers)
    assert photo.status_code == 200 and photo.data[:2] == b"\xff\xd8"
    with app.app_context():
        bucket = file_store()
        times = {entry.key: entry.modified for entry in bucket.entries()}
    second = runner.invoke(args=["storage", "migrate", "--to", url, "--endpoint", s3_endpoint])
    assert second.exit_code == 0, second.output
    assert f"copied 0, already there {len(folder_files)}" in second.output
    assert config_file.read_text() == written
    with app.app_context():
        assert {entry.key: entry.modified for entry in bucket.entries()} == times


def test_migrate_refuses_an_address_that_is_not_a_bucket(runner):
    answer = runner.invoke(args=["storage", "migrate", "--to", "/var/lib/elsewhere"])
    assert answer.exit_code != 0 and "s3://" in answer.output


@pytest.mark.sqlite_only  # PostgreSQL is backed up with pg_dump, as deploy/README.md says
@pytest.mark.both_stores
def test_a_backup_to_a_bucket_is_encrypted_verified_and_restores_the_same_tickets_and_files(
        app, client, acme, runner, tmp_path, s3_endpoint):
    key_file = tmp_path / "backup.key"
    assert runner.invoke(args=["backup", "new-key", str(key_file)]).exit_code == 0
    assert runner.invoke(args=["backup", "new-key", str(key_file)]).exit_code != 0  # never over
    app.config["BACKUP_KEY_FILE"] = str(key_file)
    app.config["S3_ENDPOINT_URL"] = s3_endpoint
    url = f"s3://{new_bucket(s3_endpoint)}/nightly"
    tickets = [photo_ticket(client, acme, photos=n).json["id"] for n in (1, 2)]
    files = stored_names(app)
    made = runner.invoke(args=["backup", url])
    assert made.exit_code == 0, made.output
    assert f"backed up 2 tickets and {len(files)} photo files" in made.output
    bucket = url.split("/")[2]
    objects = s3_client(s3_endpoint).list_objects_v2(Bucket=bucket)["Contents"]
    raw = b"".join(s3_client(s3_endpoint).get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                   for item in objects)
    assert b"Core drill" not in raw and b"SQLite format" not in raw and b"\xff\xd8" not in raw
    assert not any(name[:64] in raw.decode() + " ".join(i["Key"] for i in objects)
                   for name in files)  # not even which photos it holds

    verified = runner.invoke(args=["backup", "verify", url])
    assert verified.exit_code == 0, verified.output
    assert f"restores to 2 tickets and {len(files)} whole files" in verified.output

    photo_ticket(client, acme, photos=1)  # after the backup: gone once it is restored
    restored = runner.invoke(args=["restore", "--yes", url])
    assert restored.exit_code == 0, restored.output
    with app.app_context():
        assert sorted(t.id for t in db.session.query(Ticket)) == sorted(tickets)
        store = file_store()
        for photo in db.session.query(TicketPhoto):
            assert storage.digest_matches(photo.image_key, store.open(photo.image_key))
            assert store.exists(photo.thumb_key)
        db.engine.dispose()

    kept_files = [i["Key"] for i in s3_client(s3_endpoint).list_objects_v2(
        Bucket=bucket, Prefix="nightly/files/")["Contents"]]
    assert len(kept_files) == len(files)
    again = runner.invoke(args=["backup", url])  # the next night sends no file twice
    assert again.exit_code == 0 and "backed up 2 tickets" in again.output
    assert [i["Key"] for i in s3_client(s3_endpoint).list_objects_v2(
        Bucket=bucket, Prefix="nightly/files/")["Contents"]] == kept_files

    app.config["BACKUP_KEY_FILE"] = str(tmp_path / "other.key")
    runner.invoke(args=["backup", "new-key", str(tmp_path / "other.key")])
    wrong = runner.invoke(args=["backup", "verify", url])
    assert wrong.exit_code != 0 and "does not open with this key" in wrong.output
