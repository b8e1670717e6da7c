"""One PM's routing habits and the new lines that should follow them.

HISTORY is what the PM approved, ticket by ticket: the sub, the project ("A" or "B", the
first two seeded projects), the ticket's description, and each line with the cost code the PM
put it on (the cost type follows the line's kind). NEW is what crews send next, in their own
words (Spanish, short forms, misspellings, plurals, new word orders), with the cost code the
PM would pick; None means nothing like it was ever routed and no cost-code name fits, so it
must stay unrouted.

`ticket_body` makes a ticket of such lines as a crew sends it, without cost codes.
"""
from __future__ import annotations

COST_TYPE = {"labor": "labor", "equipment": "equipment", "materials": "materials"}

# (sub, project, ticket description, [(kind, words, cost code), ...])
HISTORY = [
    ("Summit Framing", "A", "Reframed the north corridor wall after layout change",
     [("labor", "Framer", "06-100"), ("labor", "Carpenter", "06-100"),
      ("materials", "Metal studs 3-5/8", "09-250"), ("equipment", "Scissor lift", "09-250")]),
    ("Summit Framing", "A", "Added blocking for owner shelving",
     [("labor", "Framer", "06-100"), ("materials", "2x6 lumber", "06-100")]),
    ("Summit Framing", "A", "Patched drywall after the plumber's rough-in",
     [("labor", "Drywall hanger", "09-250"), ("labor", "Drywall taper", "09-250"),
      ("materials", "Gypsum board 5/8 type X", "09-250")]),
    ("Summit Framing", "B", "Framed the stair enclosure",
     [("labor", "Framer", "06-100"), ("labor", "Framer helper", "06-100")]),
    ("Bolt Electric", "A", "Relocated two receptacles for the owner's desk",
     [("labor", "Electrician", "26-050"), ("labor", "Apprentice electrician", "26-050"),
      ("materials", "12 AWG THHN wire", "26-050"), ("materials", "EMT conduit 3/4", "26-050")]),
    ("Bolt Electric", "A", "Temporary power for the GC's trailer",
     [("labor", "Electrician", "26-050"), ("equipment", "Scissor lift", "26-050")]),
    ("Bolt Electric", "B", "Added lighting circuit in the garage ramp",
     [("labor", "Journeyman electrician", "26-050"), ("materials", "EMT conduit 1 inch", "26-050")]),
    ("Rivera Concrete", "A", "Poured a thickened slab at the new equipment pad",
     [("labor", "Concrete finisher", "03-300"), ("labor", "Laborer", "03-300"),
      ("materials", "Ready-mix concrete 4000 psi", "03-300"), ("labor", "Ironworker", "03-200"),
      ("materials", "Rebar #5", "03-200")]),
    ("Rivera Concrete", "A", "Formed and poured a curb at the loading dock",
     [("labor", "Carpenter", "03-100"), ("labor", "Concrete finisher", "03-300"),
      ("materials", "Form plywood", "03-100")]),
    ("Rivera Concrete", "B", "Colado de losa en rampa",
     [("labor", "Ayudante", "03-300"), ("labor", "Acabador", "03-300")]),
    ("Apex Steel", "A", "Added a steel lintel over the new opening",
     [("labor", "Ironworker", "05-120"), ("labor", "Welder", "05-120"),
      ("equipment", "Boom lift", "05-120")]),
    ("Apex Steel", "B", "Installed embed plates the drawings missed",
     [("labor", "Ironworker", "05-120"), ("materials", "Steel embed plates", "05-120")]),
    ("Delta Plumbing", "A", "Rerouted a drain line around the new footing",
     [("labor", "Plumber", "22-100"), ("labor", "Pipe fitter", "22-100"),
      ("materials", "4 inch PVC pipe", "22-100")]),
    ("Delta Plumbing", "B", "Moved a hose bib",
     [("labor", "Plumber", "22-100"), ("materials", "Copper pipe 3/4", "22-100")]),
    ("Clean Sweep", "A", "Final clean of the second floor after the GC's punch list",
     [("labor", "Laborer", "01-740"), ("equipment", "Dumpster 30 yard", "01-740")]),
    ("Clean Sweep", "A", "Limpieza final del tercer piso",
     [("labor", "Limpieza final", "01-740")]),
    ("Clean Sweep", "B", "Removed debris left by other trades",
     [("labor", "Laborer", "01-740"), ("equipment", "Dumpster 20 yard", "01-740")]),
    ("Rivera Concrete", "A", "Demolished a slab edge for the new trench drain",
     [("labor", "Jackhammer operator", "02-410"), ("equipment", "Jackhammer", "02-410")]),
]

