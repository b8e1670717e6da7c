"""not-to-exceed authorizations (GC directives, change-order requests) and tickets against them

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24 07:00:00

"""
import sqlalchemy as sa
from alembic import op

from models.base import Money

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('authorizations',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('company_id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('reference', sa.String(length=60), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('title', sa.String(length=300), nullable=True),
    sa.Column('amount', Money(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['company_id'], ['companies.id'], name=op.f('fk_authorizations_company_id_companies')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_authorizations')),
    sa.UniqueConstraint('company_id', 'project_id', 'reference',
                        name='uq_authorizations_company_project_reference')
    )
    # Plain added columns (no table copy), so the counting triggers on tickets stay in place.
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('authorization_ref', sa.String(length=60), nullable=True))
        batch_op.add_column(sa.Column('authorization_id', sa.Integer(), nullable=True))
    op.create_index('ix_tickets_authorization_id', 'tickets', ['authorization_id'], unique=False)


def downgrade():
    op.drop_index('ix_tickets_authorization_id', table_name='tickets')
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_column('authorization_id')
        batch_op.drop_column('authorization_ref')
    op.drop_table('authorizations')
