"""markups per project: overhead, profit, bond, insurance and tax, with their budget codes

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24 06:40:00

"""
import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('project_markups',
    sa.Column('company_id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('markups', sa.JSON(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('updated_by', sa.String(length=300), nullable=True),
    sa.ForeignKeyConstraint(['company_id'], ['companies.id'], name=op.f('fk_project_markups_company_id_companies')),
    sa.PrimaryKeyConstraint('company_id', 'project_id', name=op.f('pk_project_markups'))
    )


def downgrade():
    op.drop_table('project_markups')
