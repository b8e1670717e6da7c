"""An approval's files on the change event whether Procore adds or replaces attachments: all
in one request, read back, and none lost or doubled."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from models import Ticket, db
from services.files import storage
from services.project_system import Attachment, projects
from services.project_system.procore import WAIT_ROUNDING_S
from support.images import data_url, jpeg_bytes, png_bytes
from tests.test_approval import act, control, create, origin_rows, remote, spike_limited

pytestmark = pytest.mark.live

MODES = ["add", "replace"]
SIGNATURE = {"name": "Sam Ortiz", "image": data_url(png_bytes(), "image/png")}


def attachment_names(app, tenant, ticket: dict) -> list[str]:
    """The file names on the ticket's change event, as the project system lists them."""
    event = remote(app, tenant).get_change_event(int(ticket["project_id"]),
                                                 ticket["external"]["change_event_id"])
    return [item["filename"] for item in event["attachments"]]


@pytest.mark.parametrize(("mode", "window_s", "rolling"), [
    ("add", 10, False), ("replace", 10, False), ("add", 60, True)])
def test_twelve_tickets_approved_four_at_a_time_each_carry_every_file_once(
        app, client, acme, sandbox_server, monkeypatch, mode, window_s, rolling):
    # Procore's 25 calls a window, fixed 10 s or rolling 60 s. A program approves four at a
    # time: each waits its turn at the company's write slot and its share of the budget, and
    # none is refused. Time is the sandbox's clock, with a fiftieth of each wait really
    # slept, against a write-slot wait of a tenth of a second (5 s against a 10 s window in
    # production): a slot wait that did not stretch over the calls ahead's pacing would
    # refuse approvals here.
    app.config["PROJECT_SYSTEM_WRITE_SLOT_WAIT_S"] = 0.1
    switch = control(sandbox_server, acme)
    switch.set_attachments_mode(mode)
    tickets = [create(client, acme, signature=SIGNATURE, photos=[
        {"name": "before.jpg", "data_url": data_url(jpeg_bytes(color=(n, 10, 20)))},
        {"name": "after.jpg", "data_url": data_url(jpeg_bytes(color=(n, 90, 20)))}])
        for n in range(12)]
    def approve(ticket: dict):
        return act(app.test_client(), acme, ticket["id"], "approve")

    with (spike_limited(app, acme, sandbox_server, monkeypatch, window_s=window_s,
                        rolling=rolling, real_share=0.02) as (clock, statuses),
          ThreadPoolExecutor(4) as pool):
        answers = list(pool.map(approve, tickets))
    assert [answer.status_code for answer in answers] == [200] * 12, [
        a.json["error"] for a in answers if a.status_code != 200]
    assert 429 not in statuses and len(statuses) > 25  # paced past the limit, never over it
    assert clock.sleeps and all(0 < seconds <= window_s + WAIT_ROUNDING_S
                                for seconds in clock.sleeps)
    if window_s == 60:  # waits past the 10 s an approval used to be allowed
        assert max(clock.sleeps) > 10
    for ticket, answer in zip(tickets, answers, strict=True):
        assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1
        assert attachment_names(app, acme, answer.json) == [
            "photo-01-before.jpg", "photo-02-after.jpg", "signature.png",
            f"ticket-T-{ticket['id'][:8].upper()}.pdf"]


def test_an_approval_waits_no_longer_than_its_budget_then_says_when_to_retry(
        app, client, acme, sandbox_server, monkeypatch):
    # Procore's rolling 60 s window is spent: an approval allowed 20 s answers 503 with
    # Retry-After (the 60 s left), having written nothing.
    app.config["PROJECT_SYSTEM_APPROVAL_BUDGET_WAIT_S"] = 20
    first, ticket = create(client, acme), create(client, acme)
    assert act(client, acme, first["id"], "approve").status_code == 200  # what it reads, kept
    with spike_limited(app, acme, sandbox_server, monkeypatch, window_s=60, rolling=True):
        control(sandbox_server, acme).set_spike_limit(1, window_s=60, rolling=True)
        remote(app, acme).list_units_of_measure()  # the one call of the window
        busy = act(client, acme, ticket["id"], "approve")
    assert busy.status_code == 503 and busy.json["error"]["code"] == "project_system_busy", \
        busy.json
    # the 60 s window, read in Procore's whole seconds and rounded up
    assert 20 < int(busy.headers["Retry-After"]) <= 62
    assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []


