"""Routing that learns: a PM's habits replayed through the API, then new tickets in the crews'
own words land on the codes the PM would pick (support/routing_corpus.py)."""
from __future__ import annotations

import re

import pytest

from support.routing_corpus import COST_TYPE, HISTORY, NEW, ticket_body

pytestmark = pytest.mark.live


def project_of(tenant, letter: str) -> dict:
    """Project A or B: the first two seeded projects, both with change events."""
    return tenant.projects[{"A": 0, "B": 1}[letter]]


def budget_codes(client, tenant, project_id) -> dict[tuple[str, str], int]:
    """A project's budget code ids by cost code and cost type."""
    items = client.get(f"/v1/projects/{project_id}/cost-codes", headers=tenant.headers).json
    return {(item["code"], code["cost_type"]): code["id"]
            for item in items["data"] for code in item["budget_codes"]}


def send(client, tenant, sub: str | None, project: dict, description: str,
         lines: list[tuple[str, str]]) -> tuple[dict, list[int]]:
    """POST a ticket; returns it and, for each given line, its index in the ticket's routing."""
    body, places = ticket_body(sub, project["id"], description, lines)
    made = client.post("/v1/tickets", headers=tenant.headers, json=body)
    assert made.status_code == 200, made.json
    return made.json, places


def approve(client, tenant, ticket_id: str, routes: dict[int, int]):
    """Approve as a daily log entry with the PM's budget code for every line."""
    answer = client.post(f"/v1/tickets/{ticket_id}/approve", headers=tenant.headers, json={
        "destination": "daily_log", "routes": {str(k): v for k, v in routes.items()}})
    assert answer.status_code == 200, answer.json
    return answer.json


def replay(client, tenant, history=HISTORY) -> None:
    """The PM's habits: each ticket created as the crew sent it, approved on the PM's codes."""
    codes = {letter: budget_codes(client, tenant, project_of(tenant, letter)["id"])
             for letter in "AB"}
    for sub, letter, description, lines in history:
        ticket, places = send(client, tenant, sub, project_of(tenant, letter), description,
                              [(kind, said) for kind, said, _code in lines])
        approve(client, tenant, ticket["id"], {
            place: codes[letter][code, COST_TYPE[kind]]
            for place, (kind, _said, code) in zip(places, lines, strict=True)})


def routed(client, tenant, sub, letter, description, kind, said) -> dict:
    """The routing line of a one-line ticket sent now."""
    ticket, [place] = send(client, tenant, sub, project_of(tenant, letter), description,
                           [(kind, said)])
    read = client.get(f"/v1/tickets/{ticket['id']}", headers=tenant.headers).json
    return read["routing"][place]


def cost_code(line: dict) -> str | None:
    """The cost code of a routing line's budget code ('06-100.L' -> '06-100')."""
    return line["budget_code"].rsplit(".", 1)[0] if line["budget_code"] else None


def test_new_lines_land_where_the_pm_put_lines_like_them(client, acme, rival):
    replay(client, acme)
    right, wrong = 0, []
    for sub, letter, description, kind, said, want in NEW:
        line = routed(client, acme, sub, letter, description, kind, said)
        if cost_code(line) == want:
            right += 1
        else:
            wrong.append((sub, said, want, line["budget_code"], line["reason"]))
        if want is not None and cost_code(line) == want:
            assert (line["routed"], line["exact"], line["needs_review"], line["learned"]) == \
                (True, False, True, True), line
            assert line["reason"].startswith("chosen ")
        if want is None:  # nothing like it was ever routed: never a wild guess
            assert line["budget_code"] is None and not line["learned"], line
    assert right / len(NEW) >= 0.9, wrong

    # Another project of the company: its own budget code for the same cost code and type.
    b_codes = budget_codes(client, acme, project_of(acme, "B")["id"])
    line = routed(client, acme, "Bolt Electric", "B", "New circuit", "labor", "electrician")
    assert line["budget_code_id"] == b_codes["26-050", "labor"]

    # The same words from two subs belong on two codes.
    for sub, want in (("Rivera Concrete", "03-200"), ("Apex Steel", "05-120")):
        assert cost_code(routed(client, acme, sub, "A", "Extra work", "labor", "Ironworker")) == want
    for sub, want in (("Summit Framing", "09-250"), ("Bolt Electric", "26-050")):
        assert cost_code(routed(client, acme, sub, "A", "Extra work", "equipment",
                                "Scissor lift")) == want

    # One company's decisions never route another's lines.
    line = routed(client, rival, "Summit Framing", "A", "Framed a closet", "labor", "Framer")
    assert not line["learned"] and not line["reason"].startswith("chosen"), line


