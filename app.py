"""The app `flask --app app …` and the tests run: the served app with its commands and migrations.

The server (server.py) serves webapp.py's app alone, so a serving process never loads the
commands, Alembic and Flask-Migrate, or the embedded sandbox's demo seeding.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Flask
from flask_migrate import Migrate

from blueprints.cli import register_commands
from models import db
from webapp import create_web_app

migrate = Migrate(render_as_batch=True, compare_type=True)


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the served app, then add the `flask db` migrations and the service's commands."""
    app = create_web_app(test_config)
    migrate.init_app(app, db, directory=str(Path(app.root_path) / "migrations"))
    register_commands(app)
    return app
