"""one-time sign-in links by e-mail

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-29 01:30:00

A reviewer locked out by an attack on their account (or on a new browser) asks for a sign-in
link by e-mail. Each link names the reviewer's link epoch; using one raises it, so that link
and every one sent before it stop working.
"""
import sqlalchemy as sa
from alembic import op

revision = '0028'
down_revision = '0027'
branch_labels = None
depends_on = None


def upgrade():
    """Add reviewers.sign_in_link_epoch."""
    with op.batch_alter_table('reviewers', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sign_in_link_epoch', sa.Integer(), nullable=False,
                                      server_default='0'))


def downgrade():
    """Drop reviewers.sign_in_link_epoch."""
    with op.batch_alter_table('reviewers', schema=None) as batch_op:
        batch_op.drop_column('sign_in_link_epoch')
