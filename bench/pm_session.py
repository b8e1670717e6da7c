"""A PM clearing a week of tickets on a tablet: taps and seconds per ticket, and an approval
while Procore hangs.

A fresh demo company first gets the PM's history (the routing corpus's past tickets, approved
on the PM's codes). Then a week comes in through the API as crews send it: 60 tickets from
four subs on three projects, the third without change events (its tickets go to the daily
log). Every ticket has a line on the crew's own cost code; every other one also has a line in
the sub's words without a code (suggested from the history), every tenth a line nobody routed
before (picked by hand on a change-event project), and every fifth is unsigned.

Chromium at 1024x768 then works the queue as a PM would: every ready ticket of the queue in one
bulk approval (its suggestions confirmed in the same step), then the rest one by one with
"Approve and next", confirming suggestions and picking codes where asked. A tap is a click or
a tick; choosing in a list is two (open it, choose). Seconds are the time from each tap until
the page has answered: the PM's waiting, not reading.

The hung approval: Procore's every call held for 30 s (the sandbox's fault switch), one tap on
Approve until the page says so, beside the same with Procore refusing connections outright.
"""
from __future__ import annotations

import re
import time

import requests

from bench.learning import replay_history
from support.images import data_url, signature_png
from support.routing_corpus import NEW, line_body

TICKETS = 60
TABLET = {"viewport": {"width": 1024, "height": 768}, "has_touch": True}
SUBS = ("Summit Framing", "Bolt Electric", "Rivera Concrete", "Delta Plumbing")
DONE = re.compile(r"\d+ written, \d+ already in Procore, \d+ not written")


class Tapper:
    """Taps on a page, counted, with the time until the page answered each one."""

    def __init__(self, page) -> None:
        self.page = page
        self.taps = 0
        self.waited_s = 0.0

    def tap(self, selector: str, *, then, count: int = 1) -> None:
        """Tap `selector`, then wait for `then()` to return; count the taps and the wait."""
        start = time.monotonic()
        self.page.locator(selector).first.click()
        then()
        self.waited_s += time.monotonic() - start
        self.taps += count

    def choose(self, select: str, value: str, *, then) -> None:
        """Choose an option in a list: two taps."""
        start = time.monotonic()
        self.page.select_option(select, value)
        then()
        self.waited_s += time.monotonic() - start
        self.taps += 2


