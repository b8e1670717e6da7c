"""Routing: which budget code each cost line lands on in the project system.

Lines are indexed in the order labor, equipment, materials, from 0. The cost type
comes from the line's kind. A line is exact only when its own cost code has a
budget code of its own cost type; every fallback is flagged for a person.
"""
from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from services.project_system import BudgetCode, CostCode

KIND_COST_TYPE = {"labor": "labor", "equipment": "equipment", "materials": "materials",
                  "markup": "other"}

# What a line said -> the company's suggestion for it (services/routing/learning.py), or None.
Suggester = Callable[[str, str], Any]

_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS = {"and", "the", "of", "for", "with", "to", "in", "on", "a", "an", "at", "by", "per",
               "hours", "hour", "hr", "hrs", "work", "misc", "general", "each", "ea"}
_SUFFIXES = ("ication", "ician", "ical", "ings", "ing", "ers", "er", "ors", "or", "ies", "ry",
             "es", "s", "ed", "al")


@dataclass(frozen=True)
class Route:
    """The routing of one line."""

    line: int
    kind: str
    description: str
    cost_type: str
    quantity: Decimal | None
    unit_cost: Decimal | None
    amount: Decimal
    budget_code: BudgetCode | None
    exact: bool
    needs_review: bool
    reason: str
    # Which rate priced the line and from which rate sheet (LinePricing), when recorded.
    pricing: dict[str, Any] | None = None
    # The budget code is a suggestion from the company's past decisions (services/routing/learning.py).
    learned: bool = False
    # A person pointed the line at its budget code (an approval's `routes`).
    picked: bool = False
    # A learned suggestion drawn from another sub's or crew's decisions: whose.
    learned_from_sub: str | None = None

    @property
    def routed(self) -> bool:
        """Whether the line has a budget code."""
        return self.budget_code is not None


