"""drop the kept list document of tickets

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24 06:00:00

Tickets are shaped from their columns on every read, so the rendered copy goes.
"""
import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade():
    """Drop tickets.summary_json."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_column('summary_json')


def downgrade():
    """Add the column back, empty."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('summary_json', sa.Text(), nullable=True))
