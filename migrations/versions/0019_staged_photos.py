"""photos uploaded while their ticket is still being written

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-24 07:00:00

The capture page uploads each photo as it is taken, under the phone's reference for the
ticket it is writing; the ticket takes them when its text arrives.
"""
import sqlalchemy as sa
from alembic import op

revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade():
    """Create staged_photos."""
    op.create_table(
        'staged_photos',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('company_id', sa.Integer(), nullable=False),
        sa.Column('link_token', sa.String(length=64), nullable=False),
        sa.Column('client_ref', sa.String(length=64), nullable=False),
        sa.Column('client_key', sa.String(length=64), nullable=False),
        sa.Column('name', sa.String(length=200), nullable=False),
        sa.Column('taken_at', sa.String(length=40), nullable=True),
        sa.Column('coords', sa.JSON(), nullable=True),
        sa.Column('image_key', sa.String(length=80), nullable=False),
        sa.Column('thumb_key', sa.String(length=80), nullable=False),
        sa.Column('width', sa.Integer(), nullable=False),
        sa.Column('height', sa.Integer(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['company_id'], ['companies.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('link_token', 'client_ref', 'client_key', name='uq_staged_photos_key'),
    )
    op.create_index('ix_staged_photos_company_id', 'staged_photos', ['company_id'], unique=False)


def downgrade():
    """Drop staged_photos."""
    op.drop_index('ix_staged_photos_company_id', table_name='staged_photos')
    op.drop_table('staged_photos')
