"""Plain words for people: refusals, warnings, ages and signatures as a PM reads them, without
codes, field names or HTTP."""
from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from decimal import Decimal

from models import utcnow
from services.platform.errors import ServiceError
from services.project_system.commitments import commitment_name, needs_confirmation
from services.tickets import signatures


def age_text(moment: dt.datetime, now: dt.datetime | None = None) -> str:
    """How long ago, in the largest sensible unit: '5 min', '3 h', '2 d'."""
    seconds = max(0, int(((now or utcnow()) - moment).total_seconds()))
    if seconds < 3600:
        return f"{max(1, seconds // 60)} min"
    if seconds < 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


PLAIN_ERRORS = {
    "no_change_events": "This project does not use change events in Procore, so this ticket can "
                        "only be recorded as a daily log entry, which bills nothing.",
    "ticket_rejected": "This ticket is already rejected. To write it, restore it to the queue "
                       "first, or tick \"Approve although this ticket was rejected\".",
    "ticket_written": "This ticket is already in Procore, so it can no longer change.",
    "ticket_not_written": "This ticket is not in Procore yet, so there is nothing to read back.",
    "record_unread": "Procore could not be read just now, so this shows what was last read from "
                     "it. Try again in a little while.",
    "approval_in_progress": "Someone is writing this ticket to Procore right now. Try again in a "
                            "few seconds to see how it went.",
    "project_system_unavailable": "Procore cannot be reached right now. Nothing was written and "
                                  "the ticket stays in the queue; try again in a little while.",
    "project_system_write_unconfirmed": "Procore did not confirm the write, so this ticket may "
                                        "already be in Procore, in whole or in part. It stays in "
                                        "the queue: approve it again in a little while, and what "
                                        "is there is found and finished, never written twice.",
    "project_system_auth_failed": "Procore refused our sign-in. Nothing was written; ask your "
                                  "administrator to reconnect Procore.",
    "project_system_error": "Procore did not accept the ticket. Nothing was written; try again, "
                            "and if it keeps failing tell your administrator.",
    "project_system_not_connected": "This company is not connected to Procore yet; ask your "
                                    "administrator to connect it.",
    "validation_failed": "A chosen budget code can no longer be used; pick the budget codes again.",
    "reason_required": "Choose a reason or type one: the crew will read it. Nothing was changed.",
    "cost_code_not_found": "That cost code is no longer in Procore; pick another.",
    "project_not_found": "This ticket's project is no longer in Procore.",
    "ticket_not_found": "This ticket no longer exists.",
    "budget_code_not_found": "A chosen budget code is no longer in Procore; pick the budget codes again.",
    "line_not_found": "This ticket's lines changed; reload it and pick the budget codes again.",
    "authorization_not_found": "That not-to-exceed authorization is no longer on this project; "
                               "pick another.",
    "photos_full": "This ticket already holds 12 photos, the most it can take.",
    "document_busy": "The ticket's document could not be made just now. Nothing was written; "
                     "try again in a moment.",
    "commitment_needs_confirmation": "The sub's commitment in Procore needs confirming: it is "
                                     "only a suggestion, or the one confirmed for the sub is no "
                                     "longer open. Confirm it, or choose another, under \"Sub's "
                                     "commitment in Procore\". Nothing was written.",
    "contract_not_found": "That commitment is no longer open on this project in Procore; choose "
                          "another. Nothing was written.",
    "change_reason_not_found": "The change reason chosen for this project's change events is no "
                               "longer offered in Procore; choose another on the rates page. "
                               "Nothing was written or changed.",
    "no_sub": "This ticket names no sub, so there is no commitment to confirm.",
}


# Refusals of an approval's chosen budget codes, each naming its line as `routes.<line>`.
ROUTE_REFUSALS = ("validation_failed", "budget_code_not_found", "line_not_found")


PLAIN_LINE_REASONS = {
    "not confirmed": "is marked to check: confirm its budget code or pick another",
    "no budget code": "has no budget code yet: pick one",
    "not on a confirmed budget code (exact: false)":
        "has a budget code that is only a guess: confirm it or pick another",
    "suggested from another sub's decisions: confirm it with `routes`":
        "has a budget code learned from another sub's tickets: confirm it or pick another",
}


@dataclass(frozen=True)
class PlainError:
    """A refusal as a PM reads it: one sentence, a point per line it concerns, and where on
    the page to act (`where` names the control, `act` says what to do there)."""

    message: str
    points: list[str]
    lines: dict[int, str]
    where: str | None = None
    act: str | None = None


