"""webhook endpoints, their outbox of deliveries, and delivery attempts

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-29 02:30:00

Programs register endpoints that are sent signed ticket events. Each event is stored as a
delivery in the transaction of the change that caused it, and a worker sends it
(services/webhooks/webhook_delivery.py), keeping every attempt.
"""
import sqlalchemy as sa
from alembic import op

revision = '0031'
down_revision = '0030'
branch_labels = None
depends_on = None


def upgrade():
    """Create webhook_endpoints, webhook_deliveries and webhook_attempts."""
    op.create_table(
        'webhook_endpoints',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('company_id', sa.Integer(), nullable=False),
        sa.Column('url', sa.String(length=2000), nullable=False),
        sa.Column('description', sa.String(length=200), nullable=True),
        sa.Column('events', sa.JSON(), nullable=False),
        sa.Column('secret', sa.String(length=100), nullable=False),
        sa.Column('previous_secret', sa.String(length=100), nullable=True),
        sa.Column('previous_secret_expires_at', sa.DateTime(), nullable=True),
        sa.Column('enabled', sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column('disabled_reason', sa.String(length=200), nullable=True),
        sa.Column('failing_since', sa.DateTime(), nullable=True),
        sa.Column('claim_id', sa.String(length=36), nullable=True),
        sa.Column('claimed_until', sa.DateTime(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['company_id'], ['companies.id'],
                                name=op.f('fk_webhook_endpoints_company_id_companies')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_endpoints')),
    )
    op.create_index(op.f('ix_webhook_endpoints_company_id'), 'webhook_endpoints', ['company_id'])
    op.create_index(op.f('ix_webhook_endpoints_claimed_until'), 'webhook_endpoints',
                    ['claimed_until'])
    op.create_table(
        'webhook_deliveries',
        sa.Column('id', sa.String(length=40), nullable=False),
        sa.Column('company_id', sa.Integer(), nullable=False),
        sa.Column('endpoint_id', sa.Integer(), nullable=False),
        sa.Column('event_type', sa.String(length=40), nullable=False),
        sa.Column('ticket_id', sa.String(length=36), nullable=True),
        sa.Column('payload', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('next_attempt_at', sa.DateTime(), nullable=True),
        sa.Column('attempt_count', sa.Integer(), server_default='0', nullable=False),
        sa.Column('first_tried_at', sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(['company_id'], ['companies.id'],
                                name=op.f('fk_webhook_deliveries_company_id_companies')),
        sa.ForeignKeyConstraint(['endpoint_id'], ['webhook_endpoints.id'], ondelete='CASCADE',
                                name=op.f('fk_webhook_deliveries_endpoint_id_webhook_endpoints')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_deliveries')),
    )
    for column in ('company_id', 'endpoint_id', 'created_at', 'next_attempt_at'):
        op.create_index(op.f(f'ix_webhook_deliveries_{column}'), 'webhook_deliveries', [column])
    op.create_table(
        'webhook_attempts',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('delivery_id', sa.String(length=40), nullable=False),
        sa.Column('attempted_at', sa.DateTime(), nullable=False),
        sa.Column('status_code', sa.Integer(), nullable=True),
        sa.Column('duration_ms', sa.Integer(), nullable=False),
        sa.Column('ok', sa.Boolean(), nullable=False),
        sa.Column('error', sa.String(length=300), nullable=True),
        sa.ForeignKeyConstraint(['delivery_id'], ['webhook_deliveries.id'], ondelete='CASCADE',
                                name=op.f('fk_webhook_attempts_delivery_id_webhook_deliveries')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_attempts')),
    )
    op.create_index(op.f('ix_webhook_attempts_delivery_id'), 'webhook_attempts', ['delivery_id'])
    op.create_index(op.f('ix_webhook_attempts_attempted_at'), 'webhook_attempts', ['attempted_at'])


def downgrade():
    """Drop the webhook tables."""
    op.drop_table('webhook_attempts')
    op.drop_table('webhook_deliveries')
    op.drop_table('webhook_endpoints')