def test_a_correction_wins_after_two_and_require_exact_refuses_a_suggestion(client, acme):
    habit = [("Summit Framing", "A", "Framed a wall", [("labor", "Carpenter", "06-100")])] * 3
    replay(client, acme, habit)
    assert cost_code(routed(client, acme, "Summit Framing", "A", "Framed", "labor",
                            "carpenter")) == "06-100"
    replay(client, acme, [("Summit Framing", "A", "Hung board", [("labor", "Carpenter", "09-250")])])
    assert cost_code(routed(client, acme, "Summit Framing", "A", "Framed", "labor",
                            "Carpenter")) == "06-100"  # once is not yet a new habit
    replay(client, acme, [("Summit Framing", "A", "Hung board", [("labor", "Carpenter", "09-250")])])
    line = routed(client, acme, "Summit Framing", "A", "Framed", "labor", "Carpenters")
    assert cost_code(line) == "09-250" and line["reason"] == \
        "chosen twice for Summit Framing's 'Carpenter'"

    ticket, [place] = send(client, acme, "Summit Framing", project_of(acme, "A"), "Framed",
                           [("labor", "Carpenter")])
    refused = client.post(f"/v1/tickets/{ticket['id']}/approve", headers=acme.headers,
                          json={"require_exact": True})
    assert refused.status_code == 409 and refused.json["error"]["code"] == "lines_need_review"
    assert refused.json["error"]["details"][0]["line"] == place


@pytest.mark.browser
def test_a_pm_searches_the_picker_confirms_all_suggestions_and_approves_on_a_portrait_tablet(
        app, client, acme, live_server, portrait_tablet):
    from tests.test_review_triage import browser_sign_in

    replay(client, acme, HISTORY[:3])  # Summit Framing's framing and drywall habits
    ticket, _ = send(client, acme, "Summit Framing", project_of(acme, "A"), "Framed a closet",
                     [("labor", "framers"), ("labor", "Mystery trade"),
                      ("materials", "metal studs")])
    page = portrait_tablet.new_page()
    browser_sign_in(page, live_server, app, acme)
    page.goto(f"{live_server.url}/tickets/{ticket['id']}")
    assert page.locator(".routing .badge.suggested").count() == 2
    assert "chosen twice for Summit Framing's 'Framer'" in page.inner_text("tr[data-line='0']")
    # The line nobody routed before: found by typing part of a code or a word.
    search = page.locator("input.code-search[data-line='1']")
    search.fill("22-")
    options = page.locator("select[name='routes[1]'] option:not([value=''])")
    assert options.count() >= 1 and all(text.startswith("22-") for text in options.all_inner_texts())
    search.fill("limpieza")  # a crew's word for cleaning finds the cleaning codes
    assert all(text.startswith("01-740") for text in options.all_inner_texts())
    assert options.count() >= 1
    search.fill("rough carp")
    page.select_option("select[name='routes[1]']", label=options.first.inner_text())
    chosen = page.locator("select[name='routes[1]']")
    box = chosen.bounding_box()
    assert box["width"] >= 300  # the chosen code can be read in portrait
    assert page.locator("button.approve").first.is_disabled()  # two suggestions not confirmed
    page.click("summary.confirm-all")
    # The sheet opens on the first screen, listing what it confirms: each line, code and why.
    sheet = page.locator(".confirm-sheet .sheet")
    box = sheet.bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= 1024
    assert sheet.locator("tr[data-line]").count() == 2
    assert "chosen twice for Summit Framing's 'Framer'" in sheet.inner_text()
    page.click("button.confirm-listed")
    page.wait_for_selector("text=2 budget codes are confirmed")
    page.locator("select[name='routes[1]']").wait_for()
    page.locator("input.code-search[data-line='1']").fill("rough carp")
    page.select_option("select[name='routes[1]']",
                       label=page.locator("select[name='routes[1]'] option:not([value=''])")
                       .first.inner_text())
    assert not page.locator("button.approve").first.is_disabled()
    with page.expect_response(lambda r: "/approve" in r.url):
        page.locator("button.approve").first.click()
    page.wait_for_selector("text=Written to Procore")
    written = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert [cost_code(line) for line in written["routing"]] == ["06-100", "06-100", "09-250"]