# (sub, project, ticket description, kind, words, the code the PM would pick or None)
NEW = [
    ("Summit Framing", "A", "Framed a new closet", "labor", "framers", "06-100"),
    ("Summit Framing", "A", "Framed a new closet", "labor", "Carpintero", "06-100"),
    ("Summit Framing", "B", "Framed soffits in the lobby", "labor", "Frmaer", "06-100"),
    ("Summit Framing", "B", "Framed soffits in the lobby", "labor", "helper framer", "06-100"),
    ("Summit Framing", "A", "Patched walls at the new doors", "labor", "drywall hangers", "09-250"),
    ("Summit Framing", "A", "Patched walls at the new doors", "materials", "metal stud 3 5/8",
     "09-250"),
    ("Summit Framing", "A", "Patched walls at the new doors", "equipment", "scissor lift", "09-250"),
    ("Bolt Electric", "A", "Added outlets in the break room", "labor", "Electrican", "26-050"),
    ("Bolt Electric", "A", "Added outlets in the break room", "labor", "electricista", "26-050"),
    ("Bolt Electric", "B", "Added outlets in the break room", "labor", "elec apprentice", "26-050"),
    ("Bolt Electric", "B", "Added outlets in the break room", "materials", "conduit EMT 3/4",
     "26-050"),
    ("Bolt Electric", "A", "Added outlets in the break room", "equipment", "Scissor lift",
     "26-050"),
    ("Bolt Electric", "A", "Added outlets in the break room", "materials", "THHN wire #12",
     "26-050"),
    ("Rivera Concrete", "B", "Poured a housekeeping pad", "labor", "cement finisher", "03-300"),
    ("Rivera Concrete", "B", "Poured a housekeeping pad", "labor", "Ironworkers", "03-200"),
    ("Rivera Concrete", "A", "Poured a housekeeping pad", "materials", "rebar no. 4", "03-200"),
    ("Rivera Concrete", "A", "Poured a housekeeping pad", "labor", "ayudantes", "03-300"),
    ("Rivera Concrete", "B", "Colado de banqueta", "labor", "acabadores de concreto", "03-300"),
    ("Rivera Concrete", "A", "Formed a curb at the ramp", "materials", "plywood for forms", "03-100"),
    ("Apex Steel", "A", "Added a lintel at the new window", "labor", "Iron worker", "05-120"),
    ("Apex Steel", "B", "Added a lintel at the new window", "labor", "soldador", "05-120"),
    ("Apex Steel", "B", "Added a lintel at the new window", "equipment", "boomlift", "05-120"),
    ("Delta Plumbing", "A", "Moved a floor drain", "labor", "plomero", "22-100"),
    ("Delta Plumbing", "B", "Moved a floor drain", "labor", "Plumbers", "22-100"),
    ("Delta Plumbing", "B", "Moved a floor drain", "labor", "pipefitter", "22-100"),
    ("Delta Plumbing", "A", "Moved a floor drain", "materials", "PVC pipe 4in", "22-100"),
    ("Clean Sweep", "A", "Cleaned the lobby after the painters", "labor", "laborers", "01-740"),
    ("Clean Sweep", "B", "Cleaned the lobby after the painters", "labor", "limpieza", "01-740"),
    ("Clean Sweep", "A", "Cleaned the lobby after the painters", "equipment", "dumpster",
     "01-740"),
    ("Clean Sweep", "B", "Limpieza de escombros", "labor", "peones", "01-740"),
    ("Rivera Concrete", "A", "Cut out a slab for a new drain", "labor", "jack hammer operator",
     "02-410"),
    ("Summit Framing", "A", "Framed a new closet", "labor", "Astronaut", None),
    ("Bolt Electric", "A", "Tuned the lobby piano", "labor", "Piano tuner", None),
]


def line_body(kind: str, said: str) -> dict:
    """A line of a kind as a crew sends it, without a cost code."""
    if kind == "labor":
        return {"trade": said, "hours": 4, "rate": 60}
    if kind == "equipment":
        return {"description": said, "hours": 2, "rate": 90}
    return {"description": said, "quantity": 3, "unitCost": 12}


def ticket_body(sub: str | None, project_id, description: str,
                lines: list[tuple[str, str]]) -> tuple[dict, list[int]]:
    """A ticket of (kind, words) lines for POST /v1/tickets, and each line's index in the
    routing of the ticket made from it (labor, then equipment, then materials)."""
    body = {"project_id": str(project_id), "description": description, "reason": "Not ours",
            "directed_by": "Sam Ortiz", "sub": sub, "labor": [], "equipment": [], "materials": []}
    places = []
    for kind, said in lines:
        body[kind].append(line_body(kind, said))
        places.append((kind, len(body[kind]) - 1))
    offsets = {"labor": 0, "equipment": len(body["labor"]),
               "materials": len(body["labor"]) + len(body["equipment"])}
    return body, [offsets[kind] + i for kind, i in places]
