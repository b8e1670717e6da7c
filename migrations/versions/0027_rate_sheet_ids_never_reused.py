"""a deleted rate sheet's id never names another sheet

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28 06:00:00

Rate sheets are the one thing the API deletes. SQLite gives a new row the highest id plus one,
so a sheet made after the newest one was deleted took that sheet's id, and an address a program
kept for the deleted sheet read the new one. AUTOINCREMENT keeps every id once; PostgreSQL's
sequences already do.
"""
from alembic import op

revision = '0027'
down_revision = '0026'
branch_labels = None
depends_on = None


def upgrade():
    """Rebuild rate_sheets with AUTOINCREMENT on SQLite."""
    if op.get_bind().dialect.name == 'sqlite':
        with op.batch_alter_table('rate_sheets', recreate='always',
                                  table_kwargs={'sqlite_autoincrement': True}):
            pass


def downgrade():
    """Rebuild rate_sheets without AUTOINCREMENT on SQLite."""
    if op.get_bind().dialect.name == 'sqlite':
        with op.batch_alter_table('rate_sheets', recreate='always',
                                  table_kwargs={'sqlite_autoincrement': False}):
            pass
