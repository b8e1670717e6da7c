"""An approval's files on the change event whether Procore adds or replaces attachments: all
in one request, read back, and none lost or doubled."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from models import Ticket, db
from services import storage
from services.project_system import Attachment
from tests.images import data_url, jpeg_bytes, png_bytes
from tests.test_approval import act, control, create, origin_rows, remote, spike_limited

pytestmark = pytest.mark.live

MODES = ["add", "replace"]
SIGNATURE = {"name": "Sam Ortiz", "image": data_url(png_bytes(), "image/png")}


def attachment_names(app, tenant, ticket: dict) -> list[str]:
    """The file names on the ticket's change event, as the project system lists them."""
    event = remote(app, tenant).get_change_event(int(ticket["project_id"]),
                                                 ticket["external"]["change_event_id"])
    return [item["filename"] for item in event["attachments"]]


@pytest.mark.parametrize("mode", MODES)
def test_twelve_tickets_approved_four_at_a_time_each_carry_every_file_once(
        app, client, acme, sandbox_server, monkeypatch, mode):
    switch = control(sandbox_server, acme)
    switch.set_attachments_mode(mode)
    tickets = [create(client, acme, signature=SIGNATURE, photos=[
        {"name": "before.jpg", "data_url": data_url(jpeg_bytes(color=(n, 10, 20)))},
        {"name": "after.jpg", "data_url": data_url(jpeg_bytes(color=(n, 90, 20)))}])
        for n in range(12)]
    def approve(ticket: dict):
        return act(app.test_client(), acme, ticket["id"], "approve")

    with spike_limited(app, acme, sandbox_server, monkeypatch) as (clock, statuses):
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(approve, tickets))
    assert [answer.status_code for answer in answers] == [200] * 12, [a.json for a in answers]
    assert 429 not in statuses and len(statuses) > 25  # paced past the limit, never over it
    assert clock.sleeps and all(0 < seconds <= 10 for seconds in clock.sleeps)
    for ticket, answer in zip(tickets, answers, strict=True):
        assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1
        assert attachment_names(app, acme, answer.json) == [
            "photo-01-before.jpg", "photo-02-after.jpg", "signature.png",
            f"ticket-T-{ticket['id'][:8].upper()}.pdf"]


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
