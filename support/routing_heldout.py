"""A second routing corpus, written from crews' own wordings and not beside the synonym table
in services/routing/learned_words.py: short forms, Spanish, misspellings and brand names as they come
in on real tickets. Each code's wordings are split in two: HISTORY is what the PM approved
(what routing learns from) and HELD_OUT is what crews send next, never seen by the index.
A held-out line whose code is None has nothing like it in the history: it should stay
unrouted (a suggestion for it is a wrong one).
"""
from __future__ import annotations

# (sub, kind, cost code, wordings the PM approved there, wordings sent next)
CODES = [
    ("Summit Framing", "labor", "06-100",
     ["Framer", "Carpenter", "Framing carpenter", "Rough carpenter", "Framer lead",
      "Carpintero de obra negra"],
     ["framing crew", "carp. framer", "Framming carpenter", "rough carp", "lead framer",
      "carpinteros"]),
    ("Summit Framing", "labor", "09-250",
     ["Drywall hanger", "Drywall taper", "Drywall finisher", "Board hanger", "Sheetrock hanger",
      "Tablaroquero"],
     ["drywll hangers", "taper/finisher", "sheet rock crew", "hanger - drywall",
      "tablaroqueros", "board finisher level 5"]),
    ("Summit Framing", "materials", "09-250",
     ["Metal studs 3-5/8 20ga", "5/8 Type X gypsum board", "USG Sheetrock 1/2", "Joint compound",
      "Paper tape", "Corner bead"],
     ["mtl studs 6\"", "gyp bd 5/8 type x", "sheetrock 4x12", "all purpose mud",
      "corner bead 10ft", "joint tape"]),
    ("Summit Framing", "equipment", "09-250",
     ["Scissor lift", "Genie scissor lift", "Drywall lift", "Baker scaffold"],
     ["sissor lift 19'", "skyjack scissor", "panel lift", "bakers scaffold"]),
    ("Bolt Electric", "labor", "26-050",
     ["Electrician", "Journeyman electrician", "Apprentice electrician", "Electrical foreman",
      "Electricista", "Wireman"],
     ["elec journeyman", "JW electrician", "apprentice elec.", "electrican foreman",
      "electricistas", "inside wireman"]),
    ("Bolt Electric", "materials", "26-050",
     ["EMT conduit 3/4", "12 AWG THHN wire", "MC cable 12/2", "Romex 12/2", "Junction box 4 sq",
      "Unistrut channel"],
     ["3/4 emt", "thhn #10 blk", "mc 12-3", "romex 14/2", "4\" sq box w/ ring",
      "strut channel 1-5/8"]),
    ("Rivera Concrete", "labor", "03-300",
     ["Concrete finisher", "Cement mason", "Concrete laborer", "Finisher helper",
      "Acabador de concreto", "Ayudante de colado"],
     ["conc finisher", "cement finisher", "mason (concrete)", "helper finisher",
      "acabadores", "peon colado"]),
    ("Rivera Concrete", "materials", "03-300",
     ["Ready-mix concrete 4000 psi", "Quikrete bags", "Non-shrink grout", "Curing compound",
      "Concreto premezclado"],
     ["readymix 3000psi", "sakrete 80lb", "grout non shrink", "cure & seal",
      "premezclado 250"]),
    ("Rivera Concrete", "labor", "03-200",
     ["Ironworker", "Rebar tier", "Rodbuster", "Fierrero"],
     ["iron worker rebar", "rebar tyer", "rod buster", "fierreros"]),
    ("Rivera Concrete", "materials", "03-200",
     ["Rebar #5", "Rebar #4 grade 60", "Tie wire", "Rebar chairs", "Varilla 3/8"],
     ["#4 bar", "re-bar #6", "tie wire roll", "chairs 3\"", "varilla de 1/2"]),
    ("Apex Steel", "labor", "05-120",
     ["Ironworker", "Structural welder", "Welder", "Steel erector", "Soldador"],
     ["iron workers", "certified welder", "weldor", "erection crew", "soldadores"]),
    ("Delta Plumbing", "labor", "22-100",
     ["Plumber", "Pipe fitter", "Plumbing apprentice", "Plumber foreman", "Plomero"],
     ["plumbr", "pipefitter journeyman", "apprentice plumber", "plumbing fmn", "plomeros"]),
    ("Delta Plumbing", "materials", "22-100",
     ["4 inch PVC pipe", "Copper pipe 3/4 type L", "PEX tubing 1/2", "Cast iron no-hub fittings",
      "Tuberia de cobre"],
     ["pvc sch 40 4\"", "type L copper 1\"", "pex-a 3/4", "no hub couplings",
      "tubo de cobre"]),
    ("Clean Sweep", "labor", "01-740",
     ["Laborer", "Cleanup laborer", "Final clean", "Debris removal", "Limpieza"],
     ["general labor cleanup", "clean up crew", "final cleaning", "debris haul off",
      "limpieza general"]),
    ("Clean Sweep", "equipment", "01-740",
     ["Dumpster 30 yard", "Roll-off container", "Dumpster swap", "Contenedor de basura"],
     ["30yd dumpster", "roll off 20 yd", "dumpster pull", "contenedor"]),
    ("Rivera Concrete", "equipment", "02-410",
     ["Jackhammer", "Bobcat skid steer with breaker", "Concrete saw", "Martillo demoledor"],
     ["jack hammer 60lb", "skidsteer w/ hammer", "walk behind saw", "rotomartillo"]),
    ("Rivera Concrete", "labor", "02-410",
     ["Jackhammer operator", "Demo laborer", "Demolition crew"],
     ["jackhammer op", "demo labor", "demolicion cuadrilla"]),
    ("Apex Steel", "equipment", "05-120",
     ["Boom lift", "JLG 60 ft boom", "Welding machine", "Telehandler"],
     ["boomlift 45'", "jlg boom", "welder machine lincoln", "lull telehandler"]),
]

# Lines with nothing like them in the history: any suggestion for them is a wrong one.
NOTHING_LIKE = [
    ("Bolt Electric", "labor", "Low voltage tech"), ("Summit Framing", "labor", "Glazier"),
    ("Delta Plumbing", "equipment", "Porta-john"), ("Clean Sweep", "materials", "Ice melt"),
    ("Apex Steel", "materials", "Fireproofing spray"), ("Rivera Concrete", "labor", "Surveyor"),
    ("Summit Framing", "materials", "Carpet tile"), ("Bolt Electric", "equipment", "Trencher"),
]

HISTORY = [(sub, kind, said, code) for sub, kind, code, seen, _new in CODES for said in seen]
HELD_OUT = [(sub, kind, said, code) for sub, kind, code, _seen, new in CODES for said in new] + \
    [(sub, kind, said, None) for sub, kind, said in NOTHING_LIKE]


def score(suggest) -> dict:
    """How a suggester (kind, words, sub -> cost code or None) does on the held-out lines:
    right, wrong (a suggestion on another code, or any on a line nothing is like) and
    abstained (no suggestion for a line that has a code)."""
    right = wrong = abstained = 0
    for sub, kind, said, want in HELD_OUT:
        got = suggest(kind, said, sub)
        if got == want:
            right += 1
        elif got is None:
            abstained += 1
        else:
            wrong += 1
    return {"lines": len(HELD_OUT), "right": right, "wrong": wrong, "abstained": abstained}
