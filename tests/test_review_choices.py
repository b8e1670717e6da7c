"""The ticket page keeps what the PM chose on the approve form through every action on it."""
from __future__ import annotations

import datetime as dt
from html.parser import HTMLParser

import pytest
import time_machine

from models import Ticket, db, utcnow
from tests.test_approval import control
from tests.test_review_pages import new_ticket, sign_in

pytestmark = pytest.mark.live

FROM = "status=submitted&sort=newest"


class Controls(HTMLParser):
    """The forms, inputs and selected options of a page, with the form each sits in."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.forms: list[dict] = []
        self.inputs: list[dict] = []
        self.selected: dict[str, str] = {}
        self._form: dict | None = None
        self._select: str | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self._form = dict(attrs, inputs=[])
            self.forms.append(self._form)
        elif tag == "input":
            control = dict(attrs, within=self._form)
            self.inputs.append(control)
            if self._form is not None:
                self._form["inputs"].append(control)
        elif tag == "select":
            self._select = attrs.get("name")
        elif tag == "option" and "selected" in attrs and self._select:
            self.selected[self._select] = attrs.get("value", "")

    def handle_endtag(self, tag):
        if tag == "form":
            self._form = None
        elif tag == "select":
            self._select = None

    def checked(self, name: str, value: str | None = None) -> bool:
        """Whether an input of that name (and value) is ticked."""
        return any(i.get("name") == name and (value is None or i.get("value") == value)
                   and "checked" in i for i in self.inputs)

    def hidden_from(self) -> set[str]:
        """The queue views the page's forms send back."""
        return {i["value"] for i in self.inputs if i.get("name") == "from"}


def ticket_with_choices(client, acme):
    """A ticket, and approve-form choices for it: line 2's guess confirmed, line 3 picked."""
    ticket = new_ticket(client, acme)
    codes = client.get(f"/v1/projects/{acme.project()['id']}/cost-codes?q=02-200",
                       headers=acme.headers).json
    labor_code = next(b["id"] for b in codes["data"][0]["budget_codes"] if b["cost_type"] == "labor")
    guess = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["routing"][1]
    choices = {"destination": "daily_log", "allow_unrouted": "on", "from": FROM,
               "confirm[1]": str(guess["budget_code_id"]), "routes[2]": str(labor_code)}
    return ticket, choices


def assert_kept(html: str, choices: dict) -> None:
    """The page shows every choice again, and sends the queue view back with every form."""
    page = Controls(html)
    assert page.checked("destination", "daily_log") and not page.checked("destination", "change_event")
    assert page.checked("allow_unrouted")
    if "confirm[1]" in choices:
        assert page.checked("confirm[1]", choices["confirm[1]"])
    assert page.selected["routes[2]"] == choices["routes[2]"]
    assert page.hidden_from() == {FROM}


def test_a_failed_approval_keeps_every_choice(app, client, acme, sandbox_server):
    browser = sign_in(app, client, acme)
    ticket, choices = ticket_with_choices(client, acme)
    control(sandbox_server, acme).fault(422, methods=["POST"], message="Locked")
    failed = browser.post(f"/tickets/{ticket['id']}/approve", choices, htmx=True)
    html = failed.get_data(as_text=True)
    assert failed.status_code == 422 and "Nothing was written" in html
    assert_kept(html, choices)


@pytest.mark.parametrize("action", ["reprice", "authorization", "signature-requests", "reject"])
def test_every_action_on_the_page_keeps_every_choice(app, client, acme, action):
    browser = sign_in(app, client, acme)
    ticket, choices = ticket_with_choices(client, acme)
    form = {"name": "Sam Ortiz", "phone": "+1 555 123 4567"} if action == "signature-requests" else {}
    answer = browser.post(f"/tickets/{ticket['id']}/{action}", {**choices, **form}, htmx=True)
    assert answer.status_code in (200, 422), answer.get_data(as_text=True)
    assert_kept(answer.get_data(as_text=True), choices)


