"""Storage quotas per link, company and server per day; the disk reserve; a full disk is a 507."""
from __future__ import annotations

import datetime as dt
import errno
import io

import pytest
import time_machine

from app import create_app
from services.files import storage
from support.images import data_url, jpeg_bytes, noise_jpeg
from tests.plugins.storage import FOLDER_ONLY
from tests.test_hostile_input import stored_state


def _link(client, tenant) -> str:
    return client.post("/v1/links", headers=tenant.headers,
                       json={"project_id": tenant.project()["id"]}).json["token"]


def _ticket(photo_count=1, **extra):
    body = {"description": "Core drill", "reason": "Added by GC", "directed_by": "Sam",
            "photos": [{"name": f"p{i}.jpg", "data_url": data_url(noise_jpeg(seed=i))}
                       for i in range(photo_count)]}
    body.update(extra)
    return body


@pytest.mark.parametrize("setting", ["QUOTA_LINK_BYTES_PER_DAY", "QUOTA_COMPANY_BYTES_PER_DAY",
                                     "QUOTA_TOTAL_BYTES_PER_DAY"])
def test_a_used_up_quota_answers_507_and_stores_nothing(app, client, acme, setting):
    token = _link(client, acme)
    assert client.post(f"/c/{token}/tickets", json=_ticket(1)).status_code == 200
    app.config[setting] = 1  # today's usage is already past it
    app.config["QUOTA_COMPANY_SHARE_BYTES_PER_DAY"] = 1  # the server's total spares a share only
    before = stored_state(app)
    response = client.post(f"/c/{token}/tickets", json=_ticket(2))
    assert response.status_code == 507
    assert response.json["error"]["code"] == "storage_quota_exceeded"
    assert "tomorrow" in response.json["error"]["message"]
    assert int(response.headers["Retry-After"]) > 0
    assert stored_state(app) == before
    # Through the API too, for the same company.
    api = client.post("/v1/tickets", headers=acme.headers,
                      json=_ticket(1, project_id=acme.project()["id"]))
    if setting != "QUOTA_LINK_BYTES_PER_DAY":
        assert api.status_code == 507 and api.json["error"]["code"] == "storage_quota_exceeded"
    else:
        assert api.status_code in (200, 201)
    # The next UTC day the quota starts again.
    with time_machine.travel(dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)):
        app.config[setting] = 10 * 1024 * 1024
        assert client.post(f"/c/{token}/tickets", json=_ticket(1)).status_code == 200


def test_the_quota_is_checked_before_anything_is_written(app, client, acme):
    token = _link(client, acme)
    app.config["QUOTA_LINK_BYTES_PER_DAY"] = 50_000
    big = client.post(f"/c/{token}/tickets", json=_ticket(4))
    assert big.status_code == 507 and stored_state(app) == (0, 0, 0)
    small = client.post(f"/c/{token}/tickets", json=_ticket(0))
    assert small.status_code == 200  # a refused request counted nothing


@FOLDER_ONLY  # a bucket has no disk of ours to keep free; the quotas above still hold
def test_low_disk_answers_storage_full(app, client, acme):
    token = _link(client, acme)
    app.config["DISK_RESERVE_BYTES"] = 2 ** 62
    before = stored_state(app)
    response = client.post(f"/c/{token}/tickets", json=_ticket(1))
    assert response.status_code == 507 and response.json["error"]["code"] == "storage_full"
    api = client.post("/v1/tickets", headers=acme.headers, json=_ticket(1, project_id=acme.project()["id"]))
    assert api.status_code == 507 and api.json["error"] == {
        "code": "storage_full", "message": api.json["error"]["message"]}
    assert stored_state(app) == before


def test_a_disk_that_fills_while_writing_is_a_507_not_a_500(app, client, acme, monkeypatch):
    def full(self, data, extension):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(storage.FolderStore, "_put", full)
    monkeypatch.setattr(storage.BucketStore, "_put", full)
    api = client.post("/v1/tickets", headers=acme.headers, json=_ticket(1, project_id=acme.project()["id"]))
    assert api.status_code == 507 and api.json["error"]["code"] == "storage_full"
    token = _link(client, acme)
    page = client.post(f"/c/{token}/tickets", data={"description": "d", "reason": "r", "directed_by": "s"},
                       content_type="multipart/form-data")
    assert page.status_code == 200  # no photo: nothing to write to the store
    form = client.post(f"/c/{token}/tickets", content_type="multipart/form-data", data={
        "description": "d", "reason": "r", "directed_by": "s",
        "photo_files": [(io.BytesIO(jpeg_bytes()), "a.jpg")]})
    assert form.status_code == 507
    text = form.get_data(as_text=True)
    assert "no room" in text and "send" in text.lower() and "Traceback" not in text


