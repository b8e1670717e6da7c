"""A change event's money past the event: each item's vendor and commitment, the commitment and
prime change orders its lines are on, and how Procore shows them on the event (v1.1 and v1.0).

Holds no routes: the REST detail (change_events.py) and the control switch that puts lines on
change orders (control.py) both use it.
"""
from __future__ import annotations

from typing import Any

import sqlite_utils

from sandbox.common import ApiError
from sandbox.store import iso_now, next_id, write_transaction

KINDS = ("commitment", "prime")
# The words Procore lists change orders under (lower case, as its API answers them).
STATUSES = ("draft", "pending", "approved", "rejected", "void")
CONTRACT_TYPES = {"work_order": "work_order_contract", "purchase_order": "purchase_order_contract"}


def vendors_by_id(db: sqlite_utils.Database, ids: set[int]) -> dict[int, dict[str, Any]]:
    """Vendor rows by id."""
    if not ids:
        return {}
    marks = ", ".join("?" for _ in ids)
    return {row["id"]: row for row in db.query(f"SELECT * FROM vendors WHERE id IN ({marks})",
                                               list(ids))}


def commitments_by_id(db: sqlite_utils.Database, ids: set[int]) -> dict[int, dict[str, Any]]:
    """Commitment rows by id."""
    if not ids:
        return {}
    marks = ", ".join("?" for _ in ids)
    return {row["id"]: row for row in db.query(
        f"SELECT * FROM commitments WHERE id IN ({marks})", list(ids))}


def change_orders_by_id(db: sqlite_utils.Database, event_id: int) -> dict[int, dict[str, Any]]:
    """The change orders made from one change event, by id."""
    return {row["id"]: row for row in db.query(
        "SELECT * FROM change_orders WHERE change_event_id = ? ORDER BY id", [event_id])}


class Parties:
    """The vendors, commitments and change orders a change event's items refer to, read once."""

    def __init__(self, db: sqlite_utils.Database, event: dict[str, Any],
                 items: list[dict[str, Any]]) -> None:
        """Read every vendor, commitment and change order the items name."""
        self.vendors = vendors_by_id(db, {item["vendor_id"] for item in items
                                          if item.get("vendor_id")})
        self.contracts = commitments_by_id(db, {item["contract_id"] for item in items
                                                if item.get("contract_id")})
        self.orders = change_orders_by_id(db, event["id"])

    def vendor(self, item: dict[str, Any]) -> dict[str, Any] | None:
        """The item's vendor as {id, name}, or None."""
        row = self.vendors.get(item.get("vendor_id") or 0)
        return None if row is None else {"id": row["id"], "name": row["name"]}

    def contract(self, item: dict[str, Any]) -> dict[str, Any] | None:
        """The item's commitment as the v1.1 detail shows it, or None."""
        row = self.contracts.get(item.get("contract_id") or 0)
        if row is None:
            return None
        return {"id": row["id"], "contract_type": CONTRACT_TYPES[row["kind"]],
                "number": row["number"], "status": row["status"], "title": row["title"]}

    def order(self, item: dict[str, Any], kind: str) -> dict[str, Any] | None:
        """The commitment or prime change order the item is on, or None."""
        return self.orders.get(item.get(f"{kind}_co_id") or 0)

    def cost_impact(self, item: dict[str, Any]) -> dict[str, Any]:
        """cost_impact's vendor, contract and commitment (the commitment change order)."""
        contract = self.contract(item)
        order = self.order(item, "commitment")
        commitment = None
        if order is not None and contract is not None:
            commitment = {"id": order["id"], "contract_type": contract["contract_type"],
                          "number": order["number"], "status": order["status"],
                          "title": order["title"], "type": "potential_change_order"}
        vendor = self.vendor(item)
        return {"vendor": None if vendor is None else {"proposed": vendor, "confirmed": None},
                "contract": None if contract is None else {"proposed": contract,
                                                           "confirmed": None},
                "commitment": commitment}

    def prime_change_order(self, item: dict[str, Any]) -> dict[str, Any] | None:
        """revenue_impact.change_order: the prime change order the item is on, or None."""
        order = self.order(item, "prime")
        if order is None:
            return None
        return {"id": order["id"], "contract_id": order["contract_id"],
                "number": order["number"], "status": order["status"],
                "title": order["title"], "type": "potential_change_order"}

    def v10_fields(self, item: dict[str, Any]) -> dict[str, Any]:
        """A v1.0 line item's vendor, contract, proposed ids and change-order statuses."""
        contract = self.contracts.get(item.get("contract_id") or 0)
        commitment, prime = self.order(item, "commitment"), self.order(item, "prime")
        return {
            "proposed_vendor_id": item.get("vendor_id"),
            "proposed_contract_id": item.get("contract_id"),
            "vendor": self.vendor(item),
            "contract": None if contract is None else {
                "id": contract["id"], "number": contract["number"], "title": contract["title"],
                "name": contract["title"]},
            "commitment_pco_cost": item["amount"] if commitment else None,
            "prime_pco_cost": item["amount"] if prime else None,
            "statuses": {"commitment_pco_cost": commitment["status"] if commitment else None,
                         "prime_pco_cost": prime["status"] if prime else None},
        }

    def v10_orders(self, kind: str) -> list[dict[str, Any]]:
        """The event's commitment or prime change orders as the v1.0 detail lists them."""
        return [{"id": row["id"], "number": row["number"], "title": row["title"],
                 "status": row["status"], "executed": row["status"] == "approved",
                 "contract_id": row["contract_id"]}
                for row in self.orders.values() if row["kind"] == kind]


