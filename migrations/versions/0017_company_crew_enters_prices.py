"""a company setting: whether crews see rates, unit costs and cost codes on the capture form

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-24 06:40:00

On by default (as before); a company whose office prices and codes tickets turns it off.
"""
import sqlalchemy as sa
from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade():
    """Add companies.crew_enters_prices (true for every company so far)."""
    op.add_column('companies', sa.Column('crew_enters_prices', sa.Boolean(), nullable=False,
                                         server_default=sa.true()))


def downgrade():
    """Drop companies.crew_enters_prices."""
    with op.batch_alter_table('companies', schema=None) as batch_op:
        batch_op.drop_column('crew_enters_prices')
