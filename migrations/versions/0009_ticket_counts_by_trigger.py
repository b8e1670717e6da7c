"""ticket counts kept by the database itself

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24 07:00:00

The per-project, per-status counts behind list totals are moved by triggers on tickets
(below), so every write counts, and every ticket is counted again once here.
Migration 0021 retires them: a list counts its rows.
"""
from alembic import op
from sqlalchemy import text
from sqlalchemy.engine import Connection

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

TRIGGERS = ("tickets_counted_insert", "tickets_counted_delete", "tickets_counted_update")

_SQLITE_ADD = """
    INSERT OR IGNORE INTO ticket_counts (company_id, project_id, status, tickets)
        VALUES (NEW.company_id, NEW.project_id, NEW.status, 0);
    UPDATE ticket_counts SET tickets = tickets + 1
        WHERE company_id = NEW.company_id AND project_id = NEW.project_id AND status = NEW.status;
"""
_SQLITE_TAKE = """
    UPDATE ticket_counts SET tickets = tickets - 1
        WHERE company_id = OLD.company_id AND project_id = OLD.project_id AND status = OLD.status;
"""
SQLITE_TRIGGERS = {
    "tickets_counted_insert": f"AFTER INSERT ON tickets BEGIN {_SQLITE_ADD} END",
    "tickets_counted_delete": f"AFTER DELETE ON tickets BEGIN {_SQLITE_TAKE} END",
    "tickets_counted_update": ("AFTER UPDATE OF company_id, project_id, status ON tickets "
                               f"BEGIN {_SQLITE_TAKE} {_SQLITE_ADD} END"),
}

POSTGRES_FUNCTION = """
CREATE OR REPLACE FUNCTION tickets_counted() RETURNS trigger AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE ticket_counts SET tickets = tickets - 1
            WHERE company_id = OLD.company_id AND project_id = OLD.project_id
              AND status = OLD.status;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        INSERT INTO ticket_counts (company_id, project_id, status, tickets)
            VALUES (NEW.company_id, NEW.project_id, NEW.status, 1)
            ON CONFLICT (company_id, project_id, status)
            DO UPDATE SET tickets = ticket_counts.tickets + 1;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql
"""
POSTGRES_TRIGGERS = {
    "tickets_counted_insert": "AFTER INSERT ON tickets",
    "tickets_counted_delete": "AFTER DELETE ON tickets",
    "tickets_counted_update": "AFTER UPDATE OF company_id, project_id, status ON tickets",
}

RECOUNT = ("INSERT INTO ticket_counts (company_id, project_id, status, tickets) "
           "SELECT company_id, project_id, status, COUNT(*) FROM tickets "
           "GROUP BY company_id, project_id, status")


def _present(connection: Connection) -> set[str]:
    """The names of the counting triggers the tickets table has now."""
    if connection.dialect.name == "postgresql":
        query = ("SELECT tgname FROM pg_trigger "
                 "WHERE tgrelid = 'tickets'::regclass AND NOT tgisinternal")
    else:
        query = "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'tickets'"
    return {name for (name,) in connection.execute(text(query))}


def ensure_count_triggers(connection: Connection) -> bool:
    """Create any missing counting trigger and count every ticket again; True if one was missing."""
    present = _present(connection)
    postgres = connection.dialect.name == "postgresql"
    wanted = POSTGRES_TRIGGERS if postgres else SQLITE_TRIGGERS
    missing = [name for name in wanted if name not in present]
    if not missing:
        return False
    if postgres:
        connection.execute(text(POSTGRES_FUNCTION))
    for name in missing:
        if postgres:
            connection.execute(text(
                f"CREATE TRIGGER {name} {wanted[name]} FOR EACH ROW EXECUTE FUNCTION tickets_counted()"))
        else:
            connection.execute(text(f"CREATE TRIGGER {name} {wanted[name]}"))
    connection.execute(text("DELETE FROM ticket_counts"))
    connection.execute(text(RECOUNT))
    return True


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
