"""The sandbox's SQLite file: connection settings, schema, id issuing and timestamps.

Every table is created with sqlite-utils. The file runs in WAL mode with a busy
timeout, and every write goes through ``write_transaction`` (BEGIN IMMEDIATE),
so the seeding script and several server threads or processes can write to the
same file without "database is locked" errors.
"""
from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime

import sqlite_utils

# Procore ids are 64-bit and exceed 2**32; all sandbox ids count up from here.
ID_BASE = 562949953421312
BUSY_TIMEOUT_MS = 10_000

_SCHEMA: dict[str, tuple[dict[str, type], str | tuple[str, ...]]] = {
    "id_sequence": ({"name": str, "value": int}, "name"),
    "companies": ({"id": int, "name": str, "service_user_id": int, "service_user_name": str,
                   "service_user_login": str, "rate_limit_per_hour": int, "created_at": str,
                   "spike_limit": int, "clock_offset_s": float, "clock_frozen_at": float,
                   "attachments_mode": str, "latency_ms": float, "spike_window_s": int,
                   "error_shape": str, "spike_rolling": int, "rename_files": int},
                  "id"),
    "clients": ({"client_id": str, "company_id": int, "secret_sha256": str, "created_at": str},
                "client_id"),
    "tokens": ({"token_sha256": str, "company_id": int, "expires_at": float, "revoked": int,
                "created_at": str}, "token_sha256"),
    "projects": ({"id": int, "company_id": int, "name": str, "display_name": str,
                  "project_number": str, "address": str, "city": str, "state_code": str,
                  "zip": str, "time_zone": str, "stage": str, "active": int,
                  "created_at": str, "updated_at": str, "manpower_status": str}, "id"),
    "project_tools": ({"id": int, "project_id": int, "engine_name": str, "title": str,
                       "is_active": int, "position": int, "required": int, "listed": int,
                       "shown_engine_name": str},
                      "id"),
    "change_event_statuses": ({"id": int, "company_id": int, "name": str,
                               "mapped_to_status": str, "show_in_select": int,
                               "default_status": int}, "id"),
    "line_item_types": ({"id": int, "company_id": int, "code": str, "name": str,
                         "base_type": str, "created_at": str, "updated_at": str}, "id"),
    "sub_jobs": ({"id": int, "project_id": int, "code": str, "name": str, "origin_id": str,
                  "created_at": str, "updated_at": str}, "id"),
    "cost_codes": ({"id": int, "project_id": int, "sub_job_id": int, "parent_id": int,
                    "code": str, "full_code": str, "name": str, "position": int,
                    "created_at": str, "updated_at": str}, "id"),
    "wbs_segments": ({"id": int, "project_id": int, "type": str, "name": str, "position": int,
                      "delimiter": str, "required": int, "structure": str, "in_pattern": int},
                     "id"),
    "wbs_segment_items": ({"id": int, "segment_id": int, "project_id": int, "code": str,
                           "name": str, "parent_id": int, "path_code": str,
                           "legacy_cost_code_id": int, "legacy_line_item_type_id": int,
                           "is_parent": int, "status": str, "sub_job_id": int}, "id"),
    "wbs_codes": ({"id": int, "project_id": int, "cost_code_item_id": int, "type_item_id": int,
                   "description": str, "status": str, "created_at": str, "updated_at": str,
                   "extra_item_ids": str}, "id"),
    "change_events": ({"id": int, "company_id": int, "project_id": int, "number": str,
                       "title": str, "description": str, "scope": str, "status_id": int,
                       "origin_id": str, "origin_data": str, "created_at": str,
                       "updated_at": str, "deleted_at": str, "event_type": str,
                       "change_reason_id": int}, "id"),
    "change_items": ({"id": int, "change_event_id": int, "position": int, "description": str,
                      "wbs_code_id": int, "amount": str, "quantity": str, "unit_cost": str,
                      "unit_of_measure": str, "calculation_strategy": str, "created_at": str,
                      "updated_at": str, "vendor_id": int, "contract_id": int,
                      "commitment_co_id": int, "prime_co_id": int}, "id"),
    # A company's directory, the projects each company is on, and its commitments per project.
    "vendors": ({"id": int, "company_id": int, "name": str, "created_at": str}, "id"),
    "project_vendors": ({"project_id": int, "vendor_id": int}, ("project_id", "vendor_id")),
    "commitments": ({"id": int, "company_id": int, "project_id": int, "kind": str,
                     "number": str, "title": str, "status": str, "vendor_id": int,
                     "created_at": str, "updated_at": str}, "id"),
    "change_reasons": ({"id": int, "company_id": int, "name": str, "show_in_select": int},
                       "id"),
    # Commitment and prime change orders a PM made from a change event's lines.
    "change_orders": ({"id": int, "project_id": int, "change_event_id": int, "kind": str,
                       "contract_id": int, "number": str, "title": str, "status": str,
                       "created_at": str, "updated_at": str}, "id"),
    "manpower_logs": ({"id": int, "company_id": int, "project_id": int, "date": str,
                       "num_workers": int, "num_hours": str, "notes": str, "position": int,
                       "created_at": str, "updated_at": str, "status": str}, "id"),
    "uoms": ({"id": int, "company_id": int, "name": str, "description": str,
              "is_standard": int, "category_id": int, "category": str}, "id"),
    "uploads": ({"uuid": str, "company_id": int, "project_id": int, "filename": str,
                 "content_type": str, "key": str, "signature": str, "status": str,
                 "size": int, "sha256": str, "created_at": str}, "uuid"),
    "spike_windows": ({"company_id": int, "window_start": int, "count": int},
                      ("company_id", "window_start")),
    "attachments": ({"id": int, "company_id": int, "owner_kind": str, "owner_id": int,
                     "filename": str, "content_type": str, "size": int, "sha256": str,
                     "created_at": str}, "id"),
    "faults": ({"id": int, "company_id": int, "remaining": int, "status": int, "message": str,
                "delay_s": float, "after_commit": int, "match": str, "methods": str,
                "retry_after": int, "created_at": str}, "id"),
    "rate_windows": ({"company_id": int, "window_start": int, "count": int},
                     ("company_id", "window_start")),
    # Each call of a company in its rolling spike window (POST /_sandbox/spike_limit rolling).
    "spike_calls": ({"id": int, "company_id": int, "at": float}, "id"),
}

