"""reviewer session epochs, disabling and company admins

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24 06:00:00

A reviewer's sessions carry the reviewer's session epoch; raising it (sign-out,
password reset, disabling) ends every session at once.
"""
import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade():
    """Add reviewers.session_epoch, reviewers.disabled_at and reviewers.is_admin."""
    with op.batch_alter_table('reviewers', schema=None) as batch_op:
        batch_op.add_column(sa.Column('session_epoch', sa.Integer(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('disabled_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('is_admin', sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade():
    """Drop the three columns."""
    with op.batch_alter_table('reviewers', schema=None) as batch_op:
        batch_op.drop_column('is_admin')
        batch_op.drop_column('disabled_at')
        batch_op.drop_column('session_epoch')
