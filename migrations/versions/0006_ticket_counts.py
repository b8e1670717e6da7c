"""ticket counts per company, project and status

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22 09:00:00

Ticket lists give a total; counting the rows on every page grows with the company's
tickets. The counts are kept with every change instead, starting from the tickets there are.
"""
import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade():
    """Create ticket_counts and fill it from the tickets already stored."""
    op.create_table('ticket_counts',
    sa.Column('company_id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('tickets', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['company_id'], ['companies.id'], name=op.f('fk_ticket_counts_company_id_companies')),
    sa.PrimaryKeyConstraint('company_id', 'project_id', 'status', name=op.f('pk_ticket_counts'))
    )
    op.execute("INSERT INTO ticket_counts (company_id, project_id, status, tickets) "
               "SELECT company_id, project_id, status, COUNT(*) FROM tickets "
               "GROUP BY company_id, project_id, status")


def downgrade():
    """Drop the counts; totals are then counted from the tickets again by older code."""
    op.drop_table('ticket_counts')
