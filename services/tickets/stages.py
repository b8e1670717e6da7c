"""Where a ticket stands on its way to being paid: its stage, as SQL and in people's words.

One definition serves the board, the outstanding report, the digest, the queue's filter and a
sub's live log. A ticket is outstanding until every change order its lines are on is approved
in the project system; a daily log entry, a record deleted or voided there, and a ticket sent
back to its crew are not.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from flask_babel import lazy_gettext
from sqlalchemy import String, and_, case, cast, literal, not_, or_
from sqlalchemy.sql.elements import ColumnElement

from models import Ticket as TicketRecord

# The outstanding stages, in the order a claim moves through them.
OUTSTANDING = ("signature", "review", "written", "change_order")
# The status every ticket of an outstanding stage has.
STATUS_OF = {"signature": "submitted", "review": "submitted", "written": "written",
             "change_order": "written"}
# Every stage a ticket can be in: the outstanding ones, then those that wait for no one.
STAGES = (*OUTSTANDING, "paid", "daily_log", "sent_back", "gone")

LABELS = {
    "signature": lazy_gettext("Waiting for a signature"),
    "review": lazy_gettext("Waiting for the project manager"),
    "written": lazy_gettext("Written, not on a change order"),
    "change_order": lazy_gettext("On a change order not yet approved"),
    "paid": lazy_gettext("On an approved change order"),
    "daily_log": lazy_gettext("Recorded in the daily log"),
    "sent_back": lazy_gettext("Sent back"),
    "gone": lazy_gettext("Deleted or void in Procore"),
}

# Ages of an outstanding claim, in whole days since it was captured: (key, label, first day,
# last day; None for no end).
AGES = (("0_2", lazy_gettext("0-2 days"), 0, 2), ("3_7", lazy_gettext("3-7 days"), 3, 7),
        ("8_30", lazy_gettext("8-30 days"), 8, 30), ("over_30", lazy_gettext("Over 30 days"), 31, None))


def unsigned() -> ColumnElement[bool]:
    """A ticket with no signature (stored as JSON null or SQL NULL)."""
    return or_(TicketRecord.signature.is_(None), cast(TicketRecord.signature, String) == "null")


def _gone() -> ColumnElement[bool]:
    """A written ticket whose record was deleted or voided in the project system."""
    # Both sides are never NULL, so its negation holds for every other written ticket.
    return or_(TicketRecord.record_deleted.is_(True),
               and_(TicketRecord.record_status.is_not(None), TicketRecord.record_status == "Void"))


def _conditions() -> dict[str, ColumnElement[bool]]:
    """Each stage as a condition on a ticket's row; exactly one holds for any ticket."""
    written = and_(TicketRecord.status == "written", not_(_gone()))
    return {
        "signature": and_(TicketRecord.status == "submitted", unsigned()),
        "review": and_(TicketRecord.status == "submitted", not_(unsigned())),
        "written": and_(written, TicketRecord.on_change_order.is_(False)),
        "change_order": and_(written, TicketRecord.on_change_order.is_(True),
                             or_(TicketRecord.change_orders_approved.is_(None),
                                 TicketRecord.change_orders_approved.is_(False))),
        "paid": and_(written, TicketRecord.on_change_order.is_(True),
                     TicketRecord.change_orders_approved.is_(True)),
        "daily_log": and_(written, TicketRecord.on_change_order.is_(None)),
        "sent_back": TicketRecord.status == "rejected",
        "gone": and_(TicketRecord.status == "written", _gone()),
    }


def condition(stage: str) -> ColumnElement[bool]:
    """The rows in one stage; ValueError for a stage that does not exist."""
    conditions = _conditions()
    if stage not in conditions:
        raise ValueError(f"no stage {stage!r}")
    return conditions[stage]


def outstanding() -> ColumnElement[bool]:
    """The rows of tickets that are outstanding (in any of OUTSTANDING)."""
    conditions = _conditions()
    return or_(*(conditions[stage] for stage in OUTSTANDING))


def stage_column() -> ColumnElement[str]:
    """A ticket's stage key as an SQL expression."""
    conditions = _conditions()
    return case(*((conditions[stage], literal(stage)) for stage in STAGES[:-1]),
                else_=literal(STAGES[-1]))


def age_column(now: dt.datetime) -> ColumnElement[str]:
    """The key of an outstanding ticket's age (AGES) as an SQL expression, at `now`."""
    whens = [(TicketRecord.captured_at >= now - dt.timedelta(days=last + 1), literal(key))
             for key, _label, _first, last in AGES if last is not None]
    return case(*whens, else_=literal(AGES[-1][0]))


def age_range(key: str, now: dt.datetime) -> tuple[dt.datetime | None, dt.datetime | None]:
    """An age's capture times: (captured from, captured before), None where open; ValueError
    for an age that does not exist."""
    for age, _label, first, last in AGES:
        if age == key:
            start = now - dt.timedelta(days=last + 1) if last is not None else None
            return start, now - dt.timedelta(days=first) if first else None
    raise ValueError(f"no age {key!r}")


def orders_approved(orders: Iterable[Mapping]) -> bool | None:
    """Whether every change order of a list is approved; None when there are none."""
    statuses = [str(order.get("status") or "").lower() for order in orders]
    return all(status == "approved" for status in statuses) if statuses else None
