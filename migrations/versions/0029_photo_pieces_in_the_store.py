"""photo pieces wait in the file store, not the database

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-29 02:00:00

Pieces of photos still being sent were rows with their bytes: a link flooded with unfinished
uploads grew the database file, which never shrinks. They are now files of the store
(services/files/photo_uploads.py). Pieces held at the upgrade are dropped: a phone told the server
holds none of its photo (409, offset 0) sends it again from the start.
"""
import sqlalchemy as sa
from alembic import op

revision = '0029'
down_revision = '0028'
branch_labels = None
depends_on = None


def upgrade():
    """Drop photo_pieces."""
    op.drop_index('ix_photo_pieces_company_id', table_name='photo_pieces')
    op.drop_table('photo_pieces')


def downgrade():
    """Create photo_pieces again, empty."""
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