@pytest.mark.browser
def test_a_picker_search_that_leaves_one_code_of_the_lines_type_picks_it(
        app, client, acme, live_server, tablet):
    from tests.test_review_triage import browser_sign_in

    ticket, [labor, equipment] = send(client, acme, None, project_of(acme, "A"), "Boxed a beam",
                                      [("labor", "Mystery trade"), ("equipment", "Mystery rig")])
    page = tablet.new_page()
    browser_sign_in(page, live_server, app, acme)
    page.goto(f"{live_server.url}/tickets/{ticket['id']}")
    picked = "s => s.value ? s.selectedOptions[0].text : ''"
    for line, suffix in ((labor, ".L"), (equipment, ".E")):
        page.locator(f"input.code-search[data-line='{line}']").fill("06-100")
        options = page.locator(f"select[name='routes[{line}]'] option:not([value=''])")
        assert options.count() > 1  # the cost code's other types are still there to choose
        assert page.locator(f"select[name='routes[{line}]']").evaluate(picked) \
            .startswith("06-100" + suffix)
    # A search that leaves several codes of the line's type picks none.
    page.locator(f"input.code-search[data-line='{labor}']").fill("")
    page.locator(f"select[name='routes[{labor}]']").select_option("")
    page.locator(f"input.code-search[data-line='{labor}']").fill("0")
    assert page.locator(f"select[name='routes[{labor}]']").evaluate(picked) == ""


def test_the_evidence_can_be_seen_and_a_mistaken_decision_forgotten(client, acme, runner):
    replay(client, acme, HISTORY[:1] + [("Summit Framing", "A", "Oops",
                                          [("equipment", "Scissor lift", "26-050")])])
    # The last choice for Summit's scissor lift and the one before disagree: the older habit
    # (09-250, once) ties with the mistake (26-050, once), and the latest breaks the tie.
    shown = runner.invoke(args=["routing", "explain", "--company", str(acme.company_id),
                                "--kind", "equipment", "--sub", "Summit Framing", "scissor lift"])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0].startswith("equipment line 'scissor lift': cost code 26-050, equipment")
    mistaken = next(line for line in lines[1:] if "26-050.E" in line)
    assert "'Scissor lift' from Summit Framing -> 26-050.E (chosen" in mistaken
    decision_id = mistaken.split()[0].lstrip("#")
    # A decision is forgotten only for its own company.
    other = runner.invoke(args=["routing", "forget", "--company", str(acme.company_id + 999),
                                decision_id])
    assert other.exit_code == 0 and "0 decision(s) forgotten" in other.output
    forgot = runner.invoke(args=["routing", "forget", "--company", str(acme.company_id),
                                 decision_id])
    assert forgot.exit_code == 0 and "1 decision(s) forgotten" in forgot.output
    line = routed(client, acme, "Summit Framing", "A", "Framed", "equipment", "Scissor lift")
    assert cost_code(line) == "09-250"


