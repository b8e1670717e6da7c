"""Online backup while tickets are being written, then a restore that finds every ticket and photo."""
from __future__ import annotations

import json
import threading

import pytest
import requests

from app import create_app
from models import Ticket, TicketPhoto, db
from services.accounts import keys
from services.files.storage import file_store
from support.images import data_url, jpeg_bytes
from tests.conftest import app_config

pytestmark = pytest.mark.sqlite_only  # PostgreSQL is backed up with pg_dump, as deploy/README.md says


def test_backup_during_writes_then_restore(app, client, acme, live_server, runner, tmp_path,
                                           migrated_template):
    acknowledged: list[str] = []
    before_backup: list[str] = []
    stop = threading.Event()

    def write_tickets() -> None:
        for i in range(40):
            if stop.is_set():
                break
            body = {"project_id": acme.project()["id"], "description": f"ticket {i}", "reason": "r",
                    "directed_by": "d", "photos": [{"data_url": data_url(jpeg_bytes(40 + i, 30))}]}
            answer = requests.post(f"{live_server.url}/v1/tickets", json=body,
                                   headers=acme.headers, timeout=30)
            assert answer.status_code == 200, answer.text
            acknowledged.append(answer.json()["id"])

    app.config["API_RATE_LIMIT"] = "10000 per minute"
    writer = threading.Thread(target=write_tickets)
    writer.start()
    while len(acknowledged) < 5 and writer.is_alive():
        writer.join(timeout=0.05)
    before_backup.extend(acknowledged)
    result = runner.invoke(args=["backup", str(tmp_path / "backup")])
    writer.join(timeout=120)
    stop.set()
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert manifest["tickets"] >= len(before_backup)

    fresh_dir = tmp_path / "restored"
    fresh_dir.mkdir()
    restored = create_app(app_config(fresh_dir, migrated_template,
                                     PHOTO_DIR=str(fresh_dir / "photos")))
    outcome = restored.test_cli_runner().invoke(args=["restore", "--yes", str(tmp_path / "backup")])
    assert outcome.exit_code == 0, outcome.output
    with restored.app_context():
        ids = {t.id for t in db.session.query(Ticket)}
        assert set(before_backup) <= ids <= set(acknowledged)
        assert len(ids) == manifest["tickets"]
        store = file_store()
        photos = db.session.query(TicketPhoto).all()
        assert len(photos) == len(ids)
        for photo in photos:
            assert store.open(photo.image_key)[:2] == b"\xff\xd8"
            assert store.exists(photo.thumb_key)
        db.engine.dispose()


def test_backup_refuses_a_folder_in_use(runner, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "something").write_text("x")
    result = runner.invoke(args=["backup", str(tmp_path / "full")])
    assert result.exit_code != 0 and "not empty" in result.output


def test_restore_refuses_a_damaged_backup(runner, tmp_path):
    assert runner.invoke(args=["backup", str(tmp_path / "b")]).exit_code == 0
    with open(tmp_path / "b" / "tickets.sqlite3", "ab") as handle:
        handle.write(b"tampered")
    result = runner.invoke(args=["restore", "--yes", str(tmp_path / "b")])
    assert result.exit_code != 0 and "damaged" in result.output


def test_a_key_the_restored_database_does_not_know_is_refused_at_once(app, client, tenant, runner,
                                                                       tmp_path):
    """Callers kept in memory (services.keycache) are forgotten when a backup is put back."""
    assert runner.invoke(args=["backup", str(tmp_path / "before-new-key")]).exit_code == 0
    with app.app_context():
        newer = keys.issue_key(tenant.company_id, "made after the backup")
    headers = {"Authorization": f"Bearer {newer.secret}"}
    for _ in range(2):
        assert client.get("/v1/me", headers=headers).status_code == 200
    restored = runner.invoke(args=["restore", "--yes", str(tmp_path / "before-new-key")])
    assert restored.exit_code == 0, restored.output
    refused = client.get("/v1/me", headers=headers)
    assert refused.status_code == 401
    assert refused.get_json()["error"]["code"] == "api_key_invalid"
