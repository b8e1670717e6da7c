"""ticket counts kept by the database itself

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24 07:00:00

The per-project, per-status counts behind list totals are moved by triggers on tickets,
so every write counts (the service, a bulk update, a SQL shell, a restore script), and
they are counted again from the tickets once here.
"""
from alembic import op


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

# SQLite: one trigger per change; each adds or takes one from a (company, project, status).
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
    "tickets_counted_update": (
        "AFTER UPDATE OF company_id, project_id, status ON tickets "
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


def upgrade():
    """Create the counting triggers and count every ticket again."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POSTGRES_FUNCTION)
        for name, when in POSTGRES_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {when} FOR EACH ROW EXECUTE FUNCTION tickets_counted()")
    else:
        for name, body in SQLITE_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {body}")
    op.execute("DELETE FROM ticket_counts")
    op.execute("INSERT INTO ticket_counts (company_id, project_id, status, tickets) "
               "SELECT company_id, project_id, status, COUNT(*) FROM tickets "
               "GROUP BY company_id, project_id, status")


def downgrade():
    """Drop the triggers; older code moves the counts itself."""
    for name in SQLITE_TRIGGERS:
        if op.get_bind().dialect.name == "postgresql":
            op.execute(f"DROP TRIGGER IF EXISTS {name} ON tickets")
        else:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS tickets_counted()")
