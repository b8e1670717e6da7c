"""routing decisions, and the sub a ticket came from

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28 01:00:00

Every written line's final budget code is kept with what the line said, so routing can learn
from the PM's own choices; the tickets already written are taken in here. A ticket names its
sub or crew: the capture link's label for the tickets that came through one.
"""
import sqlalchemy as sa
from alembic import op

revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None

# Cost type codes a default budget code ends with ("02-200.L"): what is left is the cost code.
TYPE_CODES = {"L", "E", "M", "O", "S", "SVC", "OC"}


def _said(line):
    """What a stored line said: labor its trade and classification, else its description."""
    parts = [line.get("trade"), line.get("classification")] if line.get("kind") == "labor" \
        else [line.get("description")]
    return " ".join(dict.fromkeys(p.strip() for p in parts if isinstance(p, str) and p.strip()))


def _cost_code(flat):
    """The cost code of a budget code's text, as far as its text tells."""
    for separator in (".", "/"):
        head, _, tail = flat.rpartition(separator)
        if head and tail in TYPE_CODES:
            return head
    return flat


def upgrade():
    """Add tickets.sub (from capture links' labels) and routing_decisions (from written tickets)."""
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sub', sa.String(length=120), nullable=True))
        batch_op.create_index('ix_tickets_company_sub', ['company_id', 'sub'], unique=False)
    op.execute("UPDATE tickets SET sub = (SELECT label FROM capture_links "
               "WHERE capture_links.token = tickets.link_token) WHERE link_token IS NOT NULL")
    decisions = op.create_table(
        'routing_decisions',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True,
                  nullable=False),
        sa.Column('company_id', sa.Integer(), nullable=False),
        sa.Column('project_id', sa.String(length=40), nullable=False),
        sa.Column('ticket_id', sa.String(length=36), nullable=False),
        sa.Column('line', sa.Integer(), nullable=False),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('text', sa.String(length=300), nullable=False),
        sa.Column('description', sa.Text(), nullable=False),
        sa.Column('sub', sa.String(length=120), nullable=True),
        sa.Column('crew_cost_code', sa.String(length=60), nullable=True),
        sa.Column('cost_code', sa.String(length=60), nullable=False),
        sa.Column('cost_type', sa.String(length=32), nullable=False),
        sa.Column('budget_code_id', sa.BigInteger(), nullable=True),
        sa.Column('budget_code', sa.String(length=100), nullable=False),
        sa.Column('how', sa.String(length=16), nullable=False),
        sa.Column('decided_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['company_id'], ['companies.id'],
                                name=op.f('fk_routing_decisions_company_id_companies')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_routing_decisions')))
    op.create_index('ix_routing_decisions_company_id', 'routing_decisions', ['company_id', 'id'],
                    unique=False)
    tickets = sa.table(
        'tickets', sa.column('id', sa.String()), sa.column('company_id', sa.Integer()),
        sa.column('project_id', sa.String()), sa.column('status', sa.String()),
        sa.column('description', sa.Text()), sa.column('sub', sa.String()),
        sa.column('lines', sa.JSON()), sa.column('written_routing', sa.JSON()),
        sa.column('approved_at', sa.DateTime()), sa.column('captured_at', sa.DateTime()))
    written = op.get_bind().execute(
        sa.select(tickets).where(tickets.c.status == 'written',
                                 tickets.c.written_routing.is_not(None))
        .order_by(tickets.c.approved_at, tickets.c.id))
    rows = []
    for ticket in written:
        lines = ticket.lines or []
        for route in ticket.written_routing or []:
            index = route.get("line")
            if route.get("kind") == "markup" or not route.get("budget_code") \
                    or not isinstance(index, int) or index >= len(lines):
                continue
            line, said = lines[index], _said(lines[index])
            if not said:
                continue
            crew_code = (line.get("costCode") or "").strip() or None
            rows.append({
                "company_id": ticket.company_id, "project_id": ticket.project_id,
                "ticket_id": ticket.id, "line": index, "kind": line["kind"], "text": said[:300],
                "description": ticket.description or "", "sub": ticket.sub,
                "crew_cost_code": crew_code[:60] if crew_code else None,
                "cost_code": _cost_code(route["budget_code"])[:60],
                "cost_type": route.get("cost_type") or "other",
                "budget_code_id": route.get("budget_code_id"),
                "budget_code": route["budget_code"][:100],
                "how": "crew_code" if crew_code and route.get("exact") else "chosen",
                "decided_at": ticket.approved_at or ticket.captured_at})
    if rows:
        op.bulk_insert(decisions, rows)


def downgrade():
    """Drop them again."""
    op.drop_index('ix_routing_decisions_company_id', table_name='routing_decisions')
    op.drop_table('routing_decisions')
    with op.batch_alter_table('tickets', schema=None) as batch_op:
        batch_op.drop_index('ix_tickets_company_sub')
        batch_op.drop_column('sub')
