"""Many distinct wordings of cost lines, made deterministically from the routing corpus's
vocabulary, for measuring routing that learns at a company's scale (bench/learning.py) and
for testing the learned index past its narrowing (tests/test_routing_index.py).

A wording is a base, one of the corpus's own past lines (support/routing_corpus.py, on the
PM's code for it) or one more trade or thing below (on a code of its own), with up to three
places or qualifiers around it, and one word in seven of five letters or more misspelt; now
and then the PM put it on another code. Distinct means distinct telling words
(services/routing/learned_words.words), so a wording is never the same line in other case,
sizes or Spanish.
"""
from __future__ import annotations

import random

from services.routing.learned_words import words
from support.routing_corpus import HISTORY

# Beyond the corpus's own lines, what else crews call the work: trades (with their Spanish and
# short forms) for labor, machines and materials (with brand names) for the rest.
TRADES = ["framer", "carpenter", "laborer", "electrician", "plumber", "ironworker", "finisher",
          "drywall hanger", "taper", "painter", "operator", "welder", "helper", "foreman",
          "pipe fitter", "mason", "roofer", "glazier", "insulator", "flagger", "carpintero",
          "ayudante", "electricista", "plomero", "pintor", "soldador", "albanil", "peon",
          "sprinkler fitter", "sheet metal worker", "millwright", "tile setter", "cement mason",
          "rodbuster", "surveyor", "teamster", "boilermaker", "elevator mechanic",
          "waterproofer", "caulker", "elec", "carp", "lbr", "jman", "appr"]
THINGS = ["scissor lift", "boom lift", "dumpster", "excavator", "skid steer", "generator",
          "rebar", "plywood", "studs", "conduit", "wire", "pipe", "grout", "concrete", "lumber",
          "drywall", "paint", "sealant", "anchors", "fasteners", "telehandler", "light tower",
          "compressor", "pump", "trench box", "forklift", "backhoe", "mini excavator", "roller",
          "plate compactor", "jackhammer", "core drill", "romex", "emt", "pex", "copper", "pvc",
          "gypsum board", "joint compound", "insulation batts", "tyvek", "flashing", "caulk",
          "epoxy", "mortar", "cmu block", "tile", "thinset", "unistrut", "hilti anchors",
          "simpson straps", "osb", "hardie", "genie lift", "jlg boom", "bobcat", "andamio",
          "varilla", "tablaroca", "contenedor"]
# Where and which: qualifiers put around a trade or thing (a line says up to three).
PLACES = ["apprentice", "journeyman", "lead", "night", "extra", "second", "temp", "general",
          "finish", "rough", "site", "crew", "shift", "north", "south", "east", "west", "upper",
          "lower", "weekend", "standby", "cleanup", "layout", "level", "garage", "lobby", "roof",
          "basement", "stair", "corridor", "podium", "tower", "annex", "mezzanine", "parking",
          "loading", "dock", "retail", "unit", "amenity", "pool", "courtyard", "elevator",
          "shaft", "trailer", "gate", "fence", "rental", "owner", "tenant", "punch", "rework",
          "patch", "demo", "install", "remove", "relocate", "temporary", "permanent", "fire",
          "rated", "acoustic", "exterior", "interior", "deck", "slab", "footing", "wall",
          "ceiling", "soffit", "piso", "nivel", "sotano", "azotea", "noche", "extra"]
# The cost codes the extra trades and things go to (each one's code is the PM's habit for it).
CODES = ["01-740", "02-410", "03-100", "03-200", "03-300", "05-120", "05-500", "06-100",
         "07-210", "08-110", "09-250", "09-900", "22-100", "26-050", "31-230", "02-200",
         "01-310", "09-650", "07-900", "04-200"]


KINDS = ("labor", "labor", "equipment", "materials")  # labor on half the lines


def _bases() -> dict[str, list[tuple[str, str]]]:
    """Per kind, the (words, cost code) a wording is built on: the corpus's own lines first."""
    found: dict[str, dict[str, str]] = {kind: {} for kind in KINDS}
    for _sub, _letter, _description, lines in HISTORY:
        for kind, said, code in lines:
            found[kind].setdefault(said, code)
    for kind, extra in (("labor", TRADES), ("equipment", THINGS), ("materials", THINGS)):
        for number, said in enumerate(extra):
            found[kind].setdefault(said, CODES[(number * 7 + len(kind)) % len(CODES)])
    return {kind: list(bases.items()) for kind, bases in found.items()}


def wordings(count: int, seed: int) -> list[tuple[str, str, str]]:
    """`count` lines of distinct telling words, the same for the same seed: (kind, text, the
    cost code the PM put it on)."""
    rng = random.Random(seed)
    bases = _bases()

    def typo(word: str) -> str:
        """A crew's misspelling of a word now and then: a letter dropped, doubled or swapped."""
        if len(word) < 5 or rng.random() > 0.15:
            return word
        i = rng.randrange(1, len(word) - 1)
        return rng.choice([word[:i] + word[i + 1:], word[:i] + word[i] + word[i:],
                           word[:i] + word[i + 1] + word[i] + word[i + 2:]])

    found: dict[tuple[str, str], tuple[str, str, str]] = {}
    while len(found) < count:
        kind = rng.choice(KINDS)
        base, code = rng.choice(bases[kind])
        parts = rng.sample(PLACES, rng.choice([0, 1, 1, 2, 2, 3]))
        text = " ".join(typo(w) for w in [*parts[:1], *base.split(), *parts[1:]])
        if rng.random() < 0.05:  # a PM's exception to the habit
            code = rng.choice(CODES)
        said = words(text)
        if said and (kind, said) not in found:
            found[kind, said] = (kind, text, code)
    return list(found.values())