def plain_error(error: ServiceError) -> PlainError:
    """Say what went wrong and what to do, without codes, field names or HTTP."""
    if error.code == "lines_need_review" and isinstance(error.details, list):
        return _lines_to_check(error.details)
    if error.code == "nte_exceeded" and isinstance(error.details, dict):
        return _over_nte(error.details)
    if error.code in ROUTE_REFUSALS and isinstance(error.details, list):
        refused = _refused_codes(error.details)
        if refused is not None:
            return refused
    message = PLAIN_ERRORS.get(error.code)
    where, act = PLAIN_PLACES.get(error.code, (None, None))
    if error.code == "project_system_busy":
        message = _busy_message(error.headers.get("Retry-After", ""))
    if message is None:
        message = ("Procore could not take this; nothing was written. Try again in a moment."
                   if error.status >= 500 else "That could not be done; nothing was changed.")
    return PlainError(message=message, points=[], lines={}, where=where, act=act)


def _lines_to_check(details: list) -> PlainError:
    """Lines left to check before writing: how many, each with why, and the first to go to."""
    lines = {d["line"]: PLAIN_LINE_REASONS.get(d.get("reason", ""), "needs a check")
             for d in details if isinstance(d, dict) and "line" in d}
    count = len(lines)
    message = (f"{count} line{'s' if count != 1 else ''} need{'s' if count == 1 else ''} a "
               "check before this can be written. Nothing was written.")
    described = {d["line"]: d.get("description") or "" for d in details
                 if isinstance(d, dict) and "line" in d}
    points = [f"Line {line + 1} ({described[line]}) {reason}" for line, reason in lines.items()]
    first = min(lines) if lines else None
    return PlainError(message=message, points=points, lines=lines,
                      where=f"line-{first}" if first is not None else None,
                      act=f"Go to line {first + 1}" if first is not None else None)


def _refused_codes(details: list) -> PlainError | None:
    """Chosen budget codes that can no longer be used, by line; None when no line is named."""
    lines = {int(d["field"].split(".", 1)[1]): "has a budget code that can no longer be used: "
             "pick another" for d in details if isinstance(d, dict)
             and str(d.get("field", "")).startswith("routes.")
             and str(d["field"]).split(".", 1)[1].isdecimal()}
    if not lines:
        return None
    first = min(lines)
    return PlainError(
        message=f"{len(lines)} chosen budget code{'s' if len(lines) != 1 else ''} can no "
                "longer be used. Nothing was written.",
        points=[f"Line {line + 1} {reason}" for line, reason in lines.items()],
        lines=lines, where=f"line-{first}", act=f"Go to line {first + 1}")


# Where on the ticket page a refusal is put right: the control, and what to do there.
PLAIN_PLACES = {
    "no_change_events": ("destination", "Choose daily log"),
    "commitment_needs_confirmation": ("commitment", "Go to the sub's commitment"),
    "contract_not_found": ("commitment", "Go to the sub's commitment"),
    "ticket_rejected": ("allow_rejected", "Tick \"Approve although this ticket was rejected\""),
}


def _over_nte(details: dict) -> PlainError:
    """Past a not-to-exceed authorization: which one, by how much, and the box that allows it."""
    def money(value) -> str:
        try:
            return f"${Decimal(str(value)):,.2f}"
        except (ArithmeticError, ValueError):
            return str(value)
    reference = str(details.get("reference") or "its authorization")
    return PlainError(
        message=f"Writing this ticket takes {reference} to {money(details.get('after'))}, past its "
                f"not-to-exceed amount of {money(details.get('authorized'))} "
                f"({money(details.get('written'))} written before it). Nothing was written.",
        points=[f"If the GC agreed to go past it, tick \"Approve even if this takes {reference} "
                "past its not-to-exceed amount\" and approve again."],
        lines={}, where="confirm_over_nte", act="Go to the not-to-exceed box")


def _busy_message(retry_after: str) -> str:
    """Procore asked for a pause, or is slow for this company: how long to wait, in words."""
    seconds = int(retry_after) if retry_after.isdecimal() else 0
    if seconds <= 10:
        wait = "in a few seconds"
    elif seconds < 90:
        wait = f"in about {seconds} seconds"
    else:
        wait = f"in about {math.ceil(seconds / 60)} minutes"
    return (f"Procore is busy and asked us to wait before sending more. Nothing was written and "
            f"the ticket stays in the queue; try again {wait}.")


