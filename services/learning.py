"""Routing that learns: every written line's budget code is kept with what the line said, and a
line whose own cost code does not settle it is routed where this company's PM put the most
similar lines before.

Learning is at the company's cost code and cost type, so a choice made on one project routes a
line on another to that project's own budget code for the same pair. The similarity is
rapidfuzz's (WRatio over the lines' telling words: any order, misspellings, short forms), with
Spanish and shorthand trade words read through services/learned_words.py. A suggestion is a
suggestion: the line stays `exact: false, needs_review: true` and says where it came from.
"""
from __future__ import annotations

import functools
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from flask import current_app, g, has_request_context
from rapidfuzz import fuzz, process
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from models import RoutingDecision, db, utcnow
from models import Ticket as TicketRecord
from services.database import write_transaction
from services.learned_words import fold, words
from services.routing import said

# How alike a line's words must be to a routed line's (0-100) to take its code at all; lines
# within CLOSE of the best match count as the same words. A ticket's description decides
# between codes the same words went to only when it is at least as alike as DESCRIPTION_MATCH.
LINE_MATCH = 80
CLOSE = 4
DESCRIPTION_MATCH = 60
KINDS = ("labor", "equipment", "materials")


@dataclass(frozen=True, slots=True)
class Evidence:
    """One decision: where a PM put a line that said these words."""

    id: int
    project_id: str
    sub: str | None
    text: str
    words: str
    description_words: str
    cost_code: str
    cost_type: str
    budget_code_id: int | None
    budget_code: str

    @property
    def code(self) -> tuple[str, str]:
        """The company-level code chosen: cost code and cost type."""
        return fold(self.cost_code), self.cost_type


@dataclass(frozen=True)
class Suggestion:
    """Where the company's past decisions put lines like this one, and why."""

    cost_code: str
    cost_type: str
    budget_code_id: int | None
    budget_code: str
    reason: str
    # The subs or crews whose decisions these are ('Bayside Rentals', 'A and B'), when not the
    # ticket's own (None when they are its own, or name no sub).
    other_sub: str | None = None


def possessive(name: str) -> str:
    """'Summit Framing's', 'Bayside Rentals''."""
    return f"{name}'" if name.endswith(("s", "S")) else f"{name}'s"


def _times(count: int) -> str:
    """'once', 'twice', '4 times'."""
    return {1: "once", 2: "twice"}.get(count, f"{count} times")


@dataclass
class Index:
    """A company's decisions grouped by kind of line and by the words the line said."""

    groups: dict[str, dict[str, list[Evidence]]] = field(
        default_factory=lambda: {kind: {} for kind in KINDS})
    last_id: int = 0
    # How many decisions were taken in, those whose words say nothing included.
    size: int = 0
    _keys: dict[str, list[str]] = field(default_factory=dict)
    _answers: dict[tuple, Suggestion | None] = field(default_factory=dict)

    @classmethod
    def of(cls, kinds_and_evidence: Iterable[tuple[str, Evidence]]) -> Index:
        """An index over decisions given oldest first."""
        index = cls()
        index.add(kinds_and_evidence)
        return index

    def add(self, kinds_and_evidence: Iterable[tuple[str, Evidence]]) -> None:
        """Take in newer decisions, oldest first."""
        for kind, evidence in kinds_and_evidence:
            self.last_id = max(self.last_id, evidence.id)
            self.size += 1
            if kind in self.groups and evidence.words:
                self.groups[kind].setdefault(evidence.words, []).append(evidence)
        self._keys.clear()
        self._answers.clear()
        self.__dict__.pop("texts_by_code", None)

    @functools.cached_property
    def texts_by_code(self) -> dict[str, str]:
        """What the lines put on each cost code said (folded cost code -> their words), for
        searching the picker by the company's own words."""
        found: dict[str, dict[str, None]] = {}
        for groups in self.groups.values():
            for evidence in (e for group in groups.values() for e in group):
                texts = found.setdefault(fold(evidence.cost_code), {})
                if len(texts) < 20:
                    texts[evidence.text] = None
        return {code: " ".join(texts) for code, texts in found.items()}

    def copy(self) -> Index:
        """An index holding the same decisions, to take in newer ones while this one is read."""
        return Index(groups={kind: {said: list(found) for said, found in groups.items()}
                             for kind, groups in self.groups.items()},
                     last_id=self.last_id, size=self.size)

    def suggest(self, kind: str, text: str, sub: str | None,
                description: str | None) -> Suggestion | None:
        """The code this company's PM gave the most similar lines, or None when nothing is alike
        (answers are kept until newer decisions come in, as lines repeat)."""
        question = (kind, text, sub, description)
        if question not in self._answers:
            if len(self._answers) > 20_000:
                self._answers.clear()
            self._answers[question] = self._suggest(kind, text, sub, description)
        return self._answers[question]

    def _suggest(self, kind: str, text: str, sub: str | None,
                 description: str | None) -> Suggestion | None:
        """The code this company's PM gave the most similar lines, worked out."""
        said = words(text)
        groups = self.groups.get(kind) or {}
        if not said or not groups:
            return None
        if kind not in self._keys:
            self._keys[kind] = list(groups)
        matches = process.extract(said, self._keys[kind], scorer=fuzz.WRatio,
                                  score_cutoff=LINE_MATCH, limit=10)
        if not matches:
            return None
        best = matches[0][1]
        pool = [e for match, score, _ in matches if score >= best - CLOSE for e in groups[match]]
        same_sub = [e for e in pool if sub and e.sub and fold(e.sub) == fold(sub)]
        pool = sorted(same_sub or pool, key=lambda e: e.id)  # decisions are kept in time order
        if len(pool) >= 2 and pool[-1].code == pool[-2].code:
            chosen = pool[-1].code  # the last two agree: a correction wins over an older habit
        else:
            chosen = _most_chosen(_by_the_work(pool, words(description or "")))
        backing = [e for e in pool if e.code == chosen]
        latest = backing[-1]
        others = [] if same_sub else list(dict.fromkeys(e.sub for e in reversed(backing) if e.sub))
        reason = f"chosen {_times(len(backing))} for "
        if same_sub:
            reason += f"{possessive(latest.sub)} '{latest.text}'"
        elif len(others) == 1:  # another sub's habit, named so nobody takes it for this one's
            reason += f"{possessive(others[0])} '{latest.text}'"
        elif others:
            reason += f"other subs' '{latest.text}' ({', '.join(others)})"
        else:
            reason += f"'{latest.text}'"
        return Suggestion(cost_code=latest.cost_code, cost_type=latest.cost_type,
                          budget_code_id=latest.budget_code_id, budget_code=latest.budget_code,
                          reason=reason, other_sub=" and ".join(others) or None)