def test_creating_a_budget_code_keeps_every_choice(app, client, acme):
    browser = sign_in(app, client, acme)
    ticket, choices = ticket_with_choices(client, acme)
    html = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    create = next(f for f in Controls(html).forms if "create-code" in f.get("class", ""))
    del choices["confirm[1]"]  # the code is made for line 2, the guess to confirm
    made = browser.post(f"/tickets/{ticket['id']}/budget-codes",
                        {**{i["name"]: i["value"] for i in create["inputs"] if i["name"] != "csrf_token"},
                         **choices}, htmx=True)
    html = made.get_data(as_text=True)
    assert made.status_code == 200 and "01-500.L is ready" in html
    assert_kept(html, choices)
    assert Controls(html).selected["routes[1]"]  # the new code, picked for its line


def test_every_form_on_the_ticket_sends_the_approve_choices(app, client, acme):
    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme)
    client.post(f"/v1/projects/{acme.project()['id']}/authorizations", headers=acme.headers,
                json={"reference": "CD-014", "amount": 3000})
    page = Controls(browser.get(f"/tickets/{ticket['id']}?from=status%3Dsubmitted%26sort%3Dnewest")
                    .get_data(as_text=True))
    approve = next(f for f in page.forms if f.get("id") == "approve-form")
    # Every other form that redraws the ticket sends the approve form's choices, and the view.
    posting = [f for f in page.forms if f.get("hx-post") and f is not approve]
    assert {f["hx-post"].rsplit("/", 1)[1] for f in posting} >= {
        "budget-codes", "reprice", "authorization", "signature-requests", "reject"}
    for form in posting:
        assert form.get("hx-include") == "#approve-form", form["hx-post"]
        assert [i["value"] for i in form["inputs"] if i.get("name") == "from"] == [FROM]


def test_lines_written_with_no_budget_code_are_named_with_their_dollars(app, client, acme):
    browser = sign_in(app, client, acme)
    ticket, choices = ticket_with_choices(client, acme)
    del choices["routes[2]"]  # line 3 (Mystery, 1 h at $10) goes on no budget code
    done = browser.post(f"/tickets/{ticket['id']}/approve",
                        {**choices, "destination": "change_event"}, htmx=True)
    assert done.status_code == 200, done.get_data(as_text=True)
    assert "Written to Procore. 1 line ($10.00) was written with no budget code." in \
        done.get_data(as_text=True)
    after = browser.post(f"/tickets/{ticket['id']}/approve", {"destination": "change_event"},
                         htmx=True).get_data(as_text=True)
    assert "It was already in Procore. 1 line ($10.00) was written with no budget code." in after


def test_approve_and_next_names_blank_lines_on_the_next_ticket(app, client, acme):
    browser = sign_in(app, client, acme)
    ticket, choices = ticket_with_choices(client, acme)
    new_ticket(client, acme, description="The next one")
    del choices["routes[2]"]
    went = browser.post(f"/tickets/{ticket['id']}/approve",
                        {**choices, "destination": "change_event", "next": "1",
                         "from": "status=submitted"})
    assert went.status_code == 303
    html = browser.get(went.headers["Location"]).get_data(as_text=True)
    assert "was written to Procore. This is the next ticket. 1 line ($10.00) was written with " \
        "no budget code." in html


def test_a_ticket_being_written_says_so_and_offers_no_approve(app, client, acme):
    browser = sign_in(app, client, acme)
    ticket = new_ticket(client, acme)
    claimed = utcnow()
    with app.app_context():  # another request holds the approval claim
        row = db.session.get(Ticket, ticket["id"])
        row.approval_claim_id, row.approval_claimed_at = "00000000-aaaa-4000-8000-000000000000", claimed
        db.session.commit()
    html = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    assert "Someone is writing this ticket to Procore right now." in html
    assert "Needs review" not in html and "Approve and write" not in html
    ttl = app.config["APPROVAL_CLAIM_TTL_S"]
    with time_machine.travel(claimed + dt.timedelta(seconds=ttl + 1), tick=False):
        expired = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    assert "Approve and write" in expired and "writing this ticket" not in expired
