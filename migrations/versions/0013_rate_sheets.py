"""rate sheets per project or company, and the day a ticket's work was done

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-24 06:20:00

"""
import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('rate_sheets',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('company_id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=True),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('effective_from', sa.Date(), nullable=False),
    sa.Column('material_markup', sa.String(length=24), nullable=False),
    sa.Column('labor', sa.JSON(), nullable=False),
    sa.Column('equipment', sa.JSON(), nullable=False),
    sa.Column('materials', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['company_id'], ['companies.id'], name=op.f('fk_rate_sheets_company_id_companies')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rate_sheets'))
    )
    with op.batch_alter_table('rate_sheets', schema=None) as batch_op:
        batch_op.create_index('ix_rate_sheets_company_project_effective',
                              ['company_id', 'project_id', 'effective_from'], unique=False)

    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('worked_on', sa.Date(), nullable=True))


def downgrade():
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_column('worked_on')
    with op.batch_alter_table('rate_sheets', schema=None) as batch_op:
        batch_op.drop_index('ix_rate_sheets_company_project_effective')
    op.drop_table('rate_sheets')
