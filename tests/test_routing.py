"""Routing rules (a) to (d), indexes and reasons, on a hand-built catalog."""
from __future__ import annotations

from decimal import Decimal

from services.project_system import BudgetCode, CostCode
from services.routing.routing import Router

COST_CODES = [
    CostCode(id=11, code="02-200", name="Site Earthwork"),
    CostCode(id=12, code="22-100", name="Plumbing"),
    CostCode(id=13, code="03-300", name="Cast-in-Place Concrete"),
    CostCode(id=14, code="09-250", name="Gypsum Board"),
]
BUDGET_CODES = [
    BudgetCode(id=101, flat_code="02-200.L", description="", cost_code_id=11, cost_type="labor"),
    BudgetCode(id=102, flat_code="02-200.E", description="", cost_code_id=11, cost_type="equipment"),
    BudgetCode(id=103, flat_code="22-100.O", description="", cost_code_id=12, cost_type="other"),
    BudgetCode(id=104, flat_code="22-100.M", description="", cost_code_id=12, cost_type="materials"),
    BudgetCode(id=105, flat_code="03-300.M", description="", cost_code_id=13, cost_type="materials"),
]


def labor(trade, cost_code=None, amount="100.00"):
    return {"kind": "labor", "trade": trade, "hours": "4", "workers": "2", "rate": "12.5",
            "costCode": cost_code, "amount": amount}


def material(description, cost_code=None):
    return {"kind": "materials", "description": description, "quantity": "3", "unitCost": "2",
            "costCode": cost_code, "amount": "6.00"}


def equipment(description, cost_code=None):
    return {"kind": "equipment", "description": description, "hours": "2", "rate": "50",
            "costCode": cost_code, "amount": "100.00"}


def test_each_rule_of_routing():
    router = Router(COST_CODES, BUDGET_CODES)
    routes = router.route_all([
        labor("Laborer", "02-200"),          # (a) exact
        labor("Plumber", "22-100"),          # (b) falls back to 22-100's other code
        labor("Drywall hanger", "09-250"),   # (b) no labor and no other code: unrouted
        labor("Plumber"),                    # (c) trade matches "Plumbing"
        equipment("Mini excavator", "02 200"),  # (a) separators ignored in the code
        material("Concrete patch mix", "99-999"),  # (c) unknown code, description matches
        material("Gizmo"),                   # (d) nothing
    ])
    assert [r.line for r in routes] == list(range(7))
    a, b, b_none, c, a_eq, c_unknown, d = routes
    assert (a.budget_code.id, a.exact, a.needs_review, a.cost_type) == (101, True, False, "labor")
    assert (b.budget_code.id, b.exact, b.needs_review) == (103, False, True)
    assert "no labor budget code" in b.reason
    assert (b_none.budget_code, b_none.routed, b_none.exact, b_none.needs_review) == \
        (None, False, False, True)
    assert (c.budget_code.id, c.exact, c.needs_review) == (103, False, True)  # 22-100 has no labor: other
    assert "Plumbing" in c.reason
    assert (a_eq.budget_code.id, a_eq.exact, a_eq.cost_type) == (102, True, "equipment")
    assert (c_unknown.budget_code.id, c_unknown.exact, c_unknown.needs_review) == (105, False, True)
    assert "'99-999' is not on this project" in c_unknown.reason
    assert (d.budget_code, d.routed, d.needs_review) == (None, False, True)
    assert d.reason


def test_quantity_and_unit_cost_per_kind():
    router = Router(COST_CODES, BUDGET_CODES)
    lab, eq, mat = router.route_all([labor("Laborer", "02-200"), equipment("Loader"), material("Pipe")])
    assert (lab.quantity, lab.unit_cost, lab.amount) == (Decimal("8"), Decimal("12.5"), Decimal("100.00"))
    assert (eq.quantity, eq.unit_cost) == (Decimal("2"), Decimal("50"))
    assert (mat.quantity, mat.unit_cost) == (Decimal("3"), Decimal("2"))
    assert lab.description == "Laborer — 2 × 4 h"
