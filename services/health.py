"""Health: what an operator (or a load balancer) needs to know, with nothing secret in it."""
from __future__ import annotations

import ast
import functools
import shutil
from pathlib import Path
from typing import Any

from flask import current_app
from sqlalchemy import inspect, text

from models import db
from services.files import storage
from services.project_system import connections
from services.project_system.pacing import shared_pacing

MIN_FREE_BYTES = 200 * 1024 * 1024

VERSION_TABLE = "alembic_version"  # where Alembic keeps the revision a database is at


@functools.cache
def migration_heads(versions: Path) -> frozenset[str]:
    """The revisions no migration in `versions` builds on, read from the files' own assignments.

    Read with ast rather than Alembic, whose import costs a serving process about 10 MB;
    tests/test_health.py holds it to Alembic's own answer.
    """
    revisions, built_on = set(), set()
    for path in versions.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if isinstance(target, ast.Name) and target.id in ("revision", "down_revision"):
                value = ast.literal_eval(node.value)
                if target.id == "revision":
                    revisions.add(value)
                elif value:
                    built_on.update([value] if isinstance(value, str) else value)
    return frozenset(revisions - built_on)


def _migration_heads() -> tuple[str | None, set[str]]:
    """The database's current revision and the revisions the code expects."""
    with db.engine.connect() as connection:
        current = (connection.scalar(text(f"SELECT version_num FROM {VERSION_TABLE}"))
                   if inspect(connection).has_table(VERSION_TABLE) else None)
    return current, set(migration_heads(Path(current_app.root_path) / "migrations" / "versions"))


def health() -> tuple[dict[str, Any], bool]:
    """Check the database, migrations, free disk, the file store and the project system; return
    (report, healthy)."""
    checks: dict[str, Any] = {}
    try:
        db.session.execute(text("SELECT 1"))
        checks["database"] = {"ok": True, "dialect": db.engine.dialect.name}
    except Exception as error:  # noqa: BLE001 - any failure here means the database is unusable
        checks["database"] = {"ok": False, "error": type(error).__name__}
    if checks["database"]["ok"]:
        current, heads = _migration_heads()
        checks["migrations"] = {"ok": current in heads, "current": current, "expected": sorted(heads)}
    else:
        checks["migrations"] = {"ok": False, "current": None, "expected": []}
    usage = shutil.disk_usage(current_app.instance_path)
    checks["disk"] = {"ok": usage.free >= MIN_FREE_BYTES, "free_bytes": usage.free}
    checks["storage"] = storage.file_store().check()
    seen = connections.last_seen()
    failing = seen["failed_at"] is not None and (seen["ok_at"] is None or seen["failed_at"] > seen["ok_at"])
    checks["project_system"] = {"ok": not failing, **seen}
    # On Redis, the Procore call budget each company shares; paced by each process while away.
    pacing = shared_pacing()
    if str(current_app.config.get("RATELIMIT_STORAGE_URI", "")).startswith(("redis://",
                                                                             "rediss://")):
        checks["project_system_pacing"] = pacing if not pacing["ok"] else {"ok": True}
    degraded = failing or not pacing["ok"]
    healthy = all(checks[name]["ok"] for name in ("database", "migrations", "disk", "storage"))
    status = "ok" if healthy and not degraded else ("degraded" if healthy else "failing")
    return {"status": status, "checks": checks}, healthy
