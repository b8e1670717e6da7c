"""photos that arrive one by one after their ticket

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-24 06:50:00

A phone on one bar sends a ticket's text first and each photo on its own. The ticket
records how many photos are on their way (tickets.photos_expected), and each photo the
phone's own key for it (ticket_photos.client_key), so sending a photo again changes nothing.
"""
import sqlalchemy as sa
from alembic import op

revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade():
    """Add tickets.photos_expected and ticket_photos.client_key (unique per ticket)."""
    op.add_column('tickets', sa.Column('photos_expected', sa.Integer(), nullable=True))
    op.add_column('ticket_photos', sa.Column('client_key', sa.String(64), nullable=True))
    op.create_index('ux_ticket_photos_client_key', 'ticket_photos', ['ticket_id', 'client_key'],
                    unique=True)


def downgrade():
    """Drop them again."""
    op.drop_index('ux_ticket_photos_client_key', table_name='ticket_photos')
    with op.batch_alter_table('ticket_photos', schema=None) as batch_op:
        batch_op.drop_column('client_key')
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_column('photos_expected')