def article(word: str) -> str:
    """'an' before a word that starts with a vowel, else 'a'."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def _stem(word: str) -> str:
    """Cut a common English ending so 'plumber' and 'plumbing' meet at 'plumb'."""
    for suffix in _SUFFIXES:
        if len(word) - len(suffix) >= 4 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _terms(text: str) -> set[str]:
    """Meaningful stemmed words of a text."""
    return {_stem(w) for w in _WORD.findall(text.casefold()) if w not in _STOP_WORDS and len(w) > 2}


def _normal_code(code: str) -> str:
    """Compare cost codes without case, spaces or separators: '02 200' equals '02-200'."""
    return re.sub(r"[\s\-._/]", "", code.casefold())


def _normal_words(text: str) -> str:
    """Text compared without case or repeated spaces."""
    return " ".join(text.split()).casefold()


def said(line: dict[str, Any]) -> str:
    """What a stored line said: labor its trade and classification, else its description."""
    parts = [line.get("trade"), line.get("classification")] if line.get("kind") == "labor" \
        else [line.get("description")]
    return " ".join(dict.fromkeys(p.strip() for p in parts if isinstance(p, str) and p.strip()))


def line_description(line: dict[str, Any]) -> str:
    """A one-line description of a stored line for routing and line items."""
    if line["kind"] == "labor":
        who = line["trade"]
        if line.get("classification") and _normal_words(line["classification"]) != _normal_words(who):
            who = f"{who} ({line['classification']})"
        hour_type = line.get("hour_type")
        kind = f" {hour_type.upper()}" if hour_type in ("ot", "dt") else ""
        return f"{who} — {line['workers']} × {line['hours']} h{kind}"
    return line["description"]


def line_quantity_and_unit_cost(line: dict[str, Any]) -> tuple[Decimal | None, Decimal | None]:
    """Quantity and unit cost of a stored line as they go on a line item."""
    if line["kind"] == "markup":
        return None, None  # a lump sum: its percentage of its base
    if line["kind"] == "labor":
        return (Decimal(line["workers"]) * Decimal(line["hours"]),
                Decimal(line["rate"]) if line.get("rate") is not None else None)
    if line["kind"] == "equipment":
        by_day = line.get("pricing") or {}
        if by_day.get("per") == "day":  # charged by the day at the sheet's daily rate
            return Decimal(by_day["days"]), Decimal(by_day["day_rate"])
        return Decimal(line["hours"]), Decimal(line["rate"]) if line.get("rate") is not None else None
    unit = line.get("unit_price") or line.get("unitCost")  # the price with markup, when marked up
    return Decimal(line["quantity"]), Decimal(unit) if unit is not None else None


class Router:
    """Routes lines against one project's cost codes and budget codes."""

    def __init__(self, cost_codes: Iterable[CostCode], budget_codes: Iterable[BudgetCode]) -> None:
        self.cost_codes = list(cost_codes)
        budget_codes = list(budget_codes)
        # A code's text names the project's cost code and each sub job's of that text; with
        # its sub job in front ("B1.02-200") it names that sub job's alone.
        self.by_code: dict[str, list[CostCode]] = {}
        for c in self.cost_codes:
            for key in dict.fromkeys((_normal_code(c.code), _normal_code(c.shown))):
                self.by_code.setdefault(key, []).append(c)
        self.budget = {(b.cost_code_id, b.cost_type): b for b in budget_codes
                       if b.cost_code_id is not None}
        self.name_terms = {c.id: _terms(c.name) for c in self.cost_codes}
        self.by_id = {b.id: b for b in budget_codes}

    def route(self, index: int, line: dict[str, Any], suggest: Suggester | None = None) -> Route:
        """Route one stored line: on the crew's own cost code when it settles it, else where
        `suggest` (the company's past decisions) puts lines like it, else by the cost code's
        other budget code or the cost-code names."""
        if line["kind"] == "markup":
            return self._route_markup(index, line)
        cost_type = KIND_COST_TYPE[line["kind"]]
        quantity, unit_cost = line_quantity_and_unit_cost(line)
        base = dict(line=index, kind=line["kind"], description=line_description(line),
                    cost_type=cost_type, quantity=quantity, unit_cost=unit_cost,
                    amount=Decimal(line["amount"]), pricing=line.get("pricing"))
        given = (line.get("costCode") or "").strip()
        cost_code = self.cost_code(given, cost_type)
        if cost_code is not None:
            exact_code = self.budget.get((cost_code.id, cost_type))
            if exact_code is not None:
                return Route(**base, budget_code=exact_code, exact=True, needs_review=False,
                             reason=f"cost code {cost_code.shown} has {article(cost_type)} "
                                    f"{cost_type} budget code")
        learned = self._learned(base, line, suggest) if suggest is not None else None
        if learned is not None:
            return learned
        if cost_code is not None:
            other = self.budget.get((cost_code.id, "other"))
            if other is not None:
                return Route(**base, budget_code=other, exact=False, needs_review=True,
                             reason=f"cost code {cost_code.shown} has no {cost_type} budget code; "
                                    f"its 'other' code is used")
            return Route(**base, budget_code=None, exact=False, needs_review=True,
                         reason=f"cost code {cost_code.shown} has no {cost_type} or other budget code")
        sub_jobs = self._sub_jobs_named(given)
        if sub_jobs:
            return Route(**base, budget_code=None, exact=False, needs_review=True,
                         reason=f"cost code {given[:40]!r} is on sub jobs {', '.join(sub_jobs)}; "
                                "pick the budget code of the right one")
        matched = self._match_by_words(line, cost_type)
        prefix = f"cost code {given[:40]!r} is not on this project; " if given else ""
        if matched is not None:
            code, words = matched
            budget = self.budget.get((code.id, cost_type)) or self.budget.get((code.id, "other"))
            if budget is not None:
                return Route(**base, budget_code=budget, exact=False, needs_review=True,
                             reason=f"{prefix}matched '{words}' to {code.shown} {code.name}")
        return Route(**base, budget_code=None, exact=False, needs_review=True,
                     reason=f"{prefix}nothing matched a cost code" if prefix
                     else "no cost code given and nothing matched a cost code name")

    def _learned(self, base: dict[str, Any], line: dict[str, Any],
                 suggest: Suggester) -> Route | None:
        """The line on this project's budget code for the cost code and cost type the company's
        PM chose for lines like it, if the project has that code."""
        text = said(line)
        found = suggest(line["kind"], text) if text else None
        if found is None:
            return None
        budget = self.by_id.get(found.budget_code_id) if found.budget_code_id else None
        if budget is None or budget.flat_code != found.budget_code:  # another project's
            code = self.cost_code(found.cost_code, found.cost_type)
            budget = self.budget.get((code.id, found.cost_type)) if code is not None else None
        if budget is None:
            return None
        return Route(**base, budget_code=budget, exact=False, needs_review=True,
                     reason=found.reason, learned=True, learned_from_sub=found.other_sub)

    def _route_markup(self, index: int, line: dict[str, Any]) -> Route:
        """A markup lands on the budget code the project's settings picked for it, if it is there."""
        code = self.by_id.get(line["budget_code_id"])
        base = dict(line=index, kind="markup", description=line["description"],
                    cost_type=code.cost_type if code is not None and code.cost_type else "other",
                    quantity=None, unit_cost=None, amount=Decimal(line["amount"]))
        if code is None:
            return Route(**base, budget_code=None, exact=False, needs_review=True,
                         reason=f"the markup's budget code {line['budget_code_id']} is not on "
                                "this project any more")
        return Route(**base, budget_code=code, exact=True, needs_review=False,
                     reason="the markup's budget code from the project's settings")

    def cost_code(self, given: str, cost_type: str | None) -> CostCode | None:
        """The cost code a text names: the only one of that text, else the only one with a
        budget code of the cost type, else the project's own; None when it could be any of
        several sub jobs' (a budget code is never taken from another sub job)."""
        return self._one(self.by_code.get(_normal_code(given), []) if given else [], cost_type)

    def _one(self, found: list[CostCode], cost_type: str | None) -> CostCode | None:
        """The one of several same-text cost codes a line can use, as `cost_code` says."""
        typed = [code for code in found if (code.id, cost_type) in self.budget]
        candidates = typed or found
        if len(candidates) == 1:
            return candidates[0]
        return next((code for code in candidates if code.sub_job is None), None)

    def _sub_jobs_named(self, given: str) -> list[str]:
        """The sub jobs whose cost code a text could be, when it cannot tell which."""
        found = self.by_code.get(_normal_code(given), []) if given else []
        return sorted({code.sub_job for code in found if code.sub_job}) if len(found) > 1 else []

    def _match_by_words(self, line: dict[str, Any], cost_type: str) -> tuple[CostCode, str] | None:
        """The cost code whose name shares most words with the trade or description (of the
        same-named codes of several sub jobs, only one that `cost_code` would take)."""
        text = line["trade"] if line["kind"] == "labor" else line["description"]
        wanted = _terms(text)
        if not wanted:
            return None
        best: tuple[int, list[CostCode], set[str]] | None = None
        for code in self.cost_codes:
            shared = wanted & self.name_terms[code.id]
            if shared and (best is None or len(shared) > best[0]):
                best = (len(shared), [code], shared)
            elif shared and len(shared) == best[0] and best[1][0].code == code.code:
                best[1].append(code)
        chosen = self._one(best[1], cost_type) if best is not None else None
        if chosen is None:
            return None
        return chosen, ", ".join(sorted(best[2]))

    def route_all(self, lines: list[dict[str, Any]], suggest: Suggester | None = None
                  ) -> list[Route]:
        """Route every line of a ticket, in index order."""
        return [self.route(i, line, suggest) for i, line in enumerate(lines)]


def unrouted(lines: list[dict[str, Any]], reason: str) -> list[Route]:
    """Routing when the project's codes could not be read: every line needs a person."""
    routes = []
    for index, line in enumerate(lines):
        quantity, unit_cost = line_quantity_and_unit_cost(line)
        routes.append(Route(line=index, kind=line["kind"], description=line_description(line),
                            cost_type=KIND_COST_TYPE[line["kind"]], quantity=quantity,
                            unit_cost=unit_cost, amount=Decimal(line["amount"]), budget_code=None,
                            exact=False, needs_review=True, reason=reason,
                            pricing=line.get("pricing")))
    return routes


_routers: weakref.WeakKeyDictionary[Any, Router] = weakref.WeakKeyDictionary()


def router_for(catalog: Any) -> Router:
    """A router over a project's catalog, built once per cached catalog (it indexes every name)."""
    router = _routers.get(catalog)
    if router is None:
        router = _routers[catalog] = Router(catalog.cost_codes, catalog.budget_codes)
    return router