def test_the_migration_takes_in_the_tickets_already_written(app, client, acme):
    from flask_migrate import downgrade, upgrade
    from sqlalchemy import select

    from models import RoutingDecision, db

    replay(client, acme, HISTORY[:2])
    project = project_of(acme, "A")
    token = client.post("/v1/links", headers=acme.headers, json={
        "project_id": str(project["id"]), "label": "Clean Sweep"}).json["token"]
    sent = client.post(f"/c/{token}/tickets", json={
        "description": "Final clean", "reason": "r", "directed_by": "Sam",
        "labor": [{"trade": "Laborer", "hours": 2, "rate": 40}]}).json
    codes = budget_codes(client, acme, project["id"])
    approve(client, acme, sent["id"], {0: codes["01-740", "labor"]})
    with app.app_context():
        before = [(r.ticket_id, r.line, r.kind, r.text, r.cost_code, r.cost_type,
                   r.budget_code_id, r.budget_code)
                  for r in db.session.scalars(select(RoutingDecision).order_by(RoutingDecision.id))]
        db.session.remove()
        downgrade(revision="0021")  # as before routing learned: no decisions, no subs
        upgrade()
        subs = set(db.session.scalars(select(RoutingDecision.sub)))
        after = [(r.ticket_id, r.line, r.kind, r.text, r.cost_code, r.cost_type,
                  r.budget_code_id, r.budget_code)
                 for r in db.session.scalars(select(RoutingDecision).order_by(RoutingDecision.id))]
    assert len(before) == 7 and sorted(after) == sorted(before)
    # A capture link's label is taken back as its tickets' sub; a program's tickets had none.
    assert subs == {None, "Clean Sweep"}
    line = routed(client, acme, "Summit Framing", "A", "Framed", "labor", "Framer")
    assert cost_code(line) == "06-100" and line["learned"]


def change_items(app, client, tenant, ticket_id: str) -> list[tuple[str, str]]:
    """The budget codes of a written ticket's change event, read back from the sandbox."""
    from tests.test_approval import remote

    written = client.get(f"/v1/tickets/{ticket_id}", headers=tenant.headers).json
    event = remote(app, tenant).get_change_event(int(written["project_id"]),
                                                 written["external"]["change_event_id"])
    return [item["budget_code"]["flat_code"] for item in event["change_items"]]


def test_bulk_approval_writes_exactly_the_suggestions_it_lists_and_says_so(app, client, acme):
    from tests.test_review_pages import sign_in

    replay(client, acme, HISTORY[:3])
    project = project_of(acme, "A")
    suggested, _ = send(client, acme, "Summit Framing", project, "Framed a closet",
                        [("labor", "framers"), ("materials", "metal studs")])
    unknown, _ = send(client, acme, "Summit Framing", project, "Framed a closet",
                      [("labor", "Mystery trade")])
    browser = sign_in(app, client, acme)
    ids = {"ids": [suggested["id"], unknown["id"]]}
    step_one = browser.client.post("/queue/bulk", data={"csrf_token": browser.token, **ids})
    html = step_one.get_data(as_text=True)
    # The button says what it does; the list shows each code it writes, with why.
    assert re.search(r'id="bulk-write">\s*Write 1, confirming 2 suggested codes</button>', html)
    listed = re.findall(r'<tr data-line="(\d)" data-code="(\d+)"><td>[^<]*</td><td><strong>'
                        r'([^<]+)</strong></td><td class="hint">([^<]+)</td>', html)
    assert [(line, code, why.replace("&#39;", "'")) for line, _id, code, why in listed] == [
        ("0", "06-100.L", "chosen twice for Summit Framing's 'Framer'"),
        ("1", "09-250.M", "chosen once for Summit Framing's 'Metal studs 3-5/8'")]
    # The ticket with a line it cannot confirm is left out, with why, and not in the form.
    assert "Left out: open it to check (1)" in html and "has no budget code" in html
    form = html[html.index('id="bulk-write-form"'):]
    form = form[:form.index("</form>")]
    hidden_ids = re.findall(r'name="ids" value="([^"]+)"', form)
    assert hidden_ids == [suggested["id"]]
    hidden = dict(re.findall(r'name="(suggest\[[^"]+\])" value="(\d+)"', form))
    assert {key: int(value) for key, value in hidden.items()} == {
        f"suggest[{suggested['id']}][{line}]": int(code_id) for line, code_id, _c, _w in listed}
    assert "confirm_suggestions" not in html  # no box to forget: the button confirms them

    done = browser.client.post("/queue/bulk/approve",
                               data={"csrf_token": browser.token, "ids": hidden_ids, **hidden})
    assert done.status_code == 200 and "1 written" in done.get_data(as_text=True)
    assert change_items(app, client, acme, suggested["id"]) == ["06-100.L", "09-250.M"]
    written = client.get(f"/v1/tickets/{suggested['id']}", headers=acme.headers).json
    assert all(line["exact"] and not line["learned"] for line in written["routing"])
    assert client.get(f"/v1/tickets/{unknown['id']}", headers=acme.headers).json["status"] == \
        "submitted"  # its line had no suggestion: it still needs the PM


