"""project system connections

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 21:40:00

"""
import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('project_system_connections',
    sa.Column('company_id', sa.Integer(), nullable=False),
    sa.Column('environment', sa.String(length=32), nullable=False),
    sa.Column('api_base', sa.String(length=300), nullable=True),
    sa.Column('oauth_base', sa.String(length=300), nullable=True),
    sa.Column('web_base', sa.String(length=300), nullable=True),
    sa.Column('client_id', sa.String(length=300), nullable=False),
    sa.Column('client_secret', sa.String(length=300), nullable=False),
    sa.Column('remote_company_id', sa.BigInteger(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('last_status', sa.String(length=40), nullable=True),
    sa.Column('last_checked_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['company_id'], ['companies.id'], name=op.f('fk_project_system_connections_company_id_companies')),
    sa.PrimaryKeyConstraint('company_id', name=op.f('pk_project_system_connections'))
    )


def downgrade():
    op.drop_table('project_system_connections')
