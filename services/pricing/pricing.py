"""Pricing lines from the rate sheet in force: which rate, from which sheet, and what to flag.

The crew records quantities; the office's sheet prices them. A line sent with its own rate
keeps it, and is flagged when the sheet says otherwise. Amounts are rounded to cents per line
by `price_lines`, and the total is
the sum of the rounded line amounts, so a ticket always adds up.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from models import RateSheet
from models.schemas import HOUR_TYPE_NAMES, EquipmentLineIn, LaborLineIn, MaterialLineIn, TicketInput
from services.pricing import markups

HUNDRED = Decimal(100)
CENT = Decimal("0.01")
HOURS_A_DAY = 8


@dataclass(frozen=True)
class Priced:
    """The rate a line is priced at (None: unpriced), and how it was chosen, as stored."""

    rate: Decimal | None
    pricing: dict[str, Any]
    warning: str | None = None


def _key(text: str | None) -> str:
    """Compare names without case or repeated spaces."""
    return re.sub(r"\s+", " ", (text or "").strip()).casefold()


def _find(items: list[dict[str, Any]], field: str, name: str | None) -> dict[str, Any] | None:
    """The sheet item whose name matches."""
    wanted = _key(name)
    if not wanted:
        return None
    return next((item for item in items if _key(item[field]) == wanted), None)


def _decimal(text: str | None) -> Decimal | None:
    """A stored decimal string as a Decimal."""
    return None if text is None else Decimal(text)


def _text(value: Decimal | None) -> str | None:
    """A decimal as exact text."""
    return None if value is None else format(value.normalize(), "f")


def _sheet_fields(sheet: RateSheet) -> dict[str, Any]:
    """The sheet's identity as stored on a line."""
    return {"sheet_id": sheet.id, "sheet_name": sheet.name,
            "effective_from": sheet.effective_from.isoformat()}


def _sheet_words(sheet: RateSheet) -> str:
    """'rate sheet "X" (in force from 2026-01-01)'."""
    return f"rate sheet “{sheet.name}” (in force from {sheet.effective_from.isoformat()})"


def _choose(sheet: RateSheet | None, given: Decimal | None, item: dict[str, Any] | None,
            sheet_rate: Decimal | None, what: str, label: str, missing: str,
            extra: dict[str, Any]) -> Priced:
    """Keep a given rate (flagged if it differs), else take the sheet's, else flag the line."""
    base = {**(_sheet_fields(sheet) if sheet is not None else {}),
            "item": item_name(item), "sheet_rate": _text(sheet_rate), **extra}
    if given is not None:
        differs = sheet_rate is not None and given != sheet_rate
        note = f"{what} {_text(given)} as given on the ticket"
        warning = None
        if differs:
            note += f"; the {_sheet_words(sheet)} says {_text(sheet_rate)}"
            warning = f"{label}: {what} {_text(given)} differs from the {_sheet_words(sheet)}, " \
                      f"which says {_text(sheet_rate)}"
        return Priced(given, {**base, "source": "explicit", "differs": differs,
                              "needs_office": differs, "note": note}, warning)
    if sheet_rate is not None:
        return Priced(sheet_rate, {**base, "source": "sheet", "differs": False,
                                   "needs_office": False,
                                   "note": f"{what} {_text(sheet_rate)} from the {_sheet_words(sheet)}"})
    if sheet is None:
        note = f"no {what} given and no rate sheet in force, so the amount is 0"
    else:
        note = f"{missing} on the {_sheet_words(sheet)}, so the amount is 0 until the office prices it"
    return Priced(None, {**base, "source": "none", "differs": False, "needs_office": True,
                         "note": note}, f"{label}: {note}")


def item_name(item: dict[str, Any] | None) -> str | None:
    """The name of a sheet item."""
    if item is None:
        return None
    return item.get("classification") or item.get("description")


