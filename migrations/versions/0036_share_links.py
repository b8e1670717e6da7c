"""share links: a sub's live log of its tickets, opened with no account

Revision ID: 0036
Revises: 0035
Create Date: 2026-11-29 11:00:00

A PM makes a link for a sub (and optionally one project, and an expiry); its page lists that
sub's tickets and where each stands. Only the SHA-256 digest of the link's token is kept.
"""
import sqlalchemy as sa
from alembic import op

revision = '0036'
down_revision = '0035'
branch_labels = None
depends_on = None


def upgrade():
    """Create share_links."""
    op.create_table(
        'share_links',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('company_id', sa.Integer(), nullable=False),
        sa.Column('sub', sa.String(length=120), nullable=False),
        sa.Column('project_id', sa.String(length=40), nullable=True),
        sa.Column('token_digest', sa.String(length=64), nullable=False),
        sa.Column('expires_at', sa.DateTime(), nullable=True),
        sa.Column('created_by', sa.String(length=300), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('ended_at', sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(['company_id'], ['companies.id'],
                                name=op.f('fk_share_links_company_id_companies')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_share_links')),
        sa.UniqueConstraint('token_digest', name=op.f('uq_share_links_token_digest')),
    )
    op.create_index(op.f('ix_share_links_company_id'), 'share_links', ['company_id'])


def downgrade():
    """Drop share_links."""
    op.drop_index(op.f('ix_share_links_company_id'), table_name='share_links')
    op.drop_table('share_links')
