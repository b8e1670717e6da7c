"""GET /healthz."""
from __future__ import annotations

from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import make_url

from models import db
from services import health
from services.project_system import connections
from support.servers import free_port


def test_healthy_service_reports_ok_without_a_key(app, client, acme):
    connections._last_seen.update(ok_at=None, failed_at=None, last_error=None)
    client.get("/v1/projects", headers=acme.headers)
    response = client.get("/healthz")
    assert response.status_code == 200
    report = response.json
    assert report["status"] == "ok"
    checks = report["checks"]
    backend = make_url(app.config["SQLALCHEMY_DATABASE_URI"]).get_backend_name()
    assert checks["database"] == {"ok": True, "dialect": backend}
    assert checks["migrations"]["ok"] and checks["migrations"]["current"] in checks["migrations"]["expected"]
    assert checks["disk"]["ok"] and checks["disk"]["free_bytes"] > 0
    assert checks["storage"] == {"ok": True,
                                 "backend": "bucket" if app.config["STORAGE_URL"] else "folder"}
    assert checks["project_system"]["ok"] and checks["project_system"]["ok_at"] is not None
    body = response.get_data(as_text=True)
    assert acme.client_secret not in body and acme.key not in body


def test_unreachable_project_system_degrades_but_serves(app, client, acme):
    app.config["SANDBOX_URL"] = "http://127.0.0.1:9"
    app.config["PROJECT_SYSTEM_READ_RETRIES"] = 0
    assert client.get("/v1/projects", headers=acme.headers).status_code == 502
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json["status"] == "degraded"
    assert response.json["checks"]["project_system"] == {
        "ok": False, "ok_at": response.json["checks"]["project_system"]["ok_at"],
        "failed_at": response.json["checks"]["project_system"]["failed_at"], "last_error": "unavailable"}


def test_migrations_behind_is_503(app, client):
    with app.app_context():
        db.session.execute(text("UPDATE alembic_version SET version_num = '0004'"))
        db.session.commit()
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json["status"] == "failing"
    assert response.json["checks"]["migrations"]["current"] == "0004"


def test_low_disk_is_503(app, client, monkeypatch):
    monkeypatch.setattr(health, "MIN_FREE_BYTES", 2**62)
    response = client.get("/healthz")
    assert response.status_code == 503 and response.json["checks"]["disk"]["ok"] is False


@pytest.mark.both_stores
def test_an_unreachable_bucket_is_503(app, client, store_backend):
    if store_backend == "bucket":
        app.config["S3_ENDPOINT_URL"] = f"http://127.0.0.1:{free_port()}"
    response = client.get("/healthz")
    expected = {"folder": (200, {"ok": True, "backend": "folder"}),
                "bucket": (503, {"ok": False, "backend": "bucket", "error": "EndpointConnectionError"})}
    assert (response.status_code, response.json["checks"]["storage"]) == expected[store_backend]


def test_the_expected_revision_is_alembics_head():
    folder = Path(__file__).resolve().parents[1] / "migrations"
    assert health.migration_heads(folder / "versions") == set(ScriptDirectory(str(folder)).get_heads())


def test_a_merge_of_two_branches_is_the_one_head(tmp_path):
    for name, revision, down in (("a", "a1", None), ("b", "b1", "a1"), ("c", "c1", "a1"),
                                 ("m", "m1", ("b1", "c1"))):
        (tmp_path / f"{name}.py").write_text(f"revision: str = {revision!r}\ndown_revision = {down!r}\n")
    assert health.migration_heads(tmp_path) == {"m1"}
