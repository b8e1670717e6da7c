"""Routing that learns: every written line's budget code is kept with what the line said, and a
line whose own cost code does not settle it is routed where this company's PM put the most
similar lines before.

Learning is at the company's cost code and cost type, so a choice made on one project routes a
line on another to that project's own budget code for the same pair. The similarity is
rapidfuzz's (WRatio over the lines' telling words: any order, misspellings, short forms), with
Spanish and shorthand trade words read through services/routing/learned_words.py. A suggestion is a
suggestion: the line stays `exact: false, needs_review: true` and says where it came from.

A company's index scores only the wordings that share a word with the line, or a word
misspelt or run together (at most CANDIDATES of them), so a lookup costs about the same at
1,000 wordings as at 20,000. New decisions go into the same index in place; an answer kept
for some words is dropped only when a new wording is alike enough to change it. The index
keeps its decisions and answers as plain tuples of strings and numbers, which Python's cycle
collector stops tracking: a full collection does not walk 50,000 decisions in the middle of
a crew's request.
"""
from __future__ import annotations

import bisect
import itertools
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

from flask import current_app, g, has_request_context
from rapidfuzz import fuzz, process
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from models import RoutingDecision, db, utcnow
from models import Ticket as TicketRecord
from services.platform.database import write_transaction
from services.routing.learned_words import fold, words
from services.routing.routing import said

# How alike a line's words must be to a routed line's (0-100) to take its code at all; lines
# within CLOSE of the best match count as the same words. A ticket's description decides
# between codes the same words went to only when it is at least as alike as DESCRIPTION_MATCH.
LINE_MATCH = 80
CLOSE = 4
DESCRIPTION_MATCH = 60
# How many of a company's wordings a lookup scores at most (those most like the line's words);
# a word filed under more wordings than this is a common one.
CANDIDATES = 50
_NUMBER_BITS = 32
_NUMBER = (1 << _NUMBER_BITS) - 1
KINDS = ("labor", "equipment", "materials")


class Evidence(NamedTuple):
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


# An index keeps each decision as a plain tuple, its Evidence's fields then its code (a plain
# tuple holds nothing the cycle collector must follow, so it stops tracking it).
_FIELDS = len(Evidence._fields)
_ID, _SUB, _DESCRIPTION = (Evidence._fields.index(name) for name in (
    "id", "sub", "description_words"))
_CODE = _FIELDS
_id_of = itemgetter(_ID)


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


def _pieces(word: str) -> frozenset[str]:
    """A word's character pairs, its ends marked ('lift' -> ' l', 'li', 'if', 'ft', 't ')."""
    padded = f" {word} "
    return frozenset(padded[i:i + 2] for i in range(len(padded) - 1))


