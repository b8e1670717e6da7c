"""signature requests and voided signatures

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-24 09:00:00

A ticket can be sent to the general contractor's person to sign from a link; a signature
the ticket's later changes voided is kept beside the current one.
"""
import sqlalchemy as sa
from alembic import op

revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade():
    """Create signature_requests; add tickets.voided_signatures."""
    op.create_table(
        'signature_requests',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True,
                  nullable=False),
        sa.Column('company_id', sa.Integer(), nullable=False),
        sa.Column('ticket_id', sa.String(length=36), nullable=False),
        sa.Column('token_digest', sa.String(length=64), nullable=False),
        sa.Column('token_salt', sa.String(length=64), nullable=False),
        sa.Column('signer_name', sa.String(length=200), nullable=False),
        sa.Column('signer_role', sa.String(length=200), nullable=True),
        sa.Column('email', sa.String(length=254), nullable=True),
        sa.Column('phone', sa.String(length=40), nullable=True),
        sa.Column('created_by', sa.String(length=300), nullable=True),
        sa.Column('link_token', sa.String(length=64), nullable=True),
        sa.Column('base_url', sa.String(length=300), nullable=False),
        sa.Column('time_zone', sa.String(length=64), nullable=False),
        sa.Column('language', sa.String(length=8), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('expires_at', sa.DateTime(), nullable=False),
        sa.Column('revoked_at', sa.DateTime(), nullable=True),
        sa.Column('signed_at', sa.DateTime(), nullable=True),
        sa.Column('emailed_at', sa.DateTime(), nullable=True),
        sa.Column('reminders_sent', sa.Integer(), server_default='0', nullable=False),
        sa.Column('next_reminder_at', sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(['company_id'], ['companies.id'],
                                name='fk_signature_requests_company_id_companies'),
        sa.ForeignKeyConstraint(['ticket_id'], ['tickets.id'],
                                name='fk_signature_requests_ticket_id_tickets'),
        sa.PrimaryKeyConstraint('id', name='pk_signature_requests'),
        sa.UniqueConstraint('token_digest', name='uq_signature_requests_token_digest'),
    )
    op.create_index('ix_signature_requests_company_id', 'signature_requests', ['company_id'])
    op.create_index('ix_signature_requests_ticket', 'signature_requests', ['ticket_id', 'created_at'])
    op.create_index('ix_signature_requests_reminder', 'signature_requests', ['next_reminder_at'])
    # A plain ADD COLUMN: a batch copy of tickets would drop the counting triggers of 0009.
    op.add_column('tickets', sa.Column('voided_signatures', sa.JSON(), nullable=True))


def downgrade():
    """Drop signature_requests and tickets.voided_signatures."""
    with op.batch_alter_table('tickets') as batch:
        batch.drop_column('voided_signatures')
    op.drop_index('ix_signature_requests_reminder', table_name='signature_requests')
    op.drop_index('ix_signature_requests_ticket', table_name='signature_requests')
    op.drop_index('ix_signature_requests_company_id', table_name='signature_requests')
    op.drop_table('signature_requests')
