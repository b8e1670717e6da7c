"""whether every change order a written ticket's lines are on is approved

Revision ID: 0034
Revises: 0033
Create Date: 2026-11-29 10:30:00

A written change event whose lines are on change orders is outstanding until each of those
change orders is approved in Procore; the board, the digest and the sub's live log read that
from one column set with the rest of the record's state.
"""
import sqlalchemy as sa
from alembic import op

revision = '0034'
down_revision = '0033'
branch_labels = None
depends_on = None


def _approved(orders) -> bool | None:
    """Whether every change order of a list is approved; None when there are none."""
    if not orders:
        return None
    return all(str((order or {}).get('status') or '').lower() == 'approved' for order in orders)


def upgrade():
    """Add tickets.change_orders_approved and set it from the change orders already read."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('change_orders_approved', sa.Boolean(), nullable=True))
    tickets = sa.table('tickets', sa.column('id', sa.String),
                       sa.column('record_change_orders', sa.JSON),
                       sa.column('change_orders_approved', sa.Boolean))
    bind = op.get_bind()
    rows = bind.execute(sa.select(tickets.c.id, tickets.c.record_change_orders)
                        .where(tickets.c.record_change_orders.is_not(None))).all()
    for ticket_id, orders in rows:
        approved = _approved(orders)
        if approved is not None:
            bind.execute(tickets.update().where(tickets.c.id == ticket_id)
                         .values(change_orders_approved=approved))


def downgrade():
    """Drop tickets.change_orders_approved."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_column('change_orders_approved')