_INDEXES: dict[str, list[list[str]]] = {
    "clients": [["company_id"]],
    "tokens": [["company_id"]],
    "projects": [["company_id"]],
    "project_tools": [["project_id"]],
    "change_event_statuses": [["company_id"]],
    "line_item_types": [["company_id"]],
    "sub_jobs": [["project_id"]],
    "cost_codes": [["project_id"]],
    "wbs_segments": [["project_id"]],
    "wbs_segment_items": [["segment_id"], ["legacy_cost_code_id"]],
    "wbs_codes": [["project_id"]],
    "change_events": [["project_id", "created_at"]],
    "change_items": [["change_event_id"]],
    "manpower_logs": [["project_id", "date"]],
    "attachments": [["owner_kind", "owner_id"]],
    "faults": [["company_id"]],
    "uoms": [["company_id"]],
    "vendors": [["company_id"]],
    "commitments": [["project_id"]],
    "change_reasons": [["company_id"]],
    "change_orders": [["change_event_id"]],
    "spike_calls": [["company_id", "at"]],
}


def connect(path: str) -> sqlite_utils.Database:
    """Open the sandbox file with WAL, a busy timeout and foreign keys on."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = wal")
    conn.execute("PRAGMA foreign_keys = on")
    return sqlite_utils.Database(conn)


@contextlib.contextmanager
def write_transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """Run a block in BEGIN IMMEDIATE so concurrent writers queue instead of failing."""
    db.conn.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.conn.rollback()
        raise
    db.conn.commit()


def ensure_schema(db: sqlite_utils.Database) -> None:
    """Create every sandbox table and index that does not exist yet."""
    with write_transaction(db):
        for name, (columns, pk) in _SCHEMA.items():
            db.table(name).create(columns, pk=pk, if_not_exists=True)
        for name, indexes in _INDEXES.items():
            for index_columns in indexes:
                db.table(name).create_index(index_columns, if_not_exists=True)
        db.execute("INSERT OR IGNORE INTO id_sequence (name, value) VALUES ('global', ?)",
                   [ID_BASE])
        for name, (columns, _pk) in _SCHEMA.items():
            present = set(db.table(name).columns_dict)
            for column, kind in columns.items():
                if column not in present:  # a file made by an older sandbox
                    sql_type = {int: "INTEGER", float: "FLOAT"}.get(kind, "TEXT")
                    db.execute(f"ALTER TABLE [{name}] ADD COLUMN [{column}] {sql_type}")
        # One budget code per combination of items, sub job and custom items included.
        db.execute("DROP INDEX IF EXISTS wbs_codes_combination")
        db.table("wbs_codes").create_index(
            ["project_id", "cost_code_item_id", "type_item_id", "extra_item_ids"],
            index_name="wbs_codes_items", unique=True, if_not_exists=True)


def next_id(db: sqlite_utils.Database) -> int:
    """Take the next id from the global counter (call inside a write transaction)."""
    row = db.execute("UPDATE id_sequence SET value = value + 1 WHERE name = 'global' "
                     "RETURNING value").fetchone()
    return int(row[0])


def iso_now() -> str:
    """The current UTC time as Procore writes timestamps, e.g. 2026-06-03T10:15:00Z."""
    return format_timestamp(datetime.now(UTC))


def format_timestamp(moment: datetime) -> str:
    """Format an aware datetime in UTC with second precision and a Z suffix."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
