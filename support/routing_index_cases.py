"""The corpus as in-process decisions and questions, for tests of the learned index itself."""
from __future__ import annotations

from services.routing.learned_words import words
from services.routing.learning import Evidence, Index
from support.routing_corpus import COST_TYPE, HISTORY, NEW


def evidence(history=HISTORY, start: int = 1) -> list[tuple[str, Evidence]]:
    """Each approved line of a history as a decision, oldest first, numbered from `start`."""
    found = []
    for sub, letter, description, lines in history:
        for kind, said, code in lines:
            found.append((kind, Evidence(
                id=start + len(found), project_id=letter, sub=sub, text=said, words=words(said),
                description_words=words(description), cost_code=code,
                cost_type=COST_TYPE[kind], budget_code_id=None,
                budget_code=f"{code}.{COST_TYPE[kind][0].upper()}")))
    return found


def questions() -> list[tuple[str, str, str | None, str | None]]:
    """(kind, words, sub, description): the corpus's new lines, and every past line's words
    asked by its own sub, by another and by none."""
    asked = [(kind, said, sub, description) for sub, _l, description, kind, said, _w in NEW]
    for sub, _letter, description, lines in HISTORY:
        for kind, said, _code in lines:
            asked += [(kind, said, sub, description), (kind, said.upper(), "Bayside Rentals",
                                                       "Extra work"), (kind, said, None, None)]
    return list(dict.fromkeys(asked))


def answers(index: Index) -> list:
    """What the index suggests for each question, as plain tuples."""
    found = []
    for kind, said, sub, description in questions():
        s = index.suggest(kind, said, sub, description)
        found.append(None if s is None else
                     (s.cost_code, s.cost_type, s.budget_code, s.reason, s.other_sub))
    return found


def held_out_score() -> dict:
    """support/routing_heldout.py's figures: an index over its history, asked its held-out lines."""
    from support import routing_heldout

    index = Index.of((kind, Evidence(
        id=number, project_id="A", sub=sub, text=said, words=words(said), description_words="",
        cost_code=code, cost_type=COST_TYPE[kind], budget_code_id=None, budget_code=code))
        for number, (sub, kind, said, code) in enumerate(routing_heldout.HISTORY, start=1))

    def suggest(kind: str, said: str, sub: str) -> str | None:
        """The cost code suggested, if any."""
        found = index.suggest(kind, said, sub, None)
        return found.cost_code if found else None

    return routing_heldout.score(suggest)
