"""an authorization's reference is unique per project whatever its case

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28 05:00:00

References are looked up without regard to case ('cd-014' finds 'CD-014'), so they are unique
that way too: a unique index on lower(reference) replaces the unique constraint on the text as
written. References that only a concurrent create could have made twice (differing in case
alone) keep the first as it is; each later one gets its id appended, e.g. 'cd-014 (7)'.
Tickets count against an authorization by its id, so none changes what it counts against.
"""
import sqlalchemy as sa
from alembic import op

revision = '0026'
down_revision = '0025'
branch_labels = None
depends_on = None

OLD = 'uq_authorizations_company_project_reference'
NEW = 'uq_authorizations_company_project_lower_reference'


def _rename_duplicates(connection):
    """Give every reference that repeats another's (ignoring case) its id as a suffix."""
    rows = connection.execute(sa.text(
        "SELECT id, company_id, project_id, reference FROM authorizations ORDER BY id")).all()
    seen = set()
    for row_id, company_id, project_id, reference in rows:
        key = (company_id, project_id, reference.lower())
        if key in seen:
            suffix = f" ({row_id})"
            connection.execute(sa.text("UPDATE authorizations SET reference = :reference WHERE id = :id"),
                               {"reference": reference[:60 - len(suffix)] + suffix, "id": row_id})
        seen.add(key)


def upgrade():
    """Replace the case-sensitive unique constraint with a unique index on lower(reference)."""
    _rename_duplicates(op.get_bind())
    with op.batch_alter_table('authorizations', schema=None) as batch_op:
        batch_op.drop_constraint(OLD, type_='unique')
    op.create_index(NEW, 'authorizations', ['company_id', 'project_id', sa.text('lower(reference)')],
                    unique=True)


def downgrade():
    """Back to the unique constraint on the reference as written (which the index implies)."""
    op.drop_index(NEW, table_name='authorizations')
    with op.batch_alter_table('authorizations', schema=None) as batch_op:
        batch_op.create_unique_constraint(OLD, ['company_id', 'project_id', 'reference'])