def put_on_change_orders(db: sqlite_utils.Database, event: dict[str, Any], kind: str,
                         status: str, title: str | None) -> list[dict[str, Any]]:
    """Put the event's lines on change orders of ``kind`` with ``status``, as a PM does."""
    # "commitment": one per commitment its lines are proposed on (lines without one stay off);
    # "prime": one for every line. A line already on one keeps it, which takes the new status;
    # 422 when no line can go on one.
    items = list(db.query("SELECT * FROM change_items WHERE change_event_id = ? "
                          "ORDER BY position", [event["id"]]))
    column = f"{kind}_co_id"
    groups: dict[int | None, list[dict[str, Any]]] = {}
    for item in items:
        if kind == "prime" or item["contract_id"]:
            groups.setdefault(item["contract_id"] if kind == "commitment" else None,
                              []).append(item)
    if not groups:
        raise ApiError(422, "No line of this change event is proposed on a commitment",
                       {"kind": ["no line has a commitment"]})
    now = iso_now()
    orders = []
    with write_transaction(db):
        for contract_id, lines in groups.items():
            order_id = next((line[column] for line in lines if line[column]), None)
            if order_id is None:
                order_id = next_id(db)
                taken = db.execute("SELECT count(*) FROM change_orders WHERE project_id = ? AND "
                                   "kind = ?", [event["project_id"], kind]).fetchone()[0]
                prefix = "CCO" if kind == "commitment" else "PCO"
                db.table("change_orders").insert({
                    "id": order_id, "project_id": event["project_id"],
                    "change_event_id": event["id"], "kind": kind, "contract_id": contract_id,
                    "number": f"{prefix}-{taken + 1:03d}",
                    "title": title or f"{event['number']} {event['title']}".strip(),
                    "status": status, "created_at": now, "updated_at": now})
            else:
                db.table("change_orders").update(order_id, {"status": status, "updated_at": now,
                                                            **({"title": title} if title else {})})
            for line in lines:
                db.table("change_items").update(line["id"], {column: order_id, "updated_at": now})
            orders.append(db.table("change_orders").get(order_id))
    return [{"id": row["id"], "kind": row["kind"], "number": row["number"], "title": row["title"],
             "status": row["status"], "contract_id": row["contract_id"]} for row in orders]