def _by_the_work(pool: list[Evidence], described: str) -> list[Evidence]:
    """Of decisions for the same words, those whose tickets described the same work, if any
    (the same 'Laborer' may be cleanup on one ticket and demolition on another)."""
    if not described or len({e.code for e in pool}) < 2:
        return pool
    scored = [(fuzz.token_set_ratio(described, e.description_words), e) for e in pool]
    top = max(score for score, _ in scored)
    if top < DESCRIPTION_MATCH:
        return pool
    return [e for score, e in scored if score >= top - CLOSE]


def _most_chosen(pool: list[Evidence]) -> tuple[str, str]:
    """The code chosen most often in a pool of decisions, oldest first; the latest breaks a tie."""
    counts = Counter(e.code for e in pool)
    most = max(counts.values())
    return next(e.code for e in reversed(pool) if counts[e.code] == most)


# ------------------------------------------------------------------ keeping decisions

def record(session: Session, ticket: TicketRecord, routes: list, cost_code_of: Callable,
           by_person: Callable[[Any], bool]) -> None:
    """Keep each written line's final budget code with what the line said (inside the
    approval's own write): the crew's exact code kept, or a code a person picked or confirmed.
    A guess nobody confirmed teaches nothing."""
    now = utcnow()
    for route in routes:
        if route.kind == "markup" or route.budget_code is None:
            continue
        chosen = by_person(route)
        if not chosen and not route.exact:
            continue
        line = ticket.lines[route.line]
        text = said(line)
        if not text:
            continue
        crew_code = (line.get("costCode") or "").strip() or None
        code = route.budget_code
        session.add(RoutingDecision(
            company_id=ticket.company_id, project_id=ticket.project_id, ticket_id=ticket.id,
            line=route.line, kind=route.kind, text=text[:300],
            description=ticket.description or "", sub=ticket.sub,
            crew_cost_code=crew_code[:60] if crew_code else None,
            cost_code=(cost_code_of(code) or code.flat_code)[:60],
            cost_type=code.cost_type or route.cost_type, budget_code_id=code.id,
            budget_code=code.flat_code[:100], how="chosen" if chosen else "crew_code",
            decided_at=now))


# ------------------------------------------------------------------ the company's index

_lock = threading.Lock()
COLUMNS = (RoutingDecision.id, RoutingDecision.kind, RoutingDecision.project_id,
           RoutingDecision.sub, RoutingDecision.text, RoutingDecision.description,
           RoutingDecision.cost_code, RoutingDecision.cost_type, RoutingDecision.budget_code_id,
           RoutingDecision.budget_code)