def labor(sheet: RateSheet | None, line: LaborLineIn, label: str) -> Priced:
    """A labor line's hourly rate for its classification (or trade) and hour type."""
    name = line.classification or line.trade
    item = _find(sheet.labor, "classification", name) if sheet is not None else None
    if item is None and sheet is not None and line.classification:
        item = _find(sheet.labor, "classification", line.trade)
    hour_words = HOUR_TYPE_NAMES[line.hour_type]
    sheet_rate = _decimal(item.get(line.hour_type)) if item is not None else None
    if item is None:
        missing = f"classification “{name}” is not"
    else:
        missing = f"“{item['classification']}” has no {hour_words} rate"
    return _choose(sheet, line.rate, item, sheet_rate, f"{hour_words} rate", label, missing,
                   {"hour_type": line.hour_type})


def equipment(sheet: RateSheet | None, line: EquipmentLineIn, label: str) -> Priced:
    """An equipment line's hourly rate; priced by the day when the sheet's daily rate is lower.

    Days are the hours over 8, rounded up. A rate sent with the line is always per hour.
    """
    item = _find(sheet.equipment, "description", line.description) if sheet is not None else None
    sheet_rate = _decimal(item["hourly"]) if item is not None else None
    priced = _choose(sheet, line.rate, item, sheet_rate, "hourly rate", label,
                     f"“{line.description}” is not", {})
    daily = _decimal(item.get("daily")) if item is not None else None
    if priced.pricing["source"] != "sheet" or daily is None or line.hours <= 0:
        return priced
    days = Decimal(math.ceil(line.hours / HOURS_A_DAY))
    if days * daily >= line.hours * sheet_rate:
        return priced
    note = (f"daily rate {_text(daily)} × {days} day(s) from the {_sheet_words(sheet)}, lower "
            f"than {_text(line.hours)} h at {_text(sheet_rate)}")
    return Priced(priced.rate, {**priced.pricing, "per": "day", "days": _text(days),
                                "day_rate": _text(daily), "note": note})


def materials(sheet: RateSheet | None, line: MaterialLineIn, label: str
              ) -> tuple[Priced, Decimal | None]:
    """A material line's cost per unit and, when a sheet is in force, its price with markup."""
    item = _find(sheet.materials, "description", line.description) if sheet is not None else None
    sheet_cost = _decimal(item["unit_cost"]) if item is not None else None
    markup = Decimal(sheet.material_markup) if sheet is not None else None
    priced = _choose(sheet, line.unitCost, item, sheet_cost, "cost", label,
                     f"“{line.description}” is not",
                     {"markup_percent": _text(markup) if markup else None})
    if priced.rate is None or not markup:
        return priced, None
    price = priced.rate * (HUNDRED + markup) / HUNDRED
    note = f"{priced.pricing['note']}, plus the sheet's {_text(markup)} % material markup"
    return Priced(priced.rate, {**priced.pricing, "note": note}, priced.warning), price


# ------------------------------------------------------------------ a ticket's lines

