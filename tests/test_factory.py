"""Configuration layering and the instance secret."""
from __future__ import annotations

from app import create_app
from tests.conftest import app_config


def test_defaults_use_sqlite_under_instance(tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    app = create_app({"INSTANCE_PATH": str(tmp_path / "inst")})
    assert app.config["SQLALCHEMY_DATABASE_URI"] == f"sqlite:///{tmp_path / 'inst' / 'tickets.sqlite3'}"
    assert app.config["API_RATE_LIMIT"] == "120 per minute"
    assert not app.testing


def test_layers_apply_in_order(tmp_path, monkeypatch):
    instance = tmp_path / "inst"
    instance.mkdir()
    (instance / "config.py").write_text(
        "API_RATE_LIMIT = '10 per minute'\nAPI_KEY_TOUCH_INTERVAL_S = 5\nSQLITE_BUSY_TIMEOUT_MS = 1234\n")
    monkeypatch.setenv("EWT_API_KEY_TOUCH_INTERVAL_S", "7")
    monkeypatch.setenv("EWT_SQLITE_BUSY_TIMEOUT_MS", "999")
    app = create_app({"INSTANCE_PATH": str(instance), "SQLITE_BUSY_TIMEOUT_MS": 42})
    assert app.config["API_RATE_LIMIT"] == "10 per minute"   # instance file over defaults
    assert app.config["API_KEY_TOUCH_INTERVAL_S"] == 7        # environment over instance file
    assert app.config["SQLITE_BUSY_TIMEOUT_MS"] == 42         # test mapping over everything


def test_database_url_selects_another_database(tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:p@127.0.0.1:5432/tickets")
    app = create_app({"INSTANCE_PATH": str(tmp_path / "inst")})
    assert app.config["SQLALCHEMY_DATABASE_URI"] == "postgresql+psycopg://u:p@127.0.0.1:5432/tickets"


def test_secret_key_is_generated_once_into_instance(tmp_path, monkeypatch):
    monkeypatch.delenv("EWT_SECRET_KEY", raising=False)
    instance = tmp_path / "inst"
    first = create_app({"INSTANCE_PATH": str(instance)})
    second = create_app({"INSTANCE_PATH": str(instance)})
    secret_file = instance / "secret_key"
    assert secret_file.exists()
    assert oct(secret_file.stat().st_mode & 0o777) == "0o600"
    assert len(first.config["SECRET_KEY"]) == 64
    assert first.config["SECRET_KEY"] == second.config["SECRET_KEY"]
    other = create_app({"INSTANCE_PATH": str(tmp_path / "elsewhere")})
    assert other.config["SECRET_KEY"] != first.config["SECRET_KEY"]


def test_given_secret_key_is_used_and_not_written(tmp_path, monkeypatch):
    monkeypatch.setenv("EWT_SECRET_KEY", "from-the-environment")
    app = create_app({"INSTANCE_PATH": str(tmp_path / "inst")})
    assert app.config["SECRET_KEY"] == "from-the-environment"
    assert not (tmp_path / "inst" / "secret_key").exists()


def test_testing_config_is_applied(tmp_path, migrated_template):
    app = create_app(app_config(tmp_path, migrated_template))
    assert app.testing
