"""the reason given with a decision

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-24 06:30:00

A rejection carries the reviewer's reason, which the crew sees on the phone that sent
the ticket; decisions made before have none.
"""
import sqlalchemy as sa
from alembic import op

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade():
    """Add ticket_decisions.reason."""
    with op.batch_alter_table('ticket_decisions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('reason', sa.Text(), nullable=True))


def downgrade():
    """Drop the reasons."""
    with op.batch_alter_table('ticket_decisions', schema=None) as batch_op:
        batch_op.drop_column('reason')
