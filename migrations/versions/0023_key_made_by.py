"""the reviewer who made each program key

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28 02:00:00

A key made on the /keys page names the reviewer who made it, so disabling that reviewer can
revoke it; keys made before, or on the command line, name no one.
"""
import sqlalchemy as sa
from alembic import op

revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None


def upgrade():
    """Add api_keys.created_by_id (a reviewer, or null for the command line)."""
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.add_column(sa.Column('created_by_id', sa.Integer(), nullable=True))
        batch_op.create_foreign_key(op.f('fk_api_keys_created_by_id_reviewers'), 'reviewers',
                                    ['created_by_id'], ['id'])
        batch_op.create_index('ix_api_keys_created_by_id', ['created_by_id'], unique=False)


def downgrade():
    """Drop api_keys.created_by_id."""
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_index('ix_api_keys_created_by_id')
        batch_op.drop_constraint(op.f('fk_api_keys_created_by_id_reviewers'), type_='foreignkey')
        batch_op.drop_column('created_by_id')
