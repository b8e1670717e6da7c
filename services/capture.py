"""Tickets submitted through a capture link, from the phone page or its plain-form fallback."""
from __future__ import annotations

import base64
import re
from typing import Any

from werkzeug.datastructures import FileStorage, MultiDict

from models import utcnow
from models.schemas import Ticket
from services import links, projects, rates, tickets

CAPTURE_VIAS = ("link", "qr", "sms")
# Row fields picked from a list, which always carry a value: alone they do not make a line.
PICKED = {"hour_type"}
_PATH_PART = re.compile(r"([A-Za-z_]+)(?:\[(\d{1,3})\])?")
ROW_KINDS = {"labor": ("trade", "classification", "hour_type", "hours", "workers", "rate",
                       "costCode"),
             "equipment": ("description", "hours", "rate", "costCode"),
             "materials": ("description", "quantity", "unitCost", "costCode")}


def short_reference(ticket_id: str) -> str:
    """The reference a crew can read out over the phone: T- and the id's first 8 characters."""
    return "T-" + ticket_id.replace("-", "")[:8].upper()


def submit(token: str, payload: dict[str, Any], via: str) -> tuple[Ticket, bool]:
    """Store a ticket from a capture link; a resend with the same client reference returns the first.

    Returns the ticket and whether it was created by this call.
    """
    link = links.resolve_token(token)
    payload["project_id"] = link.project_id
    revises = payload.pop("revises", None)
    data = tickets.validate_ticket(payload)
    captured_via = via if via in CAPTURE_VIAS else "link"
    if isinstance(revises, str) and revises:
        return tickets.revise_ticket(link.company_id, link.token, revises[:64], data,
                                     captured_via=captured_via)
    return tickets.create_ticket(link.company_id, data, captured_via=captured_via,
                                 link_token=link.token, project_checked=True)


STATE_WORDS = {"submitted": "with the project manager", "written": "accepted",
               "rejected": "sent back"}


def phone_tickets(token: str, client_refs: list[str]) -> list[dict[str, Any]]:
    """The state of a phone's own tickets on a link, known by the client references it holds.

    Only the phone knows those references, so nobody else with the link sees the list.
    """
    link = links.resolve_token(token)
    found = []
    for ticket in tickets.phone_tickets(link.company_id, link.token, client_refs):
        rejected = [d for d in ticket.decisions if d.action == "rejected"]
        reason = rejected[-1].reason if ticket.status == "rejected" and rejected else None
        state = STATE_WORDS.get(ticket.status, ticket.status)
        if ticket.status == "rejected":
            state = f"sent back: {reason}" if reason else "sent back"
        found.append({"client_ref": ticket.client_ref, "reference": short_reference(ticket.id),
                      "status": ticket.status, "state": state, "reason": reason,
                      "description": ticket.description,
                      "version": 1 + sum(1 for d in ticket.decisions if d.action == "resubmitted")})
    return found


def _set_path(target: dict[str, Any], path: str, value: Any) -> None:
    """Place a form value at a path such as 'labor[2].hours' in a nested dict."""
    node: Any = target
    parts = path.split(".")
    for depth, part in enumerate(parts):
        match = _PATH_PART.fullmatch(part)
        if match is None:
            return
        name, index = match.group(1), match.group(2)
        last = depth == len(parts) - 1
        if index is None:
            if last:
                node[name] = value
            else:
                node = node.setdefault(name, {})
            continue
        rows = node.setdefault(name, {})
        if last:
            rows[int(index)] = value
        else:
            node = rows.setdefault(int(index), {})


def _rows_to_lists(data: dict[str, Any]) -> dict[str, Any]:
    """Turn index-keyed rows into lists, dropping rows the crew left entirely blank."""
    for kind in ROW_KINDS:
        rows = data.get(kind)
        if isinstance(rows, dict):
            data[kind] = [row for _, row in sorted(rows.items())
                          if isinstance(row, dict) and any(str(v).strip() for name, v in row.items()
                                                           if name not in PICKED)]
    return data


def form_to_payload(form: MultiDict, files: MultiDict) -> dict[str, Any]:
    """Read the plain HTML form (no JavaScript) into the same shape as the JSON body."""
    payload: dict[str, Any] = {}
    for key, value in form.items():
        if key in ("via", "csrf_token"):
            continue
        if value.strip() == "" and key not in ("description", "reason", "directed_by"):
            continue
        _set_path(payload, key, value)
    payload = _rows_to_lists(payload)
    photos = []
    for upload in files.getlist("photo_files"):
        if isinstance(upload, FileStorage) and upload.filename:
            photos.append({"name": upload.filename[-200:],
                           "data_url": base64.b64encode(upload.read()).decode("ascii")})
    if photos:
        payload["photos"] = photos
    return payload


def cost_code_choices(company_id: int, project_id: str) -> list[tuple[str, str]]:
    """The project's cost codes for the pick list, from what was read before: the form never
    waits on the project system (with nothing read yet, the list is empty this time)."""
    codes = projects.cached_catalog(company_id, project_id)
    if codes is None:
        return []
    return [(c.code, c.name) for c in codes.cost_codes]


def classification_choices(company_id: int, project_id: str) -> list[str]:
    """The labor classifications of the rate sheet in force today on the jobsite, for the pick list."""
    sheet = rates.sheet_in_force(company_id, project_id,
                                 tickets.jobsite_date(company_id, project_id, utcnow()))
    return [item["classification"] for item in sheet.labor] if sheet is not None else []
