"""the words the queue search finds a ticket by: its lines and its sub

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-29 01:00:00

A PM looks for "scissor", "ayudante" or "Sunbelt": what a line said and the sub live in the
lines' JSON and a column the search did not read. tickets.search_words keeps them folded, with
the Spanish and English words for them, so one LIKE finds them on SQLite and PostgreSQL alike;
the tickets already kept are filled in here.
"""
import sqlalchemy as sa
from alembic import op

from services.routing.learned_words import ticket_words

revision = '0030'
down_revision = '0029'
branch_labels = None
depends_on = None


def upgrade():
    """Add tickets.search_words and fill it for every ticket."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('search_words', sa.Text(), nullable=True))
    tickets = sa.table('tickets', sa.column('id', sa.String), sa.column('lines', sa.JSON),
                       sa.column('sub', sa.String), sa.column('search_words', sa.Text))
    bind = op.get_bind()
    rows = bind.execute(sa.select(tickets.c.id, tickets.c.lines, tickets.c.sub)).all()
    for start in range(0, len(rows), 500):
        bind.execute(tickets.update().where(tickets.c.id == sa.bindparam('ticket_id'))
                     .values(search_words=sa.bindparam('words')),
                     [{'ticket_id': row.id, 'words': ticket_words(row.lines, row.sub)}
                      for row in rows[start:start + 500]])


def downgrade():
    """Drop tickets.search_words."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_column('search_words')
