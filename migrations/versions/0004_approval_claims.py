"""approval claims

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 10:00:00.000000

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('written_routing', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('approval_claim_id', sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column('approval_claimed_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('approval_destinations', sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_column('approval_destinations')
        batch_op.drop_column('approval_claimed_at')
        batch_op.drop_column('approval_claim_id')
        batch_op.drop_column('written_routing')
