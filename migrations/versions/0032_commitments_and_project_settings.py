"""a sub's confirmed commitment per project, and how a project's change events are written

Revision ID: 0032
Revises: 0031
Create Date: 2026-11-29 07:00:00

"""
import sqlalchemy as sa
from alembic import op

revision = '0032'
down_revision = '0031'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('project_settings',
    sa.Column('company_id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('event_type', sa.String(length=32), nullable=False),
    sa.Column('change_reason_id', sa.BigInteger(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('updated_by', sa.String(length=300), nullable=True),
    sa.ForeignKeyConstraint(['company_id'], ['companies.id'], name=op.f('fk_project_settings_company_id_companies')),
    sa.PrimaryKeyConstraint('company_id', 'project_id', name=op.f('pk_project_settings'))
    )
    op.create_table('sub_commitments',
    sa.Column('company_id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('sub_key', sa.String(length=120), nullable=False),
    sa.Column('sub', sa.String(length=120), nullable=False),
    sa.Column('contract_id', sa.BigInteger(), nullable=True),
    sa.Column('confirmed_by', sa.String(length=300), nullable=True),
    sa.Column('confirmed_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['company_id'], ['companies.id'], name=op.f('fk_sub_commitments_company_id_companies')),
    sa.PrimaryKeyConstraint('company_id', 'project_id', 'sub_key', name=op.f('pk_sub_commitments'))
    )


def downgrade():
    op.drop_table('sub_commitments')
    op.drop_table('project_settings')