def test_another_subs_habit_says_whose_and_is_never_confirmed_in_bulk(app, client, acme,
                                                                      sandbox_server):
    from tests.test_approval import origin_rows
    from tests.test_review_pages import sign_in

    replay(client, acme, [("Bayside Rentals", "A", "Lift for the ceiling",
                           [("equipment", "Scissor lift 19'", "09-250")])] * 3)
    project = project_of(acme, "A")
    own = routed(client, acme, "Bayside Rentals", "A", "Lift", "equipment", "Scissor lift 19'")
    assert own["reason"] == "chosen 3 times for Bayside Rentals' 'Scissor lift 19''"
    assert own["learned_from_sub"] is None
    ticket, [place] = send(client, acme, "Sunbelt Rentals", project, "Lift for the soffit",
                           [("equipment", "Scissor lift 19'")])
    line = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["routing"][place]
    assert line["learned"] and line["learned_from_sub"] == "Bayside Rentals"
    assert line["reason"] == "chosen 3 times for Bayside Rentals' 'Scissor lift 19''"

    browser = sign_in(app, client, acme)
    queue = browser.get("/queue").get_data(as_text=True)
    assert re.search(rf'value="{ticket["id"]}"[^>]*data-ready="0"', queue)  # not "ready"
    step_one = browser.client.post("/queue/bulk", data={"csrf_token": browser.token,
                                                        "ids": [ticket["id"]]})
    html = step_one.get_data(as_text=True).replace("&#39;", "'")
    assert "None of these can be written from the queue" in html and 'id="bulk-write"' not in html
    assert "09-250.E is Bayside Rentals's habit" not in html
    assert "09-250.E is Bayside Rentals'" in html and "open the ticket to confirm it" in html
    # Posting the habit as if it had been listed writes nothing.
    forged = browser.client.post("/queue/bulk/approve", data={
        "csrf_token": browser.token, "ids": [ticket["id"]],
        f"suggest[{ticket['id']}][{place}]": str(line["budget_code_id"])})
    assert "0 written" in forged.get_data(as_text=True)
    assert "not the ones listed" in forged.get_data(as_text=True)
    assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []
    # On its own page the PM sees whose habit it is, and may confirm it there.
    page = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True).replace("&#39;", "'")
    assert page.count("Learned from Bayside Rentals, not this sub") == 2  # its row, the sheet
    assert "chosen 3 times for Bayside Rentals' 'Scissor lift 19''" in page
    # A program's approval with all defaults does not write it either; naming it in routes does.
    refused = client.post(f"/v1/tickets/{ticket['id']}/approve", headers=acme.headers, json={})
    assert refused.status_code == 409 and refused.json["error"]["code"] == "lines_need_review"
    assert [(d["line"], d["reason"]) for d in refused.json["error"]["details"]] == \
        [(place, "suggested from another sub's decisions: confirm it with `routes`")]
    assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []
    confirmed = client.post(f"/v1/tickets/{ticket['id']}/approve", headers=acme.headers,
                            json={"routes": {str(place): line["budget_code_id"]}})
    assert confirmed.status_code == 200, confirmed.json
    assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1