class Index:
    """A company's decisions grouped by kind of line and by the words the line said, with each
    word's wordings and each character pair's words, so that a lookup scores only the wordings
    that share a word, or most of a word's letters, with the line (CANDIDATES at most).

    Newer decisions are added in place under the index's own lock; an answer kept for some
    words is dropped only when a new wording is alike enough to change it.
    """

    def __init__(self) -> None:
        # Per kind, each wording's decisions oldest first, as plain tuples (see _CODE).
        self.groups: dict[str, dict[str, tuple[tuple, ...]]] = {kind: {} for kind in KINDS}
        self.last_id = 0
        # How many decisions were taken in, those whose words say nothing included.
        self.size = 0
        self._lock = threading.Lock()
        # Per kind: the wordings in the order first seen (a wording's number is its place);
        # each word's CANDIDATES shortest wordings (as ranks: word count, then number, in
        # one int), each character pair's words, each word's alike words.
        self._keys: dict[str, list[str]] = {kind: [] for kind in KINDS}
        self._by_word: dict[str, dict[str, list[int]]] = {kind: {} for kind in KINDS}
        self._by_piece: dict[str, dict[str, list[str]]] = {kind: {} for kind in KINDS}
        self._near: dict[str, dict[str, list[str]]] = {kind: {} for kind in KINDS}
        # Answers kept per kind and words asked, as plain tuples of a Suggestion's fields
        # (dropped when a new wording is alike).
        self._answers: dict[str, dict[str, dict[tuple, tuple | None]]] = {
            kind: {} for kind in KINDS}
        self._kept = 0
        self._codes: dict[tuple[str, str], tuple[str, str]] = {}
        self._texts: dict[str, dict[str, None]] = {}
        self._joined: dict[str, str] = {}

    @classmethod
    def of(cls, kinds_and_evidence: Iterable[tuple[str, Evidence]]) -> Index:
        """An index over decisions given oldest first."""
        index = cls()
        index.add(kinds_and_evidence)
        return index

    def add(self, kinds_and_evidence: Iterable[tuple[str, Evidence]]) -> None:
        """Take in newer decisions, oldest first, in place."""
        with self._lock:
            grown: dict[tuple[str, str], list[tuple]] = {}
            for kind, evidence in kinds_and_evidence:
                self.last_id = max(self.last_id, evidence.id)
                self.size += 1
                if kind not in self.groups or not evidence.words:
                    continue
                if evidence.words not in self.groups[kind]:
                    self.groups[kind][evidence.words] = ()
                    self._new_wording(kind, evidence.words)
                code = self._codes.setdefault(evidence.code, evidence.code)
                grown.setdefault((kind, evidence.words), []).append((*evidence, code))
                texts = self._texts.setdefault(code[0], {})
                if len(texts) < 20 and evidence.text not in texts:
                    texts[evidence.text] = None
                    self._joined[code[0]] = " ".join(texts)
            for (kind, said), rows in grown.items():
                self.groups[kind][said] += tuple(rows)
                self._forget_answers(kind, said)

    def _new_wording(self, kind: str, said: str) -> None:
        """Number a wording and file it under its words; a new word under its pairs and beside
        the words alike to it."""
        number = len(self._keys[kind])
        self._keys[kind].append(said)
        rank = said.count(" ") << _NUMBER_BITS | number
        by_word, by_piece, near = self._by_word[kind], self._by_piece[kind], self._near[kind]
        for word in said.split():
            if word not in by_word:
                by_word[word] = []
                near[word] = self._alike_words(kind, word)
                for other in near[word]:
                    near[other].append(word)
                for piece in _pieces(word):
                    by_piece.setdefault(piece, []).append(word)
            shortest = by_word[word]
            if len(shortest) < CANDIDATES or rank < shortest[-1]:
                bisect.insort(shortest, rank)
                del shortest[CANDIDATES:]

    def _alike_words(self, kind: str, word: str) -> list[str]:
        """The other words of a kind's wordings that are a word misspelt (sharing half the
        character pairs of the longer) or holding it or held in it ('boom' in 'boomlift':
        all but one of the shorter's pairs, of four or more)."""
        pieces = _pieces(word)
        shared: Counter[str] = Counter()
        for piece in pieces:
            shared.update(self._by_piece[kind].get(piece, ()))
        size = len(pieces)
        return [other for other, count in shared.items() if other != word and (
            2 * count >= max(size, len(other) + 1) or count >= min(size, len(other) + 1) - 1 >= 4)]

    def _forget_answers(self, kind: str, said: str) -> None:
        """Drop the answers kept for words a new decision's wording is alike enough to change."""
        kept = self._answers[kind]
        if not kept:
            return
        for asked, _score, _ in process.extract(said, list(kept), scorer=fuzz.WRatio,
                                                score_cutoff=LINE_MATCH, limit=None):
            self._kept -= len(kept.pop(asked))

    @property
    def texts_by_code(self) -> dict[str, str]:
        """What the lines put on each cost code said (folded cost code -> their words), for
        searching the picker by the company's own words; a copy, as decisions come in)."""
        with self._lock:
            return dict(self._joined)

    def suggest(self, kind: str, text: str, sub: str | None,
                description: str | None) -> Suggestion | None:
        """The code this company's PM gave the most similar lines, or None when nothing is alike
        (answers are kept until a decision for alike words comes in, as lines repeat)."""
        said = words(text)
        question = (text, sub, description)
        with self._lock:
            kept = self._answers.get(kind, {}).get(said)
            if kept is not None and question in kept:
                answer = kept[question]
            else:
                answer = self._suggest(kind, said, sub, description)
                if kind in self._answers:
                    if self._kept > 20_000:
                        for answers in self._answers.values():
                            answers.clear()
                        self._kept = 0
                    self._answers[kind].setdefault(said, {})[question] = answer
                    self._kept += 1
        return None if answer is None else Suggestion(*answer)

    def candidates(self, kind: str, said: str) -> list[str]:
        """The wordings of a kind worth scoring against some words, first seen first: those
        sharing a word, or a word misspelt or run together, with them (at most CANDIDATES,
        those sharing the most words and shortest first)."""
        keys, by_word, near = self._keys[kind], self._by_word[kind], self._near[kind]
        reached: list[set[int]] = []  # each word's wordings, as ranks
        for word in said.split():
            if word not in near:  # a word nobody wrote before
                alike = self._alike_words(kind, word)
            elif len(by_word[word]) < CANDIDATES:  # a rare word: its misspellings count too
                alike = [word, *near[word]]
            else:  # a common word: its own wordings are the ones most alike
                alike = [word]
            reached.append(set().union(*(by_word[other] for other in alike)))
        chosen = _most_shared(reached)
        return [keys[number] for number in sorted([rank & _NUMBER for rank in chosen])]

    def alike(self, kind: str, said: str, limit: int | None) -> list[tuple[str, float, int]]:
        """The wordings of a kind at least LINE_MATCH alike to some words, most alike first
        (first seen first among equals): rapidfuzz's WRatio over the candidates."""
        if not said or not self.groups.get(kind):
            return []
        return process.extract(said, self.candidates(kind, said), scorer=fuzz.WRatio,
                               score_cutoff=LINE_MATCH, limit=limit)

    def _suggest(self, kind: str, said: str, sub: str | None,
                 description: str | None) -> tuple | None:
        """The code this company's PM gave the most similar lines, worked out (a Suggestion's
        fields)."""
        groups = self.groups.get(kind) or {}
        matches = self.alike(kind, said, 10)
        if not matches:
            return None
        best = matches[0][1]
        pool = [row for match, score, _ in matches if score >= best - CLOSE
                for row in groups[match]]
        same_sub = _of_the_sub(pool, sub)
        pool = sorted(same_sub or pool, key=_id_of)  # decisions are kept in time order
        if len(pool) >= 2 and pool[-1][_CODE] == pool[-2][_CODE]:
            chosen = pool[-1][_CODE]  # the last two agree: a correction wins over an older habit
        else:
            chosen = _most_chosen(_by_the_work(pool, words(description or "")))
        backing = [row for row in pool if row[_CODE] == chosen]
        latest = Evidence._make(backing[-1][:_FIELDS])
        others = [] if same_sub else list(dict.fromkeys(
            row[_SUB] for row in reversed(backing) if row[_SUB]))
        # A Suggestion's fields, in their order.
        return (latest.cost_code, latest.cost_type, latest.budget_code_id, latest.budget_code,
                _reason(len(backing), latest, bool(same_sub), others), " and ".join(others) or None)


