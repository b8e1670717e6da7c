"""pieces of photos sent in pieces

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28 05:00:00

A photo may come in pieces (Content-Range), so a dropped signal costs only the piece on its
way; the pieces wait here until the last one comes and the photo is checked and stored whole.
"""
import sqlalchemy as sa
from alembic import op

revision = '0025'
down_revision = '0024'
branch_labels = None
depends_on = None


def upgrade():
    """Create photo_pieces."""
    op.create_table(
        'photo_pieces',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('company_id', sa.Integer(), nullable=False),
        sa.Column('upload', sa.String(length=200), nullable=False),
        sa.Column('total', sa.Integer(), nullable=False),
        sa.Column('start', sa.Integer(), nullable=False),
        sa.Column('data', sa.LargeBinary(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['company_id'], ['companies.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('upload', 'start', name='uq_photo_pieces_start'),
    )
    op.create_index('ix_photo_pieces_company_id', 'photo_pieces', ['company_id'], unique=False)


def downgrade():
    """Drop photo_pieces."""
    op.drop_index('ix_photo_pieces_company_id', table_name='photo_pieces')
    op.drop_table('photo_pieces')
