"""the written record's status read back from the project system

Revision ID: 0033
Revises: 0032
Create Date: 2026-11-29 07:00:00

A written ticket keeps where its change event or daily log entry stands in Procore: its status
name, whether it was deleted there, the change orders its lines are on, and when that was read,
so a ticket written and never billed shows in the queue. Change events written before count as
not on a change order until they are read.
"""
import sqlalchemy as sa
from alembic import op

revision = '0033'
down_revision = '0032'
branch_labels = None
depends_on = None


def upgrade():
    """Add the record_* columns and on_change_order to tickets, with their indexes, and mark
    the written change events as not on a change order yet."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('record_status', sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column('record_deleted', sa.Boolean(), server_default=sa.false(),
                                      nullable=False))
        batch_op.add_column(sa.Column('record_change_orders', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('record_read_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('record_tried_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('on_change_order', sa.Boolean(), nullable=True))
        batch_op.create_index('ix_tickets_company_status_change_order',
                              ['company_id', 'status', 'on_change_order', 'captured_at', 'id',
                               'total'], unique=False)
        batch_op.create_index('ix_tickets_status_record_tried', ['status', 'record_tried_at'],
                              unique=False)
    tickets = sa.table('tickets', sa.column('id', sa.String), sa.column('status', sa.String),
                       sa.column('external', sa.JSON), sa.column('on_change_order', sa.Boolean))
    bind = op.get_bind()
    written = [row.id for row in bind.execute(
        sa.select(tickets.c.id, tickets.c.external).where(tickets.c.status == 'written')).all()
        if (row.external or {}).get('destination') == 'change_event']
    for start in range(0, len(written), 500):
        bind.execute(tickets.update().where(tickets.c.id.in_(written[start:start + 500]))
                     .values(on_change_order=False))


def downgrade():
    """Drop the record_* columns, on_change_order and their indexes."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_index('ix_tickets_status_record_tried')
        batch_op.drop_index('ix_tickets_company_status_change_order')
        batch_op.drop_column('on_change_order')
        batch_op.drop_column('record_tried_at')
        batch_op.drop_column('record_read_at')
        batch_op.drop_column('record_change_orders')
        batch_op.drop_column('record_deleted')
        batch_op.drop_column('record_status')
