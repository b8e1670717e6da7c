"""retire the kept ticket counts and the stored routing-pending mark; list indexes carry the total

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-27 22:00:00

A list counts its rows (a few milliseconds over 100,000 tickets), so the counts kept by
triggers go, with their triggers. Whether a ticket's routing is pending is worked out when
it is read (the project's codes are not known yet), so reading a ticket never writes it.
The list's indexes end with the total, so the queue's sums per age read an index alone, and a
narrow index on company and status answers the list's counts.
"""
import sqlalchemy as sa
from alembic import op

revision = '0021'
down_revision = '0020'
branch_labels = None
depends_on = None

TRIGGERS = ("tickets_counted_insert", "tickets_counted_delete", "tickets_counted_update")
INDEXES = {
    "ix_tickets_company_captured": ["company_id", "captured_at", "id"],
    "ix_tickets_company_status_captured": ["company_id", "status", "captured_at", "id"],
    "ix_tickets_company_project_captured": ["company_id", "project_id", "captured_at", "id"],
    "ix_tickets_company_project_status_captured": ["company_id", "project_id", "status",
                                                   "captured_at", "id"],
}


def upgrade():
    """Drop the counting triggers, ticket_counts and tickets.routing_pending."""
    postgres = op.get_bind().dialect.name == "postgresql"
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}" + (" ON tickets" if postgres else ""))
    if postgres:
        op.execute("DROP FUNCTION IF EXISTS tickets_counted()")
    op.drop_table('ticket_counts')
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_column('routing_pending')
        for name, columns in INDEXES.items():
            batch_op.drop_index(name)
            batch_op.create_index(name, [*columns, 'total'], unique=False)
        batch_op.create_index('ix_tickets_company_status', ['company_id', 'status'], unique=False)


def downgrade():
    """Bring back the column (nothing pending), the indexes without the total, and the counts,
    counted from the tickets."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('routing_pending', sa.Boolean(), nullable=False,
                                      server_default=sa.false()))
        batch_op.drop_index('ix_tickets_company_status')
        for name, columns in INDEXES.items():
            batch_op.drop_index(name)
            batch_op.create_index(name, columns, unique=False)
    op.create_table(
        'ticket_counts',
        sa.Column('company_id', sa.Integer(), nullable=False),
        sa.Column('project_id', sa.String(length=40), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('tickets', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(['company_id'], ['companies.id'],
                                name=op.f('fk_ticket_counts_company_id_companies')),
        sa.PrimaryKeyConstraint('company_id', 'project_id', 'status', name=op.f('pk_ticket_counts')))
    op.execute("INSERT INTO ticket_counts (company_id, project_id, status, tickets) "
               "SELECT company_id, project_id, status, COUNT(*) FROM tickets "
               "GROUP BY company_id, project_id, status")
