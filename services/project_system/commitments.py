"""A sub's vendor and commitment in the project system: read, matched by name, confirmed by a PM.

A ticket's sub (a capture link's label, or `sub` through the API) is matched to the project's
directory: one vendor whose name is the sub's (ignoring case, accents, punctuation, '&' for
'and' and a legal suffix such as "Inc." or "LLC") with exactly one commitment on the project is
exact; anything else is a suggestion with its reason, or no commitment with its reason. A PM's
confirmation, kept per company, project and sub, settles it for the sub's next tickets.
"""
from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass

from flask import current_app
from rapidfuzz import fuzz
from sqlalchemy import select

from models import SubCommitment, db, utcnow
from models.schemas import CommitmentItem, CommitmentList, SubCommitmentItem, TicketCommitment
from services.platform.database import insert_or_merge, write_transaction
from services.platform.errors import Conflict, ServiceError, field_problem
from services.project_system import projects
from services.project_system.base import ChangeReason, Commitment, ToolDisabled, Vendor
from services.project_system.connections import client_for, project_system_errors

LEGAL_SUFFIXES = frozenset({"inc", "incorporated", "llc", "ltd", "limited", "co", "corp",
                            "company", "corporation", "lp", "llp", "pllc"})
# A name this alike (rapidfuzz's token set ratio, 0-100) to the sub's is offered as a suggestion.
SIMILAR = 85
SUB_KEY_CHARS = 120
UNREADABLE = "the project's directory and commitments cannot be read in Procore"
# How a sub's reason starts once the commitment a PM confirmed for it is voided or closed.
GONE = "the commitment confirmed for this sub is no longer open on this project"


def normalise(name: str) -> str:
    """A company name as it is compared ("Apex Concrete, Inc." is "apex concrete")."""
    # Lower case, no accents or punctuation, '&' read as 'and', no trailing legal suffix.
    text = unicodedata.normalize("NFKD", name.casefold())
    text = "".join(char for char in text if not unicodedata.combining(char))
    text = re.sub(r"(?<=\w)[.'’](?=\w)", "", text).replace("&", " and ")  # L.L.C., O'Neil
    words = re.findall(r"[^\W_]+", text)
    while len(words) > 1 and words[-1] in LEGAL_SUFFIXES:
        words.pop()
    return " ".join(words)


def sub_key(sub: str) -> str:
    """The key a sub's confirmation is kept under."""
    return (normalise(sub) or sub.strip().casefold())[:SUB_KEY_CHARS]


# ------------------------------------------------------------------ reads, through the one cache

@dataclass(frozen=True)
class Directory:
    """A project's vendors and open commitments as one cached read."""

    # readable: false when the credentials may not read them (lines then carry no commitment).

    vendors: tuple[Vendor, ...]
    commitments: tuple[Commitment, ...]
    readable: bool = True

    def commitment(self, contract_id: int) -> Commitment | None:
        """A commitment of the project by id."""
        return next((c for c in self.commitments if c.id == contract_id), None)


def _directory_key(company_id: int, project_id: str) -> tuple:
    """A project's directory as the cache keys it."""
    return ("directory", company_id, str(project_id).strip())


def forget_directory(company_id: int, project_id: str) -> None:
    """Read the project's directory and commitments afresh next time (one may be voided)."""
    projects.forget("directories", _directory_key(company_id, project_id))


def directory(company_id: int, project_id: str, *, briefly: bool = False) -> Directory:
    """The project's vendors and commitments, cached for CATALOG_CACHE_S."""
    def load() -> Directory:
        project = projects.require_project(company_id, project_id)
        with project_system_errors(company_id):
            client = client_for(company_id)
            try:
                return Directory(tuple(client.list_vendors(project.id)),
                                 tuple(client.list_commitments(project.id)))
            except ToolDisabled:
                return Directory((), (), readable=False)
    return projects.cached_read(company_id, "directories", _directory_key(company_id, project_id),
                                current_app.config["CATALOG_CACHE_S"], load, briefly)


def change_reasons(company_id: int, project_id: str, *, briefly: bool = False
                   ) -> list[ChangeReason]:
    """The company's change reasons, as offered on the project, cached for CATALOG_CACHE_S."""
    def load() -> list[ChangeReason]:
        project = projects.require_project(company_id, project_id)
        with project_system_errors(company_id):
            return client_for(company_id).list_change_reasons(project.id)
    return projects.cached_read(company_id, "change_reasons",
                                ("change_reasons", company_id, str(project_id).strip()),
                                current_app.config["CATALOG_CACHE_S"], load, briefly)


# ------------------------------------------------------------------ matching

