"""the morning digest: each reviewer's choice and the day it was last sent; the company's clock

Revision ID: 0035
Revises: 0034
Create Date: 2026-11-29 11:00:00

Each reviewer gets a morning e-mail of what waits for them unless they turned it off; the date
it was last sent on is claimed before it goes, so a timer running every 15 minutes, or twice at
once, sends it once a day. The company keeps the time zone most of its projects name, as last
read, so its mornings are known while Procore is away.
"""
import sqlalchemy as sa
from alembic import op

revision = '0035'
down_revision = '0034'
branch_labels = None
depends_on = None


def upgrade():
    """Add reviewers.digest_off and reviewers.digest_sent_on, and companies.time_zone."""
    with op.batch_alter_table('reviewers', schema=None) as batch_op:
        batch_op.add_column(sa.Column('digest_off', sa.Boolean(), server_default=sa.false(),
                                      nullable=False))
        batch_op.add_column(sa.Column('digest_sent_on', sa.Date(), nullable=True))
    with op.batch_alter_table('companies', schema=None) as batch_op:
        batch_op.add_column(sa.Column('time_zone', sa.String(length=64), nullable=True))


def downgrade():
    """Drop the digest's columns."""
    with op.batch_alter_table('companies', schema=None) as batch_op:
        batch_op.drop_column('time_zone')
    with op.batch_alter_table('reviewers', schema=None) as batch_op:
        batch_op.drop_column('digest_sent_on')
        batch_op.drop_column('digest_off')
