"""the ticket's list document, kept with the ticket

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22 12:00:00

A list page used to load every ticket with its photos and decisions and shape it again
on each request. The shaped document is now kept in the row, written with every change.
Rows stored before stay NULL here (this migration does not depend on the application's
shapes); the service shows them correctly from their fields, and
`flask tickets fill-summaries`, run by bin/serve and deploy/install.sh after the upgrade,
stores their documents.
"""
import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade():
    """Add tickets.summary_json (NULL until filled)."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('summary_json', sa.Text(), nullable=True))


def downgrade():
    """Drop the kept documents; older code shapes tickets on every read."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_column('summary_json')
