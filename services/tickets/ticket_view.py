"""A ticket as people read it, the same on the review page and in the ticket document (PDF):
its facts, times on the jobsite's clock, quantities with their units, subtotals, photo
captions and warnings in plain words."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from models.schemas import RoutingLine, Shows, Ticket, ticket_fields
from services.project_system.zones import UTC, on_clock
from services.tickets.plain_words import plain_warning

# The ticket's own facts, in the order the page and the document list them: (label, field of
# the Ticket shape); the optional text fields declared to show in the facts follow (TicketText).
# A fact without a value is left out, so an optional field shows when given.
FACTS = (
    ("Why it is extra", "reason"),
    ("Directed by", "directed_by"),
    ("Day of the work", "worked_on"),
)
KIND_LABELS = {"labor": "Labor", "equipment": "Equipment", "materials": "Materials",
               "markup": "Markup"}
CAPTURED_VIA = {"link": "a capture link", "qr": "a QR code", "sms": "a text message",
                "api": "a connected program"}


@dataclass(frozen=True)
class Fact:
    """One fact of a ticket: its label, the field it shows and the text."""

    label: str
    field: str
    text: str


@dataclass
class TicketView:
    """A ticket shape with what people read it by: the project's name and the jobsite's zone."""

    ticket: Ticket
    project_name: str
    zone: ZoneInfo = UTC

    def clock(self, moment: dt.datetime | str | None) -> str:
        """Any time, in one format on the jobsite's clock: '2026-06-03 20:30 PDT'."""
        return on_clock(moment, self.zone)

    def text(self, value: Any) -> str:
        """A field's value as text: dates as yyyy-mm-dd, times on the jobsite's clock."""
        if isinstance(value, dt.datetime):
            return self.clock(value)
        if isinstance(value, dt.date):
            return value.isoformat()
        return str(value)

    @property
    def facts(self) -> list[Fact]:
        """The ticket's facts that have a value: FACTS, then the optional fields declared there."""
        named = [*FACTS, *((field.label, field.name) for field in ticket_fields(Shows.FACTS))]
        found = [(label, name, getattr(self.ticket, name)) for label, name in named]
        return [Fact(label, name, self.text(value)) for label, name, value in found
                if value not in (None, "")]

    @property
    def came_in(self) -> str:
        """How the ticket came in, in words: 'a QR code'."""
        return CAPTURED_VIA.get(self.ticket.captured_via, str(self.ticket.captured_via))

    def photo_caption(self, photo) -> str:
        """When and where a photo was taken, as far as the phone said."""
        parts = [self.clock(photo.taken_at) if photo.taken_at else "time not given"]
        if photo.coords:
            place = f"{photo.coords.lat:.5f}, {photo.coords.lng:.5f}"
            if photo.coords.accuracy_m is not None:
                place += f" (within {photo.coords.accuracy_m:.0f} m)"
            parts.append(place)
        else:
            parts.append("place not given")
        return " · ".join(parts)

    def units(self, route: RoutingLine) -> tuple[str, str]:
        """A line's quantity and rate with their units and currency; a markup's percentage and
        the amount it was taken of."""
        if route.kind == "markup":
            markup = self.markup_of(route)
            if markup is None:
                return "", ""
            return f"{markup.percent.normalize():f} %", f"of ${markup.base:,.2f}"
        quantity = "" if route.quantity is None else f"{route.quantity.normalize():f}"
        rate = "" if route.unit_cost is None else f"${route.unit_cost:,.2f}"
        if route.kind == "labor":
            return (f"{quantity} worker-h" if quantity else "", f"{rate}/h" if rate else "no rate")
        if route.kind == "equipment":
            return (f"{quantity} h" if quantity else "", f"{rate}/h" if rate else "no rate")
        return (quantity, f"{rate} each" if rate else "no unit cost")

    def markup_of(self, route: RoutingLine):
        """The markup a markup line of the routing was made by (they follow the cost lines)."""
        t = self.ticket
        index = route.line - len(t.labor) - len(t.equipment) - len(t.materials)
        return t.markups[index] if 0 <= index < len(t.markups) else None

    @property
    def markups_subtotal(self) -> Decimal | None:
        """What the markups add, when there are any."""
        amounts = [r.amount for r in self.ticket.routing if r.kind == "markup"]
        return sum(amounts, Decimal("0.00")) if amounts else None

    @property
    def subtotals(self) -> list[tuple[str, str, Decimal]]:
        """Labor, equipment and materials subtotals, for the kinds the ticket has."""
        totals = []
        for kind in ("labor", "equipment", "materials"):
            lines = [r.amount for r in self.ticket.routing if r.kind == kind]
            if lines:
                totals.append((kind, KIND_LABELS[kind], sum(lines, Decimal("0.00"))))
        return totals

    @property
    def warnings(self) -> list[str]:
        """The ticket's warnings in plain words."""
        return [plain_warning(w) for w in self.ticket.warnings]
