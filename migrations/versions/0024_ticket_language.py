"""the language a ticket was written in

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28 05:00:00

A ticket sent through a capture link keeps the language of the crew's page, so its signing
links, their text messages and e-mails default to it; tickets from before, and those a program
sent, have none (English).
"""
import sqlalchemy as sa
from alembic import op

revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None


def upgrade():
    """Add tickets.language ('en', 'es', or null)."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('language', sa.String(length=8), nullable=True))


def downgrade():
    """Drop tickets.language."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_column('language')
