"""storage usage per day, for quotas that survive a restart

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24 06:05:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade():
    """Create storage_usage."""
    op.create_table('storage_usage',
    sa.Column('scope', sa.String(length=16), nullable=False),
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('day', sa.String(length=10), nullable=False),
    sa.Column('bytes', sa.BigInteger(), nullable=False),
    sa.Column('tickets', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('scope', 'key', 'day', name=op.f('pk_storage_usage'))
    )


def downgrade():
    """Drop storage_usage."""
    op.drop_table('storage_usage')