def _cents(value: Decimal) -> Decimal:
    """Round to cents, half up, the way an invoice does."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def price_lines(data: TicketInput, sheet: RateSheet | None = None,
                project_markups: list[dict[str, Any]] = ()
                ) -> tuple[list[dict[str, Any]], Decimal, list[str]]:
    """Turn validated input into stored lines with amounts, the total, and warnings.

    A line without a rate is priced from `sheet` (the rate sheet in force on the work day);
    each line records which rate was used and from which sheet under `pricing`. The project's
    markups follow the cost lines as lines of their own, in their order.
    """
    lines: list[dict[str, Any]] = []
    warnings: list[str] = []
    lines += [_labor_line(sheet, i, worked, warnings) for i, worked in enumerate(data.labor)]
    lines += [_equipment_line(sheet, i, item, warnings) for i, item in enumerate(data.equipment)]
    lines += [_material_line(sheet, i, item, warnings) for i, item in enumerate(data.materials)]
    if not lines:
        warnings.append("the ticket has no labor, equipment or material lines")
    lines += markups.apply(list(project_markups), lines)
    total = _cents(sum((Decimal(line["amount"]) for line in lines), Decimal(0)))
    return lines, total, warnings


def _labor_line(sheet: RateSheet | None, i: int, worked: LaborLineIn,
                warnings: list[str]) -> dict[str, Any]:
    """A labor line as stored, priced; its warning, if any, added to `warnings`."""
    priced = labor(sheet, worked, f"labor[{i}] ({worked.trade})")
    rate = priced.rate
    amount = _cents(worked.workers * worked.hours * rate) if rate is not None else Decimal(0)
    if rate is None and sheet is None:
        warnings.append(f"labor[{i}] ({worked.trade}) has no rate, so its amount is 0")
    elif priced.warning:
        warnings.append(priced.warning)
    return {"kind": "labor", "trade": worked.trade, "hours": _text(worked.hours),
            "workers": _text(worked.workers), "rate": _text(rate),
            "costCode": worked.costCode or None, "amount": _text(_cents(amount)),
            "classification": worked.classification or None,
            "hour_type": worked.hour_type, "pricing": priced.pricing}


def _equipment_line(sheet: RateSheet | None, i: int, item: EquipmentLineIn,
                    warnings: list[str]) -> dict[str, Any]:
    """An equipment line as stored, priced by the hour or the day; its warning to `warnings`."""
    priced = equipment(sheet, item, f"equipment[{i}] ({item.description})")
    rate = priced.rate
    amount = _cents(item.hours * rate) if rate is not None else Decimal(0)
    if priced.pricing.get("per") == "day":
        amount = _cents(Decimal(priced.pricing["days"]) * Decimal(priced.pricing["day_rate"]))
    if rate is None and sheet is None:
        warnings.append(f"equipment[{i}] ({item.description}) has no rate, so its amount is 0")
    elif priced.warning:
        warnings.append(priced.warning)
    return {"kind": "equipment", "description": item.description,
            "hours": _text(item.hours), "rate": _text(rate),
            "costCode": item.costCode or None, "amount": _text(_cents(amount)),
            "pricing": priced.pricing}


def _material_line(sheet: RateSheet | None, i: int, item: MaterialLineIn,
                   warnings: list[str]) -> dict[str, Any]:
    """A material line as stored, at its price with markup when a sheet is in force; its
    warning to `warnings`."""
    priced, price = materials(sheet, item, f"materials[{i}] ({item.description})")
    cost = priced.rate
    unit = price if price is not None else cost
    amount = _cents(item.quantity * unit) if unit is not None else Decimal(0)
    if cost is None and sheet is None:
        warnings.append(f"materials[{i}] ({item.description}) has no unit cost, so its amount is 0")
    elif priced.warning:
        warnings.append(priced.warning)
    return {"kind": "materials", "description": item.description,
            "quantity": _text(item.quantity), "unitCost": _text(cost),
            "costCode": item.costCode or None, "amount": _text(_cents(amount)),
            "unit_price": _text(price), "pricing": priced.pricing}


# Warnings price_lines writes; a new pricing replaces them and keeps the others.
PRICING_WARNINGS = ("labor[", "equipment[", "materials[", "the ticket has no labor")


def input_lines(lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A ticket's stored cost lines as input again: quantities as recorded, and only the rates
    the crew or caller sent (a line priced before pricing was recorded counts as sent)."""
    def sent(line: dict[str, Any], field: str) -> Any:
        source = (line.get("pricing") or {}).get("source", "explicit")
        return line.get(field) if source == "explicit" else None

    kinds: dict[str, list[dict[str, Any]]] = {"labor": [], "equipment": [], "materials": []}
    for line in lines:
        if line["kind"] == "labor":
            kinds["labor"].append({"trade": line["trade"], "hours": line["hours"],
                                   "workers": line["workers"], "rate": sent(line, "rate"),
                                   "costCode": line.get("costCode"),
                                   "classification": line.get("classification"),
                                   "hour_type": line.get("hour_type") or "st"})
        elif line["kind"] == "equipment":
            kinds["equipment"].append({"description": line["description"], "hours": line["hours"],
                                       "rate": sent(line, "rate"), "costCode": line.get("costCode")})
        elif line["kind"] == "materials":
            kinds["materials"].append({"description": line["description"],
                                       "quantity": line["quantity"],
                                       "unitCost": sent(line, "unitCost"),
                                       "costCode": line.get("costCode")})
    return kinds