def _week(api: str, headers: dict, projects: list[dict], letters: dict[str, str]) -> list[str]:
    """Send the week's tickets as crews do; their ids."""
    signature = {"name": "Gene Carter", "role": "GC super",
                 "image": data_url(signature_png(), "image/png")}
    spoken = [entry for entry in NEW if entry[5] is not None]
    third = next(p["id"] for p in projects if not p["change_events"])
    where = [letters["A"], letters["B"], third]
    ids = []
    for n in range(TICKETS):
        sub = SUBS[n % len(SUBS)]
        body = {"project_id": str(where[n % 3]), "description": f"Week ticket {n:02d}",
                "reason": "Directed by the GC", "directed_by": "Sam Ortiz", "sub": sub,
                "labor": [{"trade": "Laborer", "hours": 2 + n % 4, "rate": 55,
                           "costCode": "02-200"}], "equipment": [], "materials": []}
        if n % 2 == 0:
            _, _, description, kind, said, _ = spoken[n // 2 % len(spoken)]
            body[kind].append(line_body(kind, said))
            body["description"] = f"{description} ({n:02d})"
        if n % 10 == 3:
            body["labor"].append({"trade": "Piano tuner", "hours": 1, "rate": 80})
        if n % 5 != 4:
            body["signature"] = signature
        made = requests.post(f"{api}/tickets", json=body, headers=headers, timeout=60)
        made.raise_for_status()
        ids.append(made.json()["id"])
    return ids


def _sign_in(page, base_url: str, reviewer: dict) -> None:
    """Sign the PM in through the form."""
    page.goto(f"{base_url}/login")
    page.fill('input[name="email"]', reviewer["email"])
    page.fill('input[name="password"]', reviewer["password"])
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/queue.*"))


def _settled(page):
    """A wait for htmx to have swapped in its answer."""
    return lambda: page.wait_for_function("() => !document.querySelector('.htmx-request')")


def _bulk(tapper: Tapper) -> None:
    """Every ready ticket of the queue in one bulk approval."""
    page = tapper.page
    tapper.tap("text=All ready in this filter…", then=lambda: page.wait_for_selector(
        ".bulk-confirm, p.alert"))
    if not page.locator(".bulk-confirm").count():
        return
    if not page.locator("#bulk-write").count():  # every one left for its own page
        return
    tapper.tap("#bulk-write", then=lambda: page.wait_for_function(
        "pattern => new RegExp(pattern).test((document.querySelector('.bulk-results h2') || "
        "{}).textContent || '')", arg=DONE.pattern, timeout=300_000))
    page.wait_for_function("() => !document.querySelector('.bulk-confirm')")


def _one_by_one(tapper: Tapper, base_url: str) -> None:
    """The rest from the first row on, each put right where asked and approved with next."""
    page = tapper.page
    page.goto(f"{base_url}/queue")
    if not page.locator("tr.queue-row").count():
        return
    tapper.tap("tr.queue-row td.description a", then=lambda: page.wait_for_selector(
        ".decision-bar"))
    while "/tickets/" in page.url:
        if page.locator("summary.confirm-all").count():  # its sheet, then confirm what it lists
            tapper.tap("summary.confirm-all", then=lambda: page.wait_for_selector(
                "button.confirm-listed"))
            tapper.tap("button.confirm-listed", then=_settled(page))
        if page.locator("#act-commitment[data-suggested] .confirm-commitment").count():
            # the sub's suggested commitment, confirmed once for the sub and project
            tapper.tap("#act-commitment .confirm-commitment button", then=_settled(page))
        daily_log = page.locator('input[name="destination"][value="daily_log"]:checked').count()
        # Lines still to check: a guess or suggestion not ticked, or a line with no code chosen.
        open_lines = [] if daily_log else page.locator("tr[data-check]").evaluate_all(
            """rows => rows.filter(r => {
                 const box = r.querySelector('input[type=checkbox][name^="confirm["]');
                 const list = r.querySelector('select[name^="routes["]');
                 return !(box && box.checked) && !(list && list.value);
               }).map(r => [r.dataset.line, r.dataset.check])""")
        for line, check in open_lines:
            if check == "confirm":
                tapper.tap(f'tr[data-line="{line}"] input[name="confirm[{line}]"]', then=lambda: None)
            else:
                value = page.locator(f'select[name="routes[{line}]"] option:not([value=""])') \
                    .first.get_attribute("value")
                tapper.choose(f'select[name="routes[{line}]"]', value, then=lambda: None)
        before = page.url
        tapper.tap('.decision-bar button.approve[name="next"]',
                   then=lambda before=before: page.wait_for_function(
                       "url => location.href !== url", arg=before))
        page.wait_for_load_state()


def session(chromium, base_url: str, company: dict) -> dict:
    """The week, cleared as the PM did it: taps and seconds per ticket."""
    api = f"{base_url}/v1"
    headers = {"Authorization": f"Bearer {company['api_key']}"}
    letters = replay_history(base_url, company["api_key"], company["projects"])
    ids = _week(api, headers, company["projects"], letters)
    context = chromium.new_context(**TABLET)
    try:
        page = context.new_page()
        _sign_in(page, base_url, company["reviewer"])
        tapper = Tapper(page)
        start = time.monotonic()
        _bulk(tapper)
        bulk_taps = tapper.taps
        _one_by_one(tapper, base_url)
        elapsed = time.monotonic() - start
    finally:
        context.close()
    written = sum(requests.get(f"{api}/tickets/{ticket_id}", headers=headers, timeout=60)
                  .json()["status"] == "written" for ticket_id in ids)
    return {"tickets": len(ids), "written": written, "taps": tapper.taps, "bulk_taps": bulk_taps,
            "waited_s": tapper.waited_s, "elapsed_s": elapsed}


def _switch(company: dict) -> requests.Session:
    """The sandbox's fault switch for the company."""
    system = company["project_system"]
    control = requests.Session()
    token = control.post(f"{system['oauth_base']}/oauth/token", timeout=10, data={
        "grant_type": "client_credentials", "client_id": system["client_id"],
        "client_secret": system["client_secret"]})
    token.raise_for_status()
    control.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
    return control


def _approve_once_with(chromium, base_url: str, company: dict, fault: dict) -> float:
    """Seconds from the tap on Approve until the page answers, under `fault`."""
    api = f"{base_url}/v1"
    headers = {"Authorization": f"Bearer {company['api_key']}"}
    project = next(p["id"] for p in company["projects"] if p["change_events"])
    made = requests.post(f"{api}/tickets", headers=headers, timeout=60, json={
        "project_id": project, "description": "Hung approval", "reason": "r", "directed_by": "d",
        "labor": [{"trade": "Laborer", "hours": 1, "rate": 50, "costCode": "02-200"}]})
    made.raise_for_status()
    control = _switch(company)
    sandbox = company["project_system"]["api_base"]
    context = chromium.new_context(**TABLET)
    try:
        page = context.new_page()
        _sign_in(page, base_url, company["reviewer"])
        page.goto(f"{base_url}/tickets/{made.json()['id']}")
        control.post(f"{sandbox}/_sandbox/faults", timeout=10, json=fault).raise_for_status()
        start = time.monotonic()
        page.locator('.decision-bar button.approve:not([name="next"])').click()
        page.wait_for_selector(".bar-alert")
        return time.monotonic() - start
    finally:
        control.delete(f"{sandbox}/_sandbox/faults", timeout=10)
        context.close()


def hung(chromium, base_url: str, company: dict) -> dict:
    """An approval while Procore holds every call 30 s, and while it refuses connections."""
    every = ["GET", "POST", "PATCH", "PUT", "DELETE"]
    held = _approve_once_with(chromium, base_url, company, {
        "status": 503, "count": 500, "delay_s": 30, "methods": every})
    refused = _approve_once_with(chromium, base_url, company, {
        "status": 0, "count": 500, "methods": every})
    return {"hung_s": held, "refused_s": refused}