def _evidence(rows) -> Iterable[tuple[str, Evidence]]:
    """Decision rows as evidence, their repeated words shared rather than copied."""
    share = sys.intern
    for (id_, kind, project_id, sub, text, description, cost_code, cost_type, budget_code_id,
         budget_code) in rows:
        yield kind, Evidence(
            id=id_, project_id=share(project_id), sub=share(sub) if sub else None,
            text=share(text), words=share(words(text)),
            description_words=share(words(description)), cost_code=share(cost_code),
            cost_type=share(cost_type), budget_code_id=budget_code_id,
            budget_code=share(budget_code))


def _latest(company_id: int) -> tuple[int, int]:
    """The newest decision of a company and how many it has (read once per request)."""
    cached = g.setdefault("learning_latest", {}) if has_request_context() else {}
    if company_id not in cached:
        newest, count = db.session.execute(
            select(func.coalesce(func.max(RoutingDecision.id), 0), func.count())
            .where(RoutingDecision.company_id == company_id)).one()
        cached[company_id] = (int(newest), int(count))
    return cached[company_id]


def index_for(company_id: int, *, read: bool = True) -> Index | None:
    """A company's decisions as this process knows them, brought up to date from the database
    (`read`), or as they are (None when never read) without touching it."""
    indexes = current_app.extensions.setdefault("routing_decisions", {})
    known = indexes.get(company_id)
    if not read:
        return known
    latest, count = _latest(company_id)
    if known is not None and (known.last_id, known.size) == (latest, count):
        return known
    with _lock:
        known = indexes.get(company_id) or Index()
        if (known.last_id, known.size) != (latest, count):
            # A new index, as other threads may be reading this one: the newer decisions added,
            # or all of them read again when some were forgotten.
            fresh = known.copy() if known.size <= count else Index()
            fresh.add(_evidence(db.session.execute(
                select(*COLUMNS).where(RoutingDecision.company_id == company_id,
                                       RoutingDecision.id > fresh.last_id)
                .order_by(RoutingDecision.id))))
            if fresh.size != count:
                fresh = Index.of(_evidence(db.session.execute(
                    select(*COLUMNS).where(RoutingDecision.company_id == company_id)
                    .order_by(RoutingDecision.id))))
            indexes[company_id] = known = fresh
    return known


def suggester(ticket: TicketRecord, *, read: bool = True
              ) -> Callable[[str, str], Suggestion | None] | None:
    """Suggestions for a ticket's lines from its company's decisions (None when none are known)."""
    index = index_for(ticket.company_id, read=read)
    if index is None or not index.last_id:
        return None
    return lambda kind, text: index.suggest(kind, text, ticket.sub, ticket.description)


def words_by_code(company_id: int) -> dict[str, str]:
    """What the company's routed lines said, by folded cost code (nothing when none are known)."""
    index = index_for(company_id)
    return index.texts_by_code if index is not None else {}


# ------------------------------------------------------------------ seeing and undoing

@dataclass(frozen=True)
class Explained:
    """What routing would suggest for some words, and the decisions most like them."""

    suggestion: Suggestion | None
    decisions: list[tuple[float, RoutingDecision]]


def explain(company_id: int, text: str, kind: str = "labor", sub: str | None = None,
            description: str | None = None, limit: int = 10) -> Explained:
    """The suggestion for a line's words and the company's decisions behind it, most alike first."""
    index = index_for(company_id)
    suggestion = index.suggest(kind, text, sub, description) if index else None
    said_words = words(text)
    rows = db.session.scalars(select(RoutingDecision).where(
        RoutingDecision.company_id == company_id, RoutingDecision.kind == kind)
        .order_by(RoutingDecision.id.desc()).limit(50_000))
    scored = [(fuzz.WRatio(said_words, words(row.text)), row) for row in rows] if said_words else []
    scored = [(score, row) for score, row in scored if score >= LINE_MATCH]
    scored.sort(key=lambda pair: (-pair[0], -pair[1].id))
    return Explained(suggestion=suggestion, decisions=scored[:limit])


def forget(company_id: int, decision_ids: list[int]) -> int:
    """Drop some of a company's decisions (a mistaken one); how many went."""
    with write_transaction() as session:
        doomed = list(session.scalars(select(RoutingDecision).where(
            RoutingDecision.company_id == company_id, RoutingDecision.id.in_(decision_ids))))
        for row in doomed:
            session.delete(row)
    return len(doomed)