def _most_shared(reached: list[set[int]]) -> Iterable[int]:
    """Of the wordings each of a line's words reaches (as ranks), at most CANDIDATES: those
    reached by the most words, then the lowest ranks (the shortest, first seen first)."""
    union = set().union(*reached)
    if len(union) <= CANDIDATES:
        return union
    shared = set().union(*(one & other for one, other in itertools.combinations(reached, 2)))
    if len(shared) <= CANDIDATES:  # every wording reached twice or more is kept
        return [*shared, *sorted(union - shared)[:CANDIDATES - len(shared)]]
    return sorted(shared, key=lambda rank: (-sum(rank in words_ for words_ in reached), rank)
                  )[:CANDIDATES]


def _of_the_sub(pool: list[tuple], sub: str | None) -> list[tuple]:
    """Of a pool of decisions, those for the line's sub (names folded alike); none without one."""
    subs = {row[_SUB] for row in pool if row[_SUB]} if sub else set()
    own = {other for other in subs if fold(other) == fold(sub)}  # each sub folded once
    return [row for row in pool if row[_SUB] in own] if own else []


def _reason(count: int, latest: Evidence, same_sub: bool, others: list[str]) -> str:
    """Why a code is suggested: how often it was chosen, for whose words."""
    reason = f"chosen {_times(count)} for "
    if same_sub:
        reason += f"{possessive(latest.sub)} '{latest.text}'"
    elif len(others) == 1:  # another sub's habit, named so nobody takes it for this one's
        reason += f"{possessive(others[0])} '{latest.text}'"
    elif others:
        reason += f"other subs' '{latest.text}' ({', '.join(others)})"
    else:
        reason += f"'{latest.text}'"
    return reason