def test_creating_a_ticket_never_waits_on_learning(app, client, acme):
    from models import db
    from tests.test_ticket_reads import StatementCounter

    replay(client, acme, HISTORY[:1])
    app.extensions.pop("routing_decisions", None)  # as in a process that never read them
    with app.app_context():
        engine = db.engine
    with StatementCounter(engine) as counter:
        made, [place] = send(client, acme, "Summit Framing", project_of(acme, "A"), "Framed",
                             [("labor", "Framer")])
    assert not [s for s in counter.statements if "routing_decisions" in s]
    assert made["routing"][place]["learned"] is False  # nothing read yet, so nothing suggested
    read = client.get(f"/v1/tickets/{made['id']}", headers=acme.headers).json
    assert read["routing"][place]["learned"] is True  # the next read routes it on them


def test_a_decision_whose_words_say_nothing_is_counted_but_suggests_nothing(app, client, acme):
    from models import db
    from tests.test_ticket_reads import StatementCounter

    replay(client, acme, [("Summit Framing", "A", "Sizes", [("materials", "2 x 4", "06-100")]),
                          *HISTORY[:1]])
    first, _ = send(client, acme, "Summit Framing", project_of(acme, "A"), "Sizes",
                    [("materials", "2 x 4"), ("labor", "Framer")])
    read = client.get(f"/v1/tickets/{first['id']}", headers=acme.headers).json["routing"]
    assert not read[1]["learned"] and read[0]["learned"]  # labor first: 'Framer' is learned
    with app.app_context():
        engine = db.engine
    with StatementCounter(engine) as counter:  # the index is up to date: no decision re-read
        client.get(f"/v1/tickets/{first['id']}", headers=acme.headers)
    reads = [s for s in counter.statements if "FROM routing_decisions" in s]
    assert len(reads) == 1 and "max(" in reads[0].lower()


def test_confirm_all_lists_every_code_to_check_and_confirms_exactly_those(app, client, acme):
    from tests.test_review_pages import sign_in

    replay(client, acme, HISTORY[:3])
    ticket, _ = send(client, acme, "Summit Framing", project_of(acme, "A"), "Framed a closet",
                     [("labor", "framers"), ("labor", "Concrete finisher"),
                      ("labor", "Mystery trade")])
    routing = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["routing"]
    learned, guess, blank = routing
    assert learned["learned"] and learned["needs_review"]
    assert guess["budget_code"] and not guess["learned"] and guess["needs_review"]  # a name guess
    assert blank["budget_code"] is None

    browser = sign_in(app, client, acme)
    page = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True).replace("&#39;", "'")
    sheet = page[page.index('class="confirm-sheet"'):page.index("</details>", page.index(
        'class="confirm-sheet"'))]
    # Beside the button: each line it confirms, its code and why; the line it cannot, named.
    assert "Confirm all 2…" in sheet and "Confirm these 2" in sheet
    rows = re.findall(r'<tr data-line="(\d)" data-code="(\d+)"', sheet)
    assert rows == [("0", str(learned["budget_code_id"])), ("1", str(guess["budget_code_id"]))]
    for line in (learned, guess):
        assert line["budget_code"] in sheet and line["reason"] in sheet
    assert "Not covered: line 3 has no budget code" in sheet
    listed = dict(re.findall(r'name="(listed\[\d\])" value="(\d+)"', sheet))
    assert listed == {"listed[0]": str(learned["budget_code_id"]),
                      "listed[1]": str(guess["budget_code_id"])}

    done = browser.post(f"/tickets/{ticket['id']}/suggestions", listed).get_data(as_text=True)
    assert "2 budget codes are confirmed" in done
    checked = re.findall(r'name="confirm\[(\d)\]" value="(\d+)" form="approve-form"\s+checked', done)
    assert checked == [("0", listed["listed[0]"]), ("1", listed["listed[1]"])]
    assert 'class="confirm-sheet"' not in done  # nothing left to confirm

    # A listed code that is no longer the line's is not confirmed, and the page says so.
    stale = browser.post(f"/tickets/{ticket['id']}/suggestions", {
        "listed[0]": listed["listed[0]"], "listed[1]": str(learned["budget_code_id"])})
    html = stale.get_data(as_text=True)
    assert "1 budget code is confirmed" in html and "Line 2 changed since the list was drawn" in html
    assert re.findall(r'name="confirm\[(\d)\]" value="\d+" form="approve-form"\s+checked', html) \
        == ["0"]

    # A list no page drew is confirmed nowhere, and refused without an error.
    odd = browser.post(f"/tickets/{ticket['id']}/suggestions", {
        "listed[0]": "²", "listed[²]": listed["listed[1]"], "listed[1]": "9" * 40})
    assert odd.status_code == 200 and "Nothing was confirmed." in odd.get_data(as_text=True)

    # Approved with what was confirmed (and a code picked for the blank line): written as listed.
    codes = budget_codes(client, acme, project_of(acme, "A")["id"])
    approved = browser.post(f"/tickets/{ticket['id']}/approve", {
        "confirm[0]": listed["listed[0]"], "confirm[1]": listed["listed[1]"],
        "routes[2]": str(codes["01-740", "labor"]), "destination": "change_event"})
    assert "Written to Procore" in approved.get_data(as_text=True)
    assert change_items(app, client, acme, ticket["id"]) == [
        learned["budget_code"], guess["budget_code"], "01-740.L"]


