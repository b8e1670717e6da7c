"""ticket counts kept by the database itself

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24 07:00:00

The per-project, per-status counts behind list totals are moved by triggers on tickets
(models/counts.py), so every write counts, and every ticket is counted again once here.
The migrations' environment puts the triggers back after any later upgrade that rebuilt
the tickets table.
"""
from alembic import op

from models.counts import ensure_count_triggers


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

TRIGGERS = ("tickets_counted_insert", "tickets_counted_delete", "tickets_counted_update")


def upgrade():
    """Create the counting triggers and count every ticket again."""
    ensure_count_triggers(op.get_bind())


def downgrade():
    """Drop the triggers; older code moves the counts itself."""
    postgres = op.get_bind().dialect.name == "postgresql"
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}" + (" ON tickets" if postgres else ""))
    if postgres:
        op.execute("DROP FUNCTION IF EXISTS tickets_counted()")