def test_daily_counts_survive_a_restart(app, client, acme, tmp_path, migrated_template, sandbox_server):
    token = _link(client, acme)
    app.config["CAPTURE_TICKETS_PER_DAY"] = 2
    for _ in range(2):
        assert client.post(f"/c/{token}/tickets", json=_ticket(0)).status_code == 200
    assert client.post(f"/c/{token}/tickets", json=_ticket(0)).status_code == 429
    # A new process on the same database: the day's count is still there.
    restarted = create_app({**{k: app.config[k] for k in (
        "TESTING", "SQLALCHEMY_DATABASE_URI", "SECRET_KEY", "PASSWORD_HASH_PROFILE", "PHOTO_DIR",
        "SANDBOX_URL", "SANDBOX_DB_PATH", "RATELIMIT_STORAGE_URI")},
        "INSTANCE_PATH": str(tmp_path / "restarted"), "CAPTURE_TICKETS_PER_DAY": 2})
    again = restarted.test_client().post(f"/c/{token}/tickets", json=_ticket(0))
    assert again.status_code == 429 and again.json["error"]["code"] == "rate_limited"
    restarted.config["QUOTA_LINK_BYTES_PER_DAY"] = 1
    restarted.config["CAPTURE_TICKETS_PER_DAY"] = 100
    assert restarted.test_client().post(f"/c/{token}/tickets", json=_ticket(1)).status_code == 507
    with restarted.app_context():
        from models import db
        db.engine.dispose()


def test_a_company_within_its_share_stores_after_others_used_up_the_server(app, client, acme, rival):
    """Two companies' links fill the server's daily total; a third company, never touched,
    still stores an ordinary photo, while the two (past their shares) are refused."""
    from tests.conftest import connect_tenant

    third = connect_tenant(app, "Third Concrete", "third")
    app.config["QUOTA_COMPANY_SHARE_BYTES_PER_DAY"] = 100_000  # a photo and its thumbnail: ~75 kB
    app.config["QUOTA_TOTAL_BYTES_PER_DAY"] = 200_000
    statuses = {acme.company_id: [], rival.company_id: []}
    for tenant in (acme, rival):
        token = _link(client, tenant)
        for _ in range(8):
            statuses[tenant.company_id].append(
                client.post(f"/c/{token}/tickets", json=_ticket(2)).status_code)
    assert all(507 in found for found in statuses.values()), statuses
    refused = client.post(f"/c/{_link(client, acme)}/tickets", json=_ticket(1))
    assert refused.status_code == 507 and "the server" in refused.json["error"]["message"]
    before = stored_state(app)
    ordinary = client.post(f"/c/{_link(client, third)}/tickets", json=_ticket(1))
    assert ordinary.status_code == 200, ordinary.json
    assert stored_state(app) != before


@FOLDER_ONLY  # a bucket has no disk of ours to keep free
def test_the_shared_disk_reserve_refuses_only_a_company_past_its_share(app, client, acme, rival):
    app.config["QUOTA_COMPANY_SHARE_BYTES_PER_DAY"] = 100_000  # a photo and its thumbnail: ~75 kB
    app.config["DISK_SHARED_RESERVE_BYTES"] = 2 ** 62  # the disk is below the shared reserve
    token = _link(client, acme)
    answers = [client.post(f"/c/{token}/tickets", json=_ticket(1)).status_code for _ in range(3)]
    assert answers[0] == 200 and answers[-1] == 507
    before = stored_state(app)
    full = client.post(f"/c/{token}/tickets", json=_ticket(1))
    assert full.status_code == 507 and full.json["error"]["code"] == "storage_full"
    assert stored_state(app) == before
    assert client.post(f"/c/{_link(client, rival)}/tickets", json=_ticket(1)).status_code == 200


def test_a_links_default_fits_a_crews_busiest_day_and_no_more(app):
    """About 30 tickets of 6 photos at under 1 MiB (the capture page sends 2048 px JPEGs), with
    room to spare; not the whole company's day through one poster."""
    config = app.config
    busiest_tickets, photos_each, photo_bytes = 30, 6, 1024 * 1024
    assert busiest_tickets <= config["CAPTURE_TICKETS_PER_DAY"] <= 3 * busiest_tickets
    busiest_bytes = busiest_tickets * photos_each * photo_bytes
    assert busiest_bytes <= config["QUOTA_LINK_BYTES_PER_DAY"] <= 2 * busiest_bytes
    assert config["QUOTA_LINK_BYTES_PER_DAY"] <= config["QUOTA_COMPANY_SHARE_BYTES_PER_DAY"] \
        <= config["QUOTA_COMPANY_BYTES_PER_DAY"]