def shot(page, name: str) -> None:
    """A screenshot to look at, into EWT_SCREENSHOTS when it names a folder."""
    import os
    folder = os.environ.get("EWT_SCREENSHOTS")
    if folder:
        os.makedirs(folder, exist_ok=True)
        page.screenshot(path=f"{folder}/{name}.png")


@pytest.mark.browser
@pytest.mark.parametrize("device", ["tablet", "portrait_tablet"])
def test_confirm_all_sheet_single_result_picker_and_full_width_lines_on_tablets(
        app, client, acme, live_server, request, device):
    from tests.test_review_triage import browser_sign_in

    context = request.getfixturevalue(device)
    height = context.pages[0].viewport_size["height"] if context.pages else \
        {"tablet": 768, "portrait_tablet": 1024}[device]
    replay(client, acme, HISTORY[:3] + [("Bayside Rentals", "A", "Lift for the ceiling",
                                         [("equipment", "Scissor lift 19'", "09-250")])] * 3)
    ticket, _ = send(client, acme, "Sunbelt Rentals", project_of(acme, "A"), "Lift and framing",
                     [("labor", "framers"), ("labor", "Concrete finisher"),
                      ("labor", "Mystery trade"), ("equipment", "Scissor lift 19'")])
    page = context.new_page()
    browser_sign_in(page, live_server, app, acme)
    page.goto(f"{live_server.url}/tickets/{ticket['id']}")
    # The lines take the page's width (at 1024 px they were squeezed into 585 px beside the
    # evidence).
    width = page.evaluate("document.documentElement.clientWidth")
    for part in ("table.routing", "table.routing tr[data-line='0']", "table.routing tfoot tr"):
        assert page.locator(part).first.bounding_box()["width"] >= width - 80, part
    shot(page, f"ticket-{device}")
    page.click("summary.confirm-all")
    sheet = page.locator(".confirm-sheet .sheet")
    box = sheet.bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= height  # on the first screen
    assert sheet.locator("tr[data-line]").evaluate_all("rows => rows.map(r => r.dataset.line)") \
        == ["0", "1", "3"]
    habit = sheet.locator("tr[data-line='3']").inner_text()
    assert "Learned from Bayside Rentals and Summit Framing, not this sub" in habit
    assert "chosen 4 times for other subs' 'Scissor lift 19'' (Bayside Rentals, Summit Framing)" \
        in habit  # Bayside's habit and Summit's scissor lift
    assert "Not covered: line 3 has no budget code" in sheet.inner_text()
    shot(page, f"confirm-all-{device}")
    page.click("button.confirm-listed")
    page.wait_for_selector("text=3 budget codes are confirmed")
    assert page.locator("button.approve").first.is_disabled()  # line 3 still has no code
    # A search that leaves one code picks it.
    page.locator("input.code-search[data-line='2']").fill("06-100.l")
    assert page.locator("select[name='routes[2]']").evaluate("s => s.selectedOptions[0].text") \
        .startswith("06-100.L")
    assert not page.locator("button.approve").first.is_disabled()
    with page.expect_response(lambda r: "/approve" in r.url):
        page.locator("button.approve").first.click()
    page.wait_for_selector("text=Written to Procore")
    written = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    # Written as confirmed and picked: read back from the change event.
    assert change_items(app, client, acme, ticket["id"]) == [
        line["budget_code"] for line in written["routing"]]
    assert written["routing"][2]["budget_code"] == "06-100.L"
    assert all(line["budget_code"] for line in written["routing"])


