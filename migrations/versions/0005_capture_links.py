"""capture links and client references

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21 21:10:00

"""
import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('capture_links',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('company_id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('project_name', sa.String(length=200), nullable=False),
    sa.Column('label', sa.String(length=120), nullable=True),
    sa.Column('token', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('revoked_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['company_id'], ['companies.id'], name=op.f('fk_capture_links_company_id_companies')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_capture_links')),
    sa.UniqueConstraint('token', name=op.f('uq_capture_links_token'))
    )
    with op.batch_alter_table('capture_links', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_capture_links_company_id'), ['company_id'], unique=False)

    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('client_ref', sa.String(length=64), nullable=True))
        batch_op.create_unique_constraint('uq_tickets_company_client_ref', ['company_id', 'client_ref'])
        batch_op.create_index('ix_tickets_link_token', ['link_token'], unique=False)
        batch_op.create_index('ix_tickets_company_project_status_captured',
                              ['company_id', 'project_id', 'status', 'captured_at', 'id'], unique=False)


def downgrade():
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_index('ix_tickets_company_project_status_captured')
        batch_op.drop_index('ix_tickets_link_token')
        batch_op.drop_constraint('uq_tickets_company_client_ref', type_='unique')
        batch_op.drop_column('client_ref')
    with op.batch_alter_table('capture_links', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_capture_links_company_id'))
    op.drop_table('capture_links')