@dataclass(frozen=True)
class Match:
    """What a sub's name found: a vendor, a commitment, whether it is exact, and why."""

    vendor: Vendor | None
    commitment: Commitment | None
    exact: bool
    reason: str


def _first(commitments: list[Commitment]) -> Commitment:
    """The commitment offered first: an approved subcontract before a purchase order."""
    return sorted(commitments, key=lambda c: (c.status != "Approved", c.kind != "work_order",
                                              c.number or "", c.id))[0]


def _named(found: Directory) -> list[Vendor]:
    """Every vendor of the directory, and those only the commitments name."""
    vendors = {vendor.id: vendor for vendor in found.vendors}
    for commitment in found.commitments:
        if commitment.vendor_id is not None and commitment.vendor_id not in vendors:
            vendors[commitment.vendor_id] = Vendor(commitment.vendor_id,
                                                   commitment.vendor_name or "")
    return list(vendors.values())


def match(sub: str, found: Directory) -> Match:
    """Match a sub's name to the project's vendors and their commitments (module docstring)."""
    if not found.readable:
        return Match(None, None, False, UNREADABLE)
    key = normalise(sub)
    theirs: dict[int | None, list[Commitment]] = defaultdict(list)
    for commitment in found.commitments:
        theirs[commitment.vendor_id].append(commitment)
    vendors = _named(found)
    equal = [vendor for vendor in vendors if normalise(vendor.name) == key]
    if len(equal) == 1:
        vendor, held = equal[0], theirs[equal[0].id]
        if len(held) == 1:
            return Match(vendor, held[0], True, f"{vendor.name} in the project's directory, "
                                                "with one commitment on this project")
        if not held:
            return Match(vendor, None, False,
                         f"{vendor.name} has no commitment on this project in Procore")
        return Match(vendor, _first(held), False,
                     f"{vendor.name} has {len(held)} commitments on this project")
    holding = [vendor for vendor in (equal or vendors) if theirs[vendor.id]]
    if len(equal) > 1 and holding:
        return Match(holding[0], _first(theirs[holding[0].id]), False,
                     f"{len(equal)} companies in this project's directory are named "
                     f"{equal[0].name}")
    scored = sorted(((fuzz.token_set_ratio(key, normalise(v.name)), fuzz.ratio(key, normalise(v.name)), v)
                     for v in vendors), key=lambda item: item[:2], reverse=True)
    if scored and scored[0][0] >= SIMILAR and theirs[scored[0][2].id]:
        vendor = scored[0][2]
        return Match(vendor, _first(theirs[vendor.id]), False,
                     f"closest name in the directory: {vendor.name}")
    return Match(None, None, False, f"{sub} is not in this project's directory in Procore")


def _shape(vendor: Vendor | None, commitment: Commitment | None, exact: bool,
           reason: str) -> TicketCommitment:
    """A match in the API shape; a commitment's vendor names it when the match gave none."""
    vendor_id = commitment.vendor_id if commitment else vendor.id if vendor else None
    vendor_name = (commitment.vendor_name if commitment else None) or (vendor.name if vendor else None)
    return TicketCommitment(vendor_id=vendor_id, vendor_name=vendor_name,
                            contract_id=commitment.id if commitment else None,
                            contract_number=commitment.number if commitment else None,
                            contract_title=commitment.title if commitment else None,
                            exact=exact, reason=reason)


def commitment_name(number: str | None, title: str | None, contract_id: int | None) -> str:
    """A commitment as a PM reads it: its number and title, e.g. 'SC-104 Concrete subcontract'."""
    return " ".join(part for part in (number, title) if part) or f"commitment {contract_id}"


def choices(company_id: int, project_id: str) -> list[tuple[int, str]]:
    """A project's open commitments as a page's picker offers them (none while unknown)."""
    try:
        found = directory(company_id, project_id, briefly=True)
    except ServiceError:
        return []
    return [(c.id, f"{commitment_name(c.number, c.title, c.id)} — {c.vendor_name or 'no vendor'}")
            for c in found.commitments]


# ------------------------------------------------------------------ a ticket's commitment

def confirmed(company_id: int, project_id: str, sub: str) -> SubCommitment | None:
    """The PM's confirmation for a sub on a project, if there is one."""
    return db.session.get(SubCommitment, (company_id, str(project_id).strip(), sub_key(sub)))


def resolve(sub: str, found: Directory, kept: SubCommitment | None) -> TicketCommitment:
    """A sub's commitment on a project: as a PM confirmed it, else as its name matches."""
    prefix = ""
    if kept is not None and found.readable:
        who = kept.confirmed_by or "a reviewer"
        if kept.contract_id is None:
            return _shape(None, None, True, f"confirmed by {who}: {sub}'s lines carry no "
                                            "commitment on this project")
        commitment = found.commitment(kept.contract_id)
        if commitment is not None:
            return _shape(None, commitment, True, f"confirmed by {who} for {kept.sub}")
        prefix = f"{GONE}; "
    found_match = match(sub, found)
    # What the name finds instead was never seen by the PM who confirmed: a suggestion at most.
    return _shape(found_match.vendor, found_match.commitment, found_match.exact and not prefix,
                  prefix + found_match.reason)