_LINE_PATH = re.compile(r"\b(labor|equipment|materials)\[(\d+)\]")


def plain_warning(text: str) -> str:
    """A stored warning in plain words: 'labor[2] (Mystery)' reads 'Labor line 3 (Mystery)'."""
    if text.startswith("routing is unavailable"):
        return "Procore cannot be reached, so the budget codes could not be checked just now."
    if text.startswith("routing is pending"):
        return ("The budget codes of this project have not been read from Procore yet, so the "
                "lines are not checked yet.")
    return _LINE_PATH.sub(lambda m: f"{m.group(1).capitalize()} line {int(m.group(2)) + 1}", text)


QUALIFIER_LABELS = {"verified": "Time and materials verified",
                    "verified_scope_disputed": "Time and materials verified; scope disputed",
                    "not_verified": "Not verified"}


# What a signer held back, as the queue's Signed column says it after "Yes, ".
HELD_BACK = {"verified_scope_disputed": "scope disputed", "not_verified": "not verified"}


def held_back(signature: dict | None) -> str | None:
    """What a stored signature does not vouch for, in plain words; None when it vouches for all."""
    code, reason = signatures.qualifier(signature)
    if code in HELD_BACK:
        return HELD_BACK[code]
    return "with a note" if code is None and reason else None


def signing_refusal(error: ServiceError) -> str:
    """Why a signing link was not made, in a reviewer's words."""
    if error.code == "ticket_already_signed":
        return "The ticket is already signed."
    if error.code == "ticket_written":
        return "The ticket is already written to Procore; it can no longer be signed."
    if error.code == "ticket_rejected":
        return "The ticket is rejected. Restore it to the queue before sending it to be signed."
    fields = {"name": "the signer's name", "email": "the e-mail address", "phone": "the phone number",
              "role": "the role"}
    problems = [detail for detail in error.details or [] if isinstance(detail, dict)]
    if any(p["field"] == "email" and "or a phone" in p["message"] for p in problems):
        return "Give an e-mail address or a phone number (or both)."
    named = [fields.get(p["field"], "a field") for p in problems]
    return ("Please check " + ", ".join(dict.fromkeys(named)) + ".") if named else error.message


CHANGE_ORDER_KINDS = {"commitment": "commitment change order", "prime": "prime change order"}


def change_order_words(order: dict) -> str:
    """A change order as a PM reads it: 'commitment change order CCO-002 “Title” (pending)'."""
    kind = CHANGE_ORDER_KINDS.get(order.get("kind"), "change order")
    number = f" {order['number']}" if order.get("number") else ""
    title = f" “{order['title']}”" if order.get("title") else ""
    status = f" ({order['status']})" if order.get("status") else ""
    return f"{kind}{number}{title}{status}"


def record_words(ticket) -> str:
    """Where a written ticket's record stands in Procore as last read, in a few words."""
    if ticket.record_read_at is None:
        return "not read from Procore yet"
    if ticket.record_gone:
        return f"{ticket.record_gone} in Procore"
    status = ticket.record_status or "status unknown"
    orders = ticket.record_change_orders or []
    if orders:
        return f"{status}; on " + ", ".join(change_order_words(order) for order in orders)
    if ticket.on_change_order is None:
        return status  # a daily log entry is never on a change order
    return f"{status}; not on a change order yet"


def commitment_sentence(commitment, *, written: bool = False) -> str:
    """Which commitment a ticket's lines are (or were) proposed on, and why, in a sentence or two."""
    why = commitment.reason[:1].upper() + commitment.reason[1:]
    if commitment.contract_id is None:
        if commitment.exact:
            return f"{why}."
        if not written and needs_confirmation(commitment):
            return f"{why}. Confirm the sub's commitment again, or none, before approving."
        return f"{why}. Its lines {'were' if written else 'are'} written without a commitment."
    name = commitment_name(commitment.contract_number, commitment.contract_title,
                           commitment.contract_id)
    vendor = f" of {commitment.vendor_name}" if commitment.vendor_name else ""
    if not commitment.exact:
        return f"Suggested: {name}{vendor} ({commitment.reason}). Confirm it, or choose another."
    return f"Each line {'was' if written else 'is'} proposed on {name}{vendor}. {why}."