@pytest.mark.browser
@pytest.mark.parametrize("device", ["tablet", "portrait_tablet"])
def test_bulk_confirmation_lists_the_codes_its_button_writes_on_tablets(
        app, client, acme, live_server, request, device):
    from tests.test_review_triage import browser_sign_in

    context = request.getfixturevalue(device)
    replay(client, acme, HISTORY[:3] + [("Bayside Rentals", "A", "Lift for the ceiling",
                                         [("equipment", "Scissor lift 19'", "09-250")])] * 3)
    project = project_of(acme, "A")
    framed = [send(client, acme, "Summit Framing", project, f"Framed closet {i}",
                   [("labor", "framers"), ("materials", "metal studs")])[0] for i in range(5)]
    habit, _ = send(client, acme, "Sunbelt Rentals", project, "Lift for the soffit",
                    [("equipment", "Scissor lift 19'")])
    page = context.new_page()
    browser_sign_in(page, live_server, app, acme)
    page.goto(f"{live_server.url}/queue?project_id={project['id']}")
    for ticket in [*framed, habit]:
        page.check(f"input[name=ids][value='{ticket['id']}']")
    page.click("#bulk-approve")
    button = page.locator("#bulk-write")
    assert button.inner_text() == "Write 5, confirming 10 suggested codes"
    box = page.locator(".bulk-confirm")
    assert box.locator("table.bulk-suggestions tr[data-line]").count() == 10
    assert "chosen twice for Summit Framing's 'Framer'" in box.inner_text()
    held = box.locator(".bulk-held").inner_text()
    assert "Left out: open it to check (1)" in held and "Bayside Rentals and Summit Framing's habit" in held
    page.locator(".bulk-confirm h2").scroll_into_view_if_needed()
    shot(page, f"bulk-confirm-{device}")
    # The button that writes stays on screen while the list is read.
    on_screen = button.bounding_box()
    assert on_screen["y"] >= 0 and on_screen["y"] + on_screen["height"] <= \
        page.viewport_size["height"]
    button.click()
    page.wait_for_selector("text=5 written, 0 already in Procore, 0 not written")
    for ticket in framed:
        assert change_items(app, client, acme, ticket["id"]) == ["06-100.L", "09-250.M"]
    assert client.get(f"/v1/tickets/{habit['id']}", headers=acme.headers).json["status"] == \
        "submitted"


def test_a_create_routes_its_lines_before_it_takes_the_write_lock(client, acme, monkeypatch):
    # Another create waits on the database's write lock (SQLite's busy back-off) for as long
    # as a create holds it: the routing, a third of a create's time with 50,000 decisions,
    # runs before the lock is taken.
    from services.platform import database
    from services.routing import learning

    replay(client, acme, HISTORY[:3])
    in_write = []
    real = learning.Index.suggest
    monkeypatch.setattr(learning.Index, "suggest", lambda self, *args: (
        in_write.append(database._write_intent.get()), real(self, *args))[1])
    ticket, [place] = send(client, acme, "Summit Framing", project_of(acme, "A"), "Framed",
                           [("labor", "Framers")])
    assert ticket["routing"][place]["learned"]
    assert in_write == [False]
