"""known projects, and tickets whose routing is pending

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24 06:20:00

Creating a ticket checks its project against the projects the project system last listed,
so it never waits on the project system; a ticket stored while the codes could not be read
is marked until a read routes it.
"""
import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade():
    """Add known_projects and tickets.routing_pending."""
    op.create_table(
        'known_projects',
        sa.Column('company_id', sa.Integer(), sa.ForeignKey('companies.id'), nullable=False),
        sa.Column('project_id', sa.String(length=40), nullable=False),
        sa.Column('name', sa.String(length=300), nullable=False),
        sa.Column('seen_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('company_id', 'project_id'),
    )
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('routing_pending', sa.Boolean(), nullable=False,
                                      server_default=sa.false()))


def downgrade():
    """Drop them again."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_column('routing_pending')
    op.drop_table('known_projects')