def needs_confirmation(chosen: TicketCommitment) -> bool:
    """Whether a sub's commitment must be confirmed before its lines are written: a suggestion,
    or none found after the confirmed one was voided or closed in the project system."""
    return not chosen.exact and (chosen.contract_id is not None or chosen.reason.startswith(GONE))


def for_sub(company_id: int, project_id: str, sub: str | None, *,
            briefly: bool = False) -> TicketCommitment | None:
    """The commitment a sub's lines go on (None for no sub); the project system's errors pass."""
    if not sub or not sub.strip():
        return None
    return resolve(sub, directory(company_id, project_id, briefly=briefly),
                   confirmed(company_id, project_id, sub))


def shown(company_id: int, project_id: str, sub: str | None, *, briefly: bool) -> TicketCommitment | None:
    """A sub's commitment as a ticket shows it; None when the project system cannot say now."""
    try:
        return for_sub(company_id, project_id, sub, briefly=briefly)
    except ServiceError:
        return None


def for_approval(company_id: int, project_id: str, sub: str | None, contract_id: int | None,
                 actor: str) -> TicketCommitment | None:
    """The commitment an approval writes the lines on; 409 for one it may not write."""
    # contract_id when given (contract_not_found when the project lacks it), else the sub's,
    # which must not be a suggestion (commitment_needs_confirmation).
    if contract_id is not None:
        commitment = directory(company_id, project_id, briefly=True).commitment(contract_id)
        if commitment is None:
            raise _not_on_project(contract_id, project_id, "contract_id")
        return _shape(None, commitment, True, f"chosen by {actor} at approval")
    chosen = for_sub(company_id, project_id, sub, briefly=True)
    if chosen is not None and needs_confirmation(chosen):
        raise Conflict(f"the sub's commitment needs confirming ({chosen.reason}): confirm it "
                       "for the sub, or approve with `contract_id`; nothing was written",
                       code="commitment_needs_confirmation")
    return chosen


def _not_on_project(contract_id: int, project_id: str, field: str) -> Conflict:
    """409 contract_not_found naming the field."""
    return Conflict(f"commitment {contract_id} is not an open commitment of project {project_id}; "
                    "nothing was written", code="contract_not_found",
                    details=[field_problem(field, f"no commitment {contract_id} on project "
                                                  f"{project_id}")])


def confirm(company_id: int, project_id: str, sub: str, contract_id: int | None,
            actor: str | None) -> SubCommitmentItem:
    """Keep which commitment (None: none) a sub's lines go on, on a project, for its next tickets."""
    # 409 contract_not_found when the project has no such open commitment.
    project = str(projects.require_project(company_id, project_id).id)
    found = directory(company_id, project)
    if contract_id is not None and found.commitment(contract_id) is None:
        raise _not_on_project(contract_id, project, "contract_id")
    kept = {"sub": sub.strip()[:SUB_KEY_CHARS], "contract_id": contract_id,
            "confirmed_by": actor, "confirmed_at": utcnow()}
    with write_transaction() as session:  # one row, whichever of two PMs confirms first
        table = SubCommitment.__table__
        statement = insert_or_merge(session, table).values(
            company_id=company_id, project_id=project, sub_key=sub_key(sub), **kept)
        session.execute(statement.on_conflict_do_update(
            index_elements=[table.c.company_id, table.c.project_id, table.c.sub_key], set_=kept))
    return SubCommitmentItem(sub=sub.strip(), commitment=resolve(sub, found, confirmed(
        company_id, project, sub)))


def project_commitments(company_id: int, project_id: str) -> CommitmentList:
    """A project's open commitments and each sub confirmed on it."""
    project = str(projects.require_project(company_id, project_id).id)
    found = directory(company_id, project)
    kept = db.session.scalars(select(SubCommitment).where(
        SubCommitment.company_id == company_id, SubCommitment.project_id == project)
        .order_by(SubCommitment.sub_key)).all()
    return CommitmentList(
        project_id=project,
        data=[CommitmentItem(id=c.id, kind=c.kind, number=c.number, title=c.title,
                             status=c.status, vendor_id=c.vendor_id, vendor_name=c.vendor_name)
              for c in found.commitments],
        confirmed=[SubCommitmentItem(sub=row.sub, commitment=resolve(row.sub, found, row))
                   for row in kept])