@pytest.mark.parametrize(("spent_s", "answer"), [(6.2, 200), (40, 503)])
def test_a_server_that_knows_nothing_yet_waits_for_a_spent_rate_limit_and_never_calls_it_away(
        app, client, acme, sandbox_server, monkeypatch, spent_s, answer):
    # Just started (nothing read yet) while the company's Procore budget is spent: the
    # approval's first reads wait the pause out instead of answering after their own 0.3 s
    # "cannot be reached"; past what a read may wait, it is "busy" with Retry-After, and the
    # pages do not take Procore for away.
    app.config["PROJECT_SYSTEM_APPROVAL_WRITE_WAIT_S"] = 0.3
    ticket = create(client, acme)
    app.extensions.pop("project_system_caches", None)
    with spike_limited(app, acme, sandbox_server, monkeypatch, real_share=0.1) as (clock, _):
        remote(app, acme).budget.done(0, clock() + spent_s)  # Procore said: none left for a while
        done = act(client, acme, ticket["id"], "approve")
    assert done.status_code == answer, done.json
    if answer == 200:
        assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1
    else:
        assert done.json["error"]["code"] == "project_system_busy"
        assert 1 <= int(done.headers["Retry-After"]) <= spent_s + 2
        assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []
    with app.app_context():
        assert projects.away_since(acme.company_id) is None


@pytest.mark.parametrize("mode", MODES)
def test_files_procore_stores_under_other_names_are_attached_once(app, client, acme,
                                                                  sandbox_server, mode):
    # Procore keeps "photo-01-wall.jpg" as "photo-01-wall_1234.jpg": the approval knows its
    # files by what it sent, and neither sends them again nor reports them lost.
    switch = control(sandbox_server, acme)
    switch.set_attachments_mode(mode, rename=True)
    ticket = create(client, acme, signature=SIGNATURE,
                    photos=[{"name": "wall.jpg", "data_url": data_url(jpeg_bytes())}])
    done = act(client, acme, ticket["id"], "approve")
    assert done.status_code == 200, done.json
    names = attachment_names(app, acme, done.json)
    assert len(names) == 3 and len(set(names)) == 3
    assert all(name.startswith(("photo-01-wall_", "signature_", "ticket-T-")) for name in names)
    assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_file_already_on_the_event_is_kept_and_not_doubled(app, client, acme, sandbox_server,
                                                             mode):
    switch = control(sandbox_server, acme)
    ticket = create(client, acme, signature=SIGNATURE,
                    photos=[{"name": "wall.jpg", "data_url": data_url(jpeg_bytes())}])
    switch.fault(503, methods=["PATCH"], match="change_events/")  # the files never arrive
    refused = act(client, acme, ticket["id"], "approve")
    assert refused.status_code == 502, refused.json
    [event] = origin_rows(sandbox_server, "change_events", ticket["id"])
    with app.app_context():  # a file reached the event some other way (an older attempt)
        key = db.session.get(Ticket, ticket["id"]).signature["image_key"]
        signature = storage.file_store().open(key)
        remote(app, acme).attach_files(int(ticket["project_id"]), event["id"], [
            Attachment("signature.png", "image/png", signature)])
    switch.set_attachments_mode(mode)
    done = act(client, acme, ticket["id"], "approve")
    assert done.status_code == 200, done.json
    assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1
    names = attachment_names(app, acme, done.json)
    assert sorted(names) == sorted(["photo-01-wall.jpg", "signature.png",
                                    f"ticket-T-{ticket['id'][:8].upper()}.pdf"])
