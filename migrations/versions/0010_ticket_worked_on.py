"""the day the extra work was done, apart from when the ticket was sent

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24 06:30:00

A ticket written on Friday and sent on Monday keeps Friday for its daily log entry.
Empty for tickets from before: their day is the jobsite's date when they were captured.
"""
from alembic import op
import sqlalchemy as sa


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade():
    """Add tickets.worked_on (a date, optional)."""
    op.add_column('tickets', sa.Column('worked_on', sa.Date(), nullable=True))


def downgrade():
    """Drop tickets.worked_on."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_column('worked_on')
