"""The words routing compares: a line's text folded to plain lower-case words, with the trade
words crews write in Spanish or cut short read as the English word the rest of the company's
lines use, and the words that say nothing about where money lands left out.

This is data for the text similarity (services/routing/learning.py), not a matcher of its own: a word
not listed here is compared as it is written, misspellings and all.
"""
from __future__ import annotations

import functools
import re
import unicodedata

_WORD = re.compile(r"[a-z0-9]+")
_MARKS = re.compile("[\u0300-\u036f]")

# Words that say nothing about the work's code: units, sizes, fillers, in both languages (and
# any word with a digit in it: a size or a count, not a trade).
QUIET = frozenset("""
a al an and at by de del el en for from h hr hrs hour hours horas hora in inch inches la las
los of on or para per por the to un una with y x con sin day days dia dias ea each no num
awg ga gauge psi yard yards yd ft lf sf type tipo pulgada pulgadas
""".split())

# A crew's word -> the word the company's other lines use for the same thing.
SAME_AS = {
    # Spanish trades and crew
    "ayudante": "helper", "ayudantes": "helper", "peon": "laborer", "peones": "laborer",
    "obrero": "laborer", "obreros": "laborer", "trabajador": "laborer",
    "trabajadores": "laborer", "jornalero": "laborer", "carpintero": "carpenter",
    "carpinteros": "carpenter", "electricista": "electrician", "electricistas": "electrician",
    "plomero": "plumber", "plomeros": "plumber", "fontanero": "plumber",
    "pintor": "painter", "pintores": "painter", "soldador": "welder", "soldadores": "welder",
    "albanil": "mason", "albaniles": "mason", "herrero": "ironworker", "fierrero": "ironworker",
    "armador": "ironworker", "operador": "operator", "operadores": "operator",
    "capataz": "foreman", "mayordomo": "foreman", "supervisor": "foreman",
    "instalador": "installer", "acabador": "finisher", "acabadores": "finisher",
    "yesero": "drywall", "tablaroquero": "drywall", "techador": "roofer",
    "aprendiz": "apprentice", "oficial": "journeyman",
    # Spanish work and materials
    "limpieza": "cleanup", "limpiar": "cleanup", "limpio": "cleanup", "aseo": "cleanup",
    "escombro": "debris", "escombros": "debris", "basura": "trash",
    "demolicion": "demolition", "demoler": "demolition", "excavacion": "excavation",
    "excavar": "excavation", "zanja": "trench", "relleno": "backfill",
    "concreto": "concrete", "hormigon": "concrete", "cemento": "concrete",
    "colado": "pour", "vaciado": "pour", "cimbra": "formwork", "encofrado": "formwork",
    "varilla": "rebar", "acero": "steel", "estructura": "structural",
    "madera": "lumber", "triplay": "plywood", "montante": "stud", "montantes": "stud",
    "poste": "stud", "postes": "stud", "tablaroca": "drywall", "yeso": "gypsum",
    "pintura": "paint", "pintar": "paint", "aislamiento": "insulation", "sellador": "sealant",
    "tuberia": "pipe", "tubo": "pipe", "tubos": "pipe", "cable": "wire", "cables": "wire",
    "puerta": "door", "puertas": "door", "marco": "frame", "marcos": "frame",
    "bloque": "block", "bloques": "block", "ladrillo": "brick", "mortero": "mortar",
    "andamio": "scaffold", "andamios": "scaffold", "grua": "crane", "camion": "truck",
    "montacargas": "forklift", "retroexcavadora": "backhoe", "excavadora": "excavator",
    "tijera": "scissor", "elevador": "lift", "compactadora": "compactor",
    "generador": "generator", "contenedor": "dumpster",
    # Short forms
    "lbr": "laborer", "labr": "laborer", "lab": "laborer", "carp": "carpenter",
    "elec": "electrician", "electr": "electrician", "plmb": "plumber", "plbr": "plumber",
    "fmn": "foreman", "frmn": "foreman", "opr": "operator", "oper": "operator",
    "hlpr": "helper", "appr": "apprentice", "apprent": "apprentice", "jman": "journeyman",
    "jrnymn": "journeyman", "jw": "journeyman", "conc": "concrete", "demo": "demolition",
    "exc": "excavator", "excav": "excavation", "skid": "skidsteer", "bobcat": "skidsteer",
    "genie": "lift", "jlg": "lift", "drywaller": "drywall", "sheetrock": "drywall",
    "rock": "drywall", "taper": "drywall", "mud": "drywall",
    "ironworkers": "ironworker", "iw": "ironworker", "pf": "pipefitter",
    "fitter": "pipefitter", "sprinkler": "sprinkler", "finishers": "finisher",
    "cleanup": "cleanup", "clean": "cleanup", "cleaning": "cleanup",
}


def fold(text: str) -> str:
    """Text without accents, in lower case (a tilde or an accent never splits two words)."""
    return _MARKS.sub("", unicodedata.normalize("NFKD", text or "")).casefold()


@functools.lru_cache(maxsize=65_536)
def words(text: str) -> str:
    """The telling words of a text, each as the company's lines spell it."""
    found = []
    for word in _WORD.findall(fold(text)):
        word = SAME_AS.get(word, word)
        if word not in QUIET and word not in found and not any(ch.isdigit() for ch in word):
            found.append(word)
    return " ".join(found)


def _variants() -> dict[str, list[str]]:
    """Each English word with the crew's words that read as it."""
    found: dict[str, list[str]] = {}
    for word, same in SAME_AS.items():
        if word != same:
            found.setdefault(same, []).append(word)
    return found


VARIANTS = _variants()


def searchable(text: str) -> str:
    """A text as a picker searches it: folded, with the Spanish and short words for its words
    (so 'limpieza' finds 'Cleaning and Waste Management')."""
    folded = fold(text)
    extra = [variant for word in words(text).split() for variant in VARIANTS.get(word, ())]
    return " ".join([folded, *extra])


def ticket_words(lines: list, texts: str | None) -> str:
    """What the queue search finds a ticket by beyond its own columns: what each of its lines
    said and `texts` (its sub, or each field declared for search), folded, with the Spanish and
    English words for them (so 'ayudante' finds a 'Helper' line and 'helper' an 'Ayudante' one)."""
    said = []
    for line in lines or []:
        if not isinstance(line, dict) or line.get("kind") == "markup":
            continue
        parts = [line.get("trade"), line.get("classification")] if line.get("kind") == "labor" \
            else [line.get("description")]
        said += [part for part in parts if isinstance(part, str) and part.strip()]
    joined = " ".join([*said, texts or ""])
    return " ".join(dict.fromkeys([searchable(joined), words(joined)]))[:8000]