def _by_the_work(pool: list[tuple], described: str) -> list[tuple]:
    """Of decisions for the same words, those whose tickets described the same work, if any
    (the same 'Laborer' may be cleanup on one ticket and demolition on another)."""
    if not described or len({row[_CODE] for row in pool}) < 2:
        return pool
    alike: dict[str, float] = {}  # each description scored once
    for row in pool:
        if row[_DESCRIPTION] not in alike:
            alike[row[_DESCRIPTION]] = fuzz.token_set_ratio(described, row[_DESCRIPTION])
    top = max(alike.values())
    if top < DESCRIPTION_MATCH:
        return pool
    return [row for row in pool if alike[row[_DESCRIPTION]] >= top - CLOSE]


def _most_chosen(pool: list[tuple]) -> tuple[str, str]:
    """The code chosen most often in a pool of decisions, oldest first; the latest breaks a tie."""
    counts = Counter(row[_CODE] for row in pool)
    most = max(counts.values())
    return next(row[_CODE] for row in reversed(pool) if counts[row[_CODE]] == most)


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
        # Two scalar subqueries: the newest is read off the end of the company's index, where
        # max() beside count() in one select would walk all of it.
        of_company = RoutingDecision.company_id == company_id
        newest, count = db.session.execute(select(
            select(func.coalesce(func.max(RoutingDecision.id), 0)).where(of_company)
            .scalar_subquery(),
            select(func.count()).select_from(RoutingDecision).where(of_company)
            .scalar_subquery())).one()
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
        known = indexes.get(company_id)
        if known is None or (known.last_id, known.size) != (latest, count):
            # The newer decisions added in place (readers wait on the index's own lock while
            # they go in), or all of them read again when some were forgotten.
            if known is not None and known.size <= count:
                known.add(_evidence(db.session.execute(
                    select(*COLUMNS).where(RoutingDecision.company_id == company_id,
                                           RoutingDecision.id > known.last_id)
                    .order_by(RoutingDecision.id))))
            if known is None or known.size != count:
                known = Index.of(_evidence(db.session.execute(
                    select(*COLUMNS).where(RoutingDecision.company_id == company_id)
                    .order_by(RoutingDecision.id))))
            indexes[company_id] = known
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
    if index is None:
        return Explained(suggestion=None, decisions=[])
    suggestion = index.suggest(kind, text, sub, description)
    with index._lock:
        scored = {row[_ID]: score for wording, score, _ in index.alike(kind, words(text), None)
                  for row in index.groups[kind][wording]}
    best = sorted(scored, key=lambda id_: (-scored[id_], -id_))[:limit]
    rows = {row.id: row for row in db.session.scalars(select(RoutingDecision).where(
        RoutingDecision.company_id == company_id, RoutingDecision.id.in_(best)))}
    return Explained(suggestion=suggestion,
                     decisions=[(scored[id_], rows[id_]) for id_ in best if id_ in rows])


def forget(company_id: int, decision_ids: list[int]) -> int:
    """Drop some of a company's decisions (a mistaken one); how many went."""
    with write_transaction() as session:
        doomed = list(session.scalars(select(RoutingDecision).where(
            RoutingDecision.company_id == company_id, RoutingDecision.id.in_(decision_ids))))
        for row in doomed:
            session.delete(row)
    return len(doomed)
