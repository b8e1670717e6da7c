"""Signing links over HTTP: requests through the API, signing with no account, refusals that
store nothing, voiding after a change, e-mail to a loopback SMTP server, reminders."""
from __future__ import annotations

import datetime as dt
import re
from zoneinfo import ZoneInfo

import pytest
import time_machine

from models import SignatureRequest, Ticket, db, short_reference
from services.capture import signing
from services.tickets import signatures
from support.images import data_url, jpeg_bytes, png_bytes
from tests.mailbox import smtp_server
from tests.plugins.storage import stored_names
from tests.test_approval import create
from tests.test_links import make_link
from tests.test_rates import save

pytestmark = pytest.mark.live

HOSTILE = '<script>alert("x")</script>'


def ask(client, tenant, ticket_id: str, **body):
    """POST a signature request; the answer."""
    return client.post(f"/v1/tickets/{ticket_id}/signature-requests", headers=tenant.headers,
                       json={"name": "Sam Ortiz", "role": "GC superintendent",
                             "phone": "+1 555 123 4567", **body})


def signing_path(answer) -> str:
    """The path of the signing link in a request's answer."""
    assert answer.status_code == 200, answer.json
    return "/s/" + answer.json["url"].rsplit("/s/", 1)[1]


def digest_on(page: str) -> str:
    """The content digest a signing page sends back with the signature."""
    return re.search(r'name="content_sha256" value="([0-9a-f]{64})"', page).group(1)


def sign_form(page: str, **changes) -> dict:
    """The form a signer sends: typed name and role, a qualifier, the drawing."""
    return {"content_sha256": digest_on(page), "name": "Sam Ortiz", "role": "Superintendent",
            "qualifier": "verified", "qualifier_reason": "",
            "image": data_url(png_bytes(), "image/png"), **changes}


def stored(app, ticket_id: str) -> Ticket:
    with app.app_context():
        db.session.expire_all()
        return db.session.get(Ticket, ticket_id)


def requests_of(app, ticket_id: str) -> list[SignatureRequest]:
    with app.app_context():
        return list(db.session.scalars(db.select(SignatureRequest)
                                       .where(SignatureRequest.ticket_id == ticket_id)))


@pytest.mark.both_stores
def test_a_signer_signs_from_the_link_with_no_account(app, client, acme):
    ticket = create(client, acme, photos=[{"name": "slab.jpg", "data_url": data_url(jpeg_bytes())}])
    answer = ask(client, acme, ticket["id"])
    path = signing_path(answer)
    created = answer.json
    assert created["state"] == "open" and created["emailed_at"] is None  # no mail set up
    assert created["sms_href"].startswith("sms:+15551234567?&body=")
    token = path.rsplit("/", 1)[1]
    assert len(token) == 43
    # The token itself is nowhere in the database: only its digest.
    (record,) = requests_of(app, ticket["id"])
    assert record.token_digest == signing.stored_digest(token) and token not in record.token_salt
    # The list never shows the link again.
    listed = client.get(f"/v1/tickets/{ticket['id']}/signature-requests", headers=acme.headers).json
    assert "url" not in listed["data"][0] and listed["data"][0]["state"] == "open"
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json[
        "awaiting_signature_since"] == created["created_at"]

    page = client.get(path)
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and page.headers["Referrer-Policy"] == "no-referrer"
    assert ticket["description"] in html and "Time and materials verified; scope disputed" in html
    photo = ticket["photos"][0]["id"]
    assert client.get(f"{path}/photos/{photo}/thumbnail").mimetype == "image/jpeg"
    assert client.get(f"{path}/photos/{photo + 1000}").status_code == 404

    # Not verified needs a reason: refused, nothing kept.
    refused = client.post(path, data=sign_form(html, qualifier="not_verified"))
    assert refused.status_code == 400
    assert "Please say why it is not verified." in refused.get_data(as_text=True)
    assert stored(app, ticket["id"]).signature is None

    done = client.post(path, data=sign_form(html, qualifier="not_verified",
                                            qualifier_reason="Crew size not seen"),
                       headers={"User-Agent": "PhoneBrowser/1.0"})
    assert done.status_code == 200 and "Signed. Thank you." in done.get_data(as_text=True)
    signature = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["signature"]
    with app.app_context():
        digest = signatures.content_digest(db.session.get(Ticket, ticket["id"]))
    assert signature["qualifier"] == "not_verified"
    assert signature["qualifier_reason"] == "Crew size not seen"
    assert signature["signed_via"] == "signing_link" and signature["user_agent"] == "PhoneBrowser/1.0"
    assert signature["ip_address"] == "127.0.0.1" and signature["content_sha256"] == digest
    assert signature["name"] == "Sam Ortiz" and signature["signed_at"]
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json[
        "awaiting_signature_since"] is None

    # Used: opening it again shows what was signed; signing again changes nothing.
    again = client.get(path)
    assert again.status_code == 200 and "cannot sign again" in again.get_data(as_text=True)
    files_before = stored_names(app)
    second = client.post(path, data=sign_form(html, name="Someone else",
                                              image=data_url(png_bytes(130, 50), "image/png")))
    assert second.status_code == 409
    assert stored(app, ticket["id"]).signature["name"] == "Sam Ortiz"
    assert stored_names(app) == files_before


@pytest.mark.both_stores
def test_expired_revoked_and_unknown_links_answer_a_page_and_store_nothing(app, client, acme):
    ticket = create(client, acme)
    revoked_path = signing_path(ask(client, acme, ticket["id"]))
    page = client.get(revoked_path).get_data(as_text=True)
    request_id = requests_of(app, ticket["id"])[0].id
    revoked = client.post(f"/v1/tickets/{ticket['id']}/signature-requests/{request_id}/revoke",
                          headers=acme.headers)
    assert revoked.status_code == 200 and revoked.json["state"] == "revoked"
    assert client.post(f"/v1/tickets/{ticket['id']}/signature-requests/{request_id}/revoke",
                       headers=acme.headers).json["revoked_at"] == revoked.json["revoked_at"]
    photos_before = stored_names(app)
    for method in ("get", "post"):
        answer = getattr(client, method)(revoked_path, data=sign_form(page) if method == "post" else None)
        assert answer.status_code == 410
        assert "This signing link was cancelled" in answer.get_data(as_text=True)
        # the signer can tell the sub which ticket to send a new link for
        assert f"the link for ticket {short_reference(ticket['id'])}" in answer.get_data(as_text=True)
    unknown = client.post("/s/" + "A" * 43, data=sign_form(page))
    assert unknown.status_code == 404 and "does not work" in unknown.get_data(as_text=True)

    expiring_path = signing_path(ask(client, acme, ticket["id"]))
    page = client.get(expiring_path).get_data(as_text=True)
    with time_machine.travel(dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=7, minutes=1),
                             tick=False):
        for method in ("get", "post"):
            answer = getattr(client, method)(expiring_path,
                                             data=sign_form(page) if method == "post" else None)
            assert answer.status_code == 410
            assert "This signing link has expired" in answer.get_data(as_text=True)
            assert f"the link for ticket {short_reference(ticket['id'])}" in \
                answer.get_data(as_text=True)
    assert stored(app, ticket["id"]).signature is None
    photos_after = stored_names(app)
    assert photos_after == photos_before  # not even the drawing was kept


def test_a_change_after_signing_voids_the_signature_and_the_page_says_so(app, client, acme):
    project = acme.project()["id"]
    ticket = create(client, acme, worked_on="2026-03-02", labor=[
        {"trade": "Electrician", "classification": "Journeyman Electrician", "hours": 2,
         "costCode": "26-050"}])
    path = signing_path(ask(client, acme, ticket["id"]))
    page = client.get(path).get_data(as_text=True)
    assert client.post(path, data=sign_form(page, qualifier="verified_scope_disputed")).status_code == 200
    # Priced again: the signer saw no amount for these hours; the amounts changed, so it is void.
    save(client, acme, project)
    repriced = client.post(f"/v1/tickets/{ticket['id']}/reprice", headers=acme.headers).json
    assert repriced["signature"] is None
    (voided,) = repriced["voided_signatures"]
    assert voided["name"] == "Sam Ortiz" and voided["qualifier"] == "verified_scope_disputed"
    assert voided["void_reason"] == signatures.VOID_REASON and voided["voided_at"]
    again = client.get(path)
    assert again.status_code == 409
    assert "Your signature no longer counts" in again.get_data(as_text=True)
    # A new request can be sent, and signs the new content.
    new_path = signing_path(ask(client, acme, ticket["id"]))
    page = client.get(new_path).get_data(as_text=True)
    assert client.post(new_path, data=sign_form(page)).status_code == 200
    # Pricing again without a change keeps the new signature.
    kept = client.post(f"/v1/tickets/{ticket['id']}/reprice", headers=acme.headers).json
    assert kept["signature"]["qualifier"] == "verified" and len(kept["voided_signatures"]) == 1


def test_a_ticket_changed_while_the_page_was_open_is_shown_again(app, client, acme):
    project = acme.project()["id"]
    ticket = create(client, acme, worked_on="2026-03-02", labor=[
        {"trade": "Electrician", "classification": "Journeyman Electrician", "hours": 2}])
    path = signing_path(ask(client, acme, ticket["id"]))
    page = client.get(path).get_data(as_text=True)
    save(client, acme, project)
    client.post(f"/v1/tickets/{ticket['id']}/reprice", headers=acme.headers)
    answer = client.post(path, data=sign_form(page))
    assert answer.status_code == 409 and "The ticket changed" in answer.get_data(as_text=True)
    assert stored(app, ticket["id"]).signature is None
    assert digest_on(answer.get_data(as_text=True)) != digest_on(page)


def test_hidden_amounts_are_not_shown_and_repricing_keeps_the_signature(app, client, acme):
    client.put("/v1/capture-settings", headers=acme.headers, json={"crew_enters_prices": False})
    project = acme.project()["id"]
    ticket = create(client, acme, worked_on="2026-03-02", labor=[
        {"trade": "Electrician", "classification": "Journeyman Electrician", "hours": 2}])
    path = signing_path(ask(client, acme, ticket["id"]))
    page = client.get(path).get_data(as_text=True)
    assert "Total" not in page and "$" not in page
    client.post(path, data=sign_form(page))
    save(client, acme, project)
    repriced = client.post(f"/v1/tickets/{ticket['id']}/reprice", headers=acme.headers).json
    assert repriced["total"] > 0 and repriced["signature"]["name"] == "Sam Ortiz"


def test_requests_are_scoped_to_the_company_and_refused_when_signed_or_written(app, client, acme, rival):
    ticket = create(client, acme)
    for answer in (ask(client, rival, ticket["id"]),
                   client.get(f"/v1/tickets/{ticket['id']}/signature-requests", headers=rival.headers),
                   client.post(f"/v1/tickets/{ticket['id']}/signature-requests/1/revoke",
                               headers=rival.headers)):
        assert answer.status_code == 404 and answer.json["error"]["code"] == "ticket_not_found"
    signing_path(ask(client, acme, ticket["id"]))
    request_id = requests_of(app, ticket["id"])[0].id
    other = create(client, rival)
    wrong = client.post(f"/v1/tickets/{other['id']}/signature-requests/{request_id}/revoke",
                        headers=rival.headers)
    assert wrong.status_code == 404 and wrong.json["error"]["code"] == "signature_request_not_found"
    for bad in ("x", "99999999999999999999", "-1"):
        assert client.post(f"/v1/tickets/{ticket['id']}/signature-requests/{bad}/revoke",
                           headers=acme.headers).status_code == 404
    nowhere = ask(client, acme, ticket["id"], phone=None)
    assert nowhere.status_code == 400
    assert nowhere.json["error"]["details"] == [
        {"field": "email", "message": "give an e-mail address or a phone number (or both)"}]
    assert len(requests_of(app, ticket["id"])) == 1
    signed = create(client, acme, signature={"name": "Sam", "qualifier": "verified",
                                             "image": data_url(png_bytes(), "image/png")})
    refused = ask(client, acme, signed["id"])
    assert refused.status_code == 409 and refused.json["error"]["code"] == "ticket_already_signed"


def test_typed_text_is_escaped_on_the_signing_page(app, client, acme):
    ticket = create(client, acme, description=HOSTILE, directed_by=HOSTILE)
    path = signing_path(ask(client, acme, ticket["id"], name=HOSTILE, role=HOSTILE))
    page = client.get(path).get_data(as_text=True)
    assert HOSTILE not in page and "&lt;script&gt;alert(" in page
    done = client.post(path, data=sign_form(page, name=HOSTILE, qualifier="not_verified",
                                            qualifier_reason=HOSTILE))
    assert done.status_code == 200 and HOSTILE not in done.get_data(as_text=True)


def test_every_refused_field_is_shown_in_plain_words_and_nothing_is_kept(app, client, acme):
    ticket = create(client, acme)
    path = signing_path(ask(client, acme, ticket["id"]))
    page = client.get(path).get_data(as_text=True)
    for field, error_id in (("role", "role-error"), ("name", "name-error"),
                            ("qualifier_reason", "reason-error")):
        form = sign_form(page, qualifier="not_verified", qualifier_reason="Crew size not seen")
        form[field] = "R" * 400  # past the form's own cap: only a script sends this
        refused = client.post(path, data=form)
        html = refused.get_data(as_text=True)
        assert refused.status_code == 400, field
        shown = re.search(rf'<small class="error" id="{error_id}">([^<]*)</small>', html).group(1)
        assert shown.startswith("Too long"), (field, shown)
        assert "string" not in html.lower() and field + "." not in html
    assert stored(app, ticket["id"]).signature is None


def test_the_signing_page_is_rate_limited_per_link(app, client, acme):
    app.config["SIGNING_RATE_LIMIT"] = "3 per minute"
    ticket = create(client, acme)
    path = signing_path(ask(client, acme, ticket["id"]))
    assert [client.get(path).status_code for _ in range(3)] == [200, 200, 200]
    limited = client.get(path)
    assert limited.status_code == 429 and "Too many tries" in limited.get_data(as_text=True)
    assert int(limited.headers["Retry-After"]) >= 1
    assert client.post(path, data={"name": "x"}).status_code == 429
    assert stored(app, ticket["id"]).signature is None


def test_the_link_is_emailed_and_signs_from_the_mail(app, client, acme):
    ticket = create(client, acme)
    with smtp_server() as mailbox:
        app.config.update(mailbox.settings())
        answer = ask(client, acme, ticket["id"], email="sam@gc.example", phone=None,
                     language="es")
        assert answer.status_code == 200 and answer.json["emailed_at"]
        (message,) = mailbox.messages
    assert message["To"] == "sam@gc.example" and "T-" in message["Subject"]
    body = message.get_content()
    assert ticket["description"] in body and "Trabajo" in body
    url = re.search(r"(http://\S+/s/[A-Za-z0-9_-]{43}\S*)", body).group(1)
    assert url == answer.json["url"] and url.endswith("?lang=es")
    path = "/" + url.split("://", 1)[1].split("/", 1)[1]
    page = client.get(path)
    assert page.status_code == 200 and '<html lang="es">' in page.get_data(as_text=True)
    done = client.post(path.split("?")[0], data=sign_form(page.get_data(as_text=True)))
    assert done.status_code == 200
    assert stored(app, ticket["id"]).signature["signed_via"] == "signing_link"


def test_reminders_go_on_jobsite_mornings_once_each_at_most_three(app, client, acme, runner):
    start = dt.datetime(2026, 7, 1, 15, 0, tzinfo=dt.timezone.utc)
    with smtp_server() as mailbox, time_machine.travel(start, tick=False) as clock:
        app.config.update(mailbox.settings())
        ticket = create(client, acme)
        answer = ask(client, acme, ticket["id"], email="sam@gc.example")
        assert len(mailbox.messages) == 1
        first = dt.datetime.fromisoformat(answer.json["next_reminder_at"])
        zone = ZoneInfo(requests_of(app, ticket["id"])[0].time_zone)
        assert zone.key == "America/Los_Angeles"  # the project's zone, as Procore names it
        # Asked at 08:00 on the jobsite: the first reminder is the next morning at 7:00 there.
        assert first.astimezone(zone).replace(tzinfo=None) == dt.datetime(2026, 7, 2, 7, 0)
        result = runner.invoke(args=["reminders", "send"])
        assert result.exit_code == 0 and "0 reminder" in result.output  # not due yet
        clock.move_to(first)
        for _ in range(2):  # run twice at the same moment: one reminder
            assert runner.invoke(args=["reminders", "send"]).exit_code == 0
        assert len(mailbox.messages) == 2 and mailbox.messages[1]["Subject"].startswith("Reminder")
        for day in (1, 2, 3, 4):
            clock.move_to(first + dt.timedelta(days=day))
            runner.invoke(args=["reminders", "send"])
        assert len(mailbox.messages) == 4  # the first e-mail and three reminders
        (record,) = requests_of(app, ticket["id"])
        assert record.reminders_sent == 3 and record.next_reminder_at is None


def test_no_reminder_for_a_signed_or_revoked_request(app, client, acme, runner):
    start = dt.datetime(2026, 7, 1, 15, 0, tzinfo=dt.timezone.utc)
    with smtp_server() as mailbox, time_machine.travel(start, tick=False) as clock:
        app.config.update(mailbox.settings())
        signed_ticket, revoked_ticket = create(client, acme), create(client, acme)
        path = signing_path(ask(client, acme, signed_ticket["id"], email="a@gc.example"))
        client.post(path, data=sign_form(client.get(path).get_data(as_text=True)))
        ask(client, acme, revoked_ticket["id"], email="b@gc.example")
        request_id = requests_of(app, revoked_ticket["id"])[0].id
        client.post(f"/v1/tickets/{revoked_ticket['id']}/signature-requests/{request_id}/revoke",
                    headers=acme.headers)
        clock.move_to(start + dt.timedelta(days=1))
        runner.invoke(args=["reminders", "send"])
        assert len(mailbox.messages) == 2  # the two first e-mails only


def test_the_review_page_sends_lists_and_cancels_links_and_the_queue_filters_on_them(app, client, acme):
    from models import short_reference
    from tests.test_review_pages import sign_in

    waiting, other = create(client, acme), create(client, acme, description="Hauled debris")
    browser = sign_in(app, client, acme)
    refused = browser.post(f"/tickets/{waiting['id']}/signature-requests",
                           {"name": "Sam Ortiz", "email": "", "phone": ""}, htmx=True)
    assert refused.status_code == 422
    assert "Give an e-mail address or a phone number" in refused.get_data(as_text=True)
    assert requests_of(app, waiting["id"]) == []
    made = browser.post(f"/tickets/{waiting['id']}/signature-requests",
                        {"name": HOSTILE, "role": "GC super", "phone": "+1 555 123 4567"}, htmx=True)
    html = made.get_data(as_text=True)
    assert made.status_code == 200 and "it is shown only now" in html
    url = re.search(r'id="new-sign-link" readonly value="([^"]+)"', html).group(1)
    assert "/s/" in url and 'href="sms:+15551234567?&amp;body=' in html
    assert HOSTILE not in html and "&lt;script&gt;" in html
    # Reading the page again never shows the link.
    again = browser.get(f"/tickets/{waiting['id']}").get_data(as_text=True)
    assert url not in again and "awaiting signature since" in again

    queue = browser.get("/queue?awaiting_signature=1").get_data(as_text=True)
    assert short_reference(waiting["id"]) in queue and short_reference(other["id"]) not in queue
    assert "awaiting signature since" in queue
    everything = browser.get("/queue").get_data(as_text=True)
    assert short_reference(other["id"]) in everything

    request_id = requests_of(app, waiting["id"])[0].id
    cancelled = browser.post(f"/tickets/{waiting['id']}/signature-requests/{request_id}/revoke",
                             htmx=True)
    assert "The signing link no longer works." in cancelled.get_data(as_text=True)
    assert client.get("/s/" + url.rsplit("/s/", 1)[1]).status_code == 410
    queue = browser.get("/queue?awaiting_signature=1").get_data(as_text=True)
    assert short_reference(waiting["id"]) not in queue


def test_a_crew_correction_with_other_hours_voids_the_signature_and_one_without_keeps_it(app, client, acme):
    token = client.post("/v1/links", headers=acme.headers,
                        json={"project_id": acme.project()["id"]}).json["token"]
    body = {"description": "Moved trench", "reason": "Gas line", "directed_by": "Sam",
            "labor": [{"trade": "Laborer", "hours": 2, "rate": 50}]}
    sent = client.post(f"/c/{token}/tickets", json={**body, "client_ref": "phone-sig-0001"}).json
    path = signing_path(ask(client, acme, sent["id"]))
    client.post(path, data=sign_form(client.get(path).get_data(as_text=True)))
    # Sent back and sent again with the same content: the signature still counts.
    client.post(f"/v1/tickets/{sent['id']}/reject", headers=acme.headers, json={"reason": "Photo?"})
    client.post(f"/c/{token}/tickets", json={**body, "client_ref": "phone-sig-0002",
                                             "revises": "phone-sig-0001"})
    same = client.get(f"/v1/tickets/{sent['id']}", headers=acme.headers).json
    assert same["signature"]["signed_via"] == "signing_link" and same["voided_signatures"] == []
    # Sent back and corrected to 3 hours: what was signed is gone, so the signature is void.
    client.post(f"/v1/tickets/{sent['id']}/reject", headers=acme.headers, json={"reason": "Hours"})
    client.post(f"/c/{token}/tickets", json={
        **body, "labor": [{"trade": "Laborer", "hours": 3, "rate": 50}],
        "client_ref": "phone-sig-0003", "revises": "phone-sig-0002"})
    changed = client.get(f"/v1/tickets/{sent['id']}", headers=acme.headers).json
    assert changed["labor"][0]["hours"] == 3 and changed["signature"] is None
    assert [v["signed_via"] for v in changed["voided_signatures"]] == ["signing_link"]
    assert client.post(f"/c/{token}/mine", json={"client_refs": ["phone-sig-0003"]}).json[
        "data"][0]["can_request_signature"] is True


def test_the_signer_downloads_the_signed_document_from_the_link(app, client, acme, tmp_path):
    from tests.test_documents import pdf_text

    ticket = create(client, acme)
    path = signing_path(ask(client, acme, ticket["id"]))
    html = client.get(path).get_data(as_text=True)
    done = client.post(path, data=sign_form(html, qualifier="verified_scope_disputed"))
    assert done.status_code == 200
    assert f'href="{path}/document.pdf"' in done.get_data(as_text=True)
    answer = client.get(f"{path}/document.pdf")
    assert answer.status_code == 200 and answer.mimetype == "application/pdf"
    assert answer.headers["Referrer-Policy"] == "no-referrer"
    flat = " ".join(pdf_text(answer.data, tmp_path).split())
    digest = stored(app, ticket["id"]).signature["content_sha256"]
    assert "Signed by Sam Ortiz, Superintendent" in flat and digest in flat
    assert "Signed as: Time and materials verified; scope disputed" in flat
    assert "from a signing link" in flat and "Total (USD)" in flat and "$" in flat
    # When the office prices, the signer verifies time and materials only: no money in it.
    client.put("/v1/capture-settings", headers=acme.headers, json={"crew_enters_prices": False})
    flat = " ".join(pdf_text(client.get(f"{path}/document.pdf").data, tmp_path).split())
    assert "Signed by Sam Ortiz" in flat and "$" not in flat and "Total (USD)" not in flat
    assert "Amounts are not shown" in flat
    # A cancelled link opens no document.
    other = create(client, acme)
    cancelled = signing_path(ask(client, acme, other["id"]))
    request_id = requests_of(app, other["id"])[0].id
    client.post(f"/v1/tickets/{other['id']}/signature-requests/{request_id}/revoke",
                headers=acme.headers)
    refused = client.get(f"{cancelled}/document.pdf")
    assert refused.status_code == 410 and refused.mimetype == "text/html"
    assert client.get("/s/" + "A" * 43 + "/document.pdf").status_code == 404


def test_the_signer_reads_times_on_the_jobsite_clock(app, client, acme):
    # 17:30 on the jobsite (America/Los_Angeles) is already the next day in UTC.
    start = dt.datetime(2026, 7, 2, 0, 30, tzinfo=dt.timezone.utc)
    with smtp_server() as mailbox, time_machine.travel(start, tick=False):
        app.config.update(mailbox.settings())
        ticket = create(client, acme)
        path = signing_path(ask(client, acme, ticket["id"], email="sam@gc.example"))
        (message,) = mailbox.messages
        assert "until 2026-07-08 17:30 PDT" in " ".join(message.get_content().split())
        page = client.get(path).get_data(as_text=True)
        assert "This link works until 2026-07-08 17:30 PDT" in page
        done = client.post(path, data=sign_form(page)).get_data(as_text=True)
    assert "was signed by Sam Ortiz on 2026-07-01 17:30 PDT." in done and "UTC" not in done


def test_a_signature_that_does_not_arrive_whole_gets_a_plain_page_and_the_way_back(app, client, acme):
    ticket = create(client, acme)
    path = signing_path(ask(client, acme, ticket["id"]))
    page = client.get(path).get_data(as_text=True)
    huge = sign_form(page, image="data:image/png;base64," + "A" * app.config["SMALL_BODY_BYTES"])
    refused = client.post(path, data=huge)
    html = refused.get_data(as_text=True)
    assert refused.status_code == 413 and "Your signature did not reach us" in html
    assert f'href="{path}"' in html and "Nothing was kept" in html
    words = re.sub(r"<[^>]+>", " ", html.split("<main", 1)[1])
    for technical in ("body", "bytes", "413", "limit"):
        assert technical not in words, technical
    assert refused.headers["Cache-Control"] == "no-store"
    assert stored(app, ticket["id"]).signature is None
    # Everything else in the same part of the service answers as before.
    assert client.get(f"/v1/tickets/{ticket['id']}/signature-requests/x/revoke").status_code == 405
    other = client.post(f"/v1/tickets/{ticket['id']}/signature-requests", headers=acme.headers,
                        data="x" * (app.config["SMALL_BODY_BYTES"] + 1),
                        content_type="application/json")
    assert other.status_code == 413 and other.json["error"]["code"] == "payload_too_large"


def test_the_signer_sees_which_project_the_ticket_is_on(app, client, acme):
    project = acme.project()
    ticket = create(client, acme, project)
    with smtp_server() as mailbox:
        app.config.update(mailbox.settings())
        path = signing_path(ask(client, acme, ticket["id"], email="sam@gc.example"))
        (message,) = mailbox.messages
    assert "Jobsite: 2024-017 - Riverside Medical Office Building" in message.get_content()
    page = client.get(path).get_data(as_text=True)
    assert re.search(r'<dd class="project">[^<]*Riverside Medical Office Building</dd>', page)


def test_a_new_ticket_is_written_without_looking_up_requests_and_a_resend_shows_them(
        app, client, acme):
    from tests.test_ticket_reads import StatementCounter

    with app.app_context():
        engine = db.engine
    body = {"project_id": acme.project()["id"], "description": "Cut the opening twice",
            "reason": "Moved by the GC", "directed_by": "Sam Ortiz", "client_ref": "resend-ref-01",
            "labor": [{"trade": "Laborer", "hours": 2, "workers": 1, "rate": 50}]}
    with StatementCounter(engine) as counter:
        first = client.post("/v1/tickets", headers=acme.headers, json=body)
    assert first.status_code == 200 and first.json["awaiting_signature_since"] is None
    # A ticket that did not exist a moment ago has no signature requests to look up.
    assert not [s for s in counter.statements if "signature_requests" in s]
    asked = ask(client, acme, first.json["id"])
    assert asked.status_code == 200
    again = client.post("/v1/tickets", headers=acme.headers, json=body)
    assert again.status_code == 200 and again.json["id"] == first.json["id"]
    assert again.json["awaiting_signature_since"] == asked.json["created_at"]


def test_a_rejected_ticket_cannot_be_signed_until_it_is_back_in_review(app, client, acme):
    ticket = create(client, acme)
    path = signing_path(ask(client, acme, ticket["id"]))
    html = client.get(path).get_data(as_text=True)
    assert client.post(f"/v1/tickets/{ticket['id']}/reject", headers=acme.headers,
                       json={"reason": "Wrong floor"}).status_code == 200
    # The signer is told it was sent back, on opening the link and on signing the page they had.
    for answer in (client.get(path), client.post(path, data=sign_form(html))):
        page = answer.get_data(as_text=True)
        assert answer.status_code == 409 and "This ticket was sent back" in page
        assert short_reference(ticket["id"]) in page
    assert stored(app, ticket["id"]).signature is None
    refused = ask(client, acme, ticket["id"])
    assert refused.status_code == 409 and refused.json["error"]["code"] == "ticket_rejected"
    assert len(requests_of(app, ticket["id"])) == 1
    # Put back in the queue: the same link signs.
    assert client.post(f"/v1/tickets/{ticket['id']}/restore", headers=acme.headers).status_code == 200
    done = client.post(path, data=sign_form(client.get(path).get_data(as_text=True)))
    assert done.status_code == 200 and stored(app, ticket["id"]).signature is not None


def test_the_signing_form_says_an_address_or_a_phone_is_needed(app, client, acme):
    from tests.test_review_pages import sign_in

    ticket = create(client, acme)
    page = sign_in(app, client, acme).get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    form = page[page.index('class="sign-request-form"'):]
    assert "Give an e-mail address or a mobile phone number (or both)" in form
    assert form.index("Give an e-mail address") < form.index('name="email"')


def crew_asks(client, token: str, client_ref: str, email: str):
    """POST a signature request from a capture link's phone; the answer."""
    return client.post(f"/c/{token}/signature-requests",
                       json={"client_ref": client_ref, "name": "Victim", "email": email})


def crew_sends(client, token: str, client_ref: str) -> None:
    """Send a ticket through a capture link under the phone's reference."""
    sent = client.post(f"/c/{token}/tickets", json={
        "client_ref": client_ref, "description": "d", "reason": "r", "directed_by": "x"})
    assert sent.status_code == 200, sent.json


def test_a_capture_link_keeps_at_most_three_open_signing_links_per_ticket(app, client, acme):
    token = make_link(client, acme)["token"]
    crew_sends(client, token, "phone-ref-0001")
    crew_sends(client, token, "phone-ref-0002")
    with app.app_context():
        ticket_id = db.session.scalars(db.select(Ticket.id).where(
            Ticket.client_ref == "phone-ref-0001")).one()
    with smtp_server() as mailbox:
        app.config.update(mailbox.settings())
        made = [crew_asks(client, token, "phone-ref-0001", f"victim{n}@example.com")
                for n in range(3)]
        assert [answer.status_code for answer in made] == [200, 200, 200]
        refused = crew_asks(client, token, "phone-ref-0001", "victim3@example.com")
        assert refused.status_code == 409
        assert refused.json["error"]["code"] == "too_many_signature_requests"
        assert "3 open signing links" in refused.json["error"]["message"]
        assert len(mailbox.messages) == 3 and len(requests_of(app, ticket_id)) == 3
        # Another ticket of the link, and the office through the API, are not held back.
        assert crew_asks(client, token, "phone-ref-0002", "sam@gc.example").status_code == 200
        assert ask(client, acme, ticket_id).status_code == 200
        # Once one of the crew's links is no longer open, the crew may make one again.
        first = min(r.id for r in requests_of(app, ticket_id))
        client.post(f"/v1/tickets/{ticket_id}/signature-requests/{first}/revoke",
                    headers=acme.headers)
        assert crew_asks(client, token, "phone-ref-0001", "sam@gc.example").status_code == 200


def test_a_capture_link_makes_a_limited_number_of_signing_links_per_hour(app, client, acme):
    app.config["CAPTURE_SIGNATURE_REQUEST_RATE_LIMIT"] = "2 per hour"
    token, other = make_link(client, acme)["token"], make_link(client, acme, "b")["token"]
    for ref in ("phone-ref-0001", "phone-ref-0002", "phone-ref-0003"):
        crew_sends(client, token, ref)
    crew_sends(client, other, "phone-ref-0004")
    with time_machine.travel("2026-07-01T10:00:00Z", tick=False) as clock:
        assert crew_asks(client, token, "phone-ref-0001", "a@example.com").status_code == 200
        assert crew_asks(client, token, "phone-ref-0002", "b@example.com").status_code == 200
        limited = crew_asks(client, token, "phone-ref-0003", "c@example.com")
        assert limited.status_code == 429 and limited.json["error"]["code"] == "rate_limited"
        assert 1 <= int(limited.headers["Retry-After"]) <= 3600
        with app.app_context():
            assert db.session.query(SignatureRequest).count() == 2
        assert crew_asks(client, other, "phone-ref-0004", "d@example.com").status_code == 200
        clock.shift(3601)
        assert crew_asks(client, token, "phone-ref-0003", "c@example.com").status_code == 200


def test_a_signing_request_made_through_the_api_speaks_the_crews_language(app, client, acme):
    import urllib.parse

    token = client.post("/v1/links", headers=acme.headers,
                        json={"project_id": acme.project()["id"]}).json["token"]
    body = {"description": "Se movió la zanja", "reason": "Tubería de gas", "directed_by": "Sam",
            "labor": [{"trade": "Ayudante", "hours": 2, "rate": 50}]}
    # The crew's phone sends its page's language; the plain form (no script) sends it too.
    sent = client.post(f"/c/{token}/tickets",
                       json={**body, "client_ref": "phone-es-0001", "language": "es"}).json
    plain = client.post(f"/c/{token}/tickets", data={
        "description": "Zanja", "reason": "Gas", "directed_by": "Sam", "language": "es"})
    assert plain.status_code == 200
    crews = client.get("/v1/tickets", headers=acme.headers).json["data"]
    assert len(crews) == 2 and all(client.get(f"/v1/tickets/{t['id']}", headers=acme.headers)
                                   .json["language"] == "es" for t in crews)
    from_program = create(client, acme)
    assert from_program["language"] is None
    with smtp_server() as mailbox:
        app.config.update(mailbox.settings())
        # A program asks for the signature and says nothing of the language: the crew's.
        answer = ask(client, acme, sent["id"], email="sam@gc.example")
        assert answer.status_code == 200 and answer.json["language"] == "es"
        assert answer.json["url"].endswith("?lang=es")
        text = urllib.parse.unquote(answer.json["sms_href"].split("body=", 1)[1])
        assert text.startswith("Por favor firme la boleta de trabajo extra T-")
        (message,) = mailbox.messages
        assert message["Subject"].startswith("Por favor firme la boleta de trabajo extra T-")
        assert "le pide firmar la boleta" in message.get_content()
        # Said outright, the request's language wins; a program's own ticket is in English.
        assert ask(client, acme, sent["id"], language="en").json["language"] == "en"
        english = ask(client, acme, from_program["id"], email="sam@gc.example")
        assert english.json["language"] == "en" and not english.json["url"].endswith("?lang=es")
        assert mailbox.messages[-1]["Subject"].startswith("Please sign extra-work ticket T-")
    listed = client.get(f"/v1/tickets/{sent['id']}/signature-requests", headers=acme.headers).json
    assert [r["language"] for r in listed["data"]] == ["en", "es"]


def test_a_sent_back_ticket_is_not_offered_for_signing(app, client, acme):
    from tests.test_review_pages import sign_in

    token = client.post("/v1/links", headers=acme.headers,
                        json={"project_id": acme.project()["id"]}).json["token"]
    sent = client.post(f"/c/{token}/tickets", json={
        "description": "Se movió la zanja", "reason": "Tubería de gas", "directed_by": "Sam",
        "client_ref": "phone-back-0001", "language": "es"}).json
    browser = sign_in(app, client, acme)
    page = browser.get(f"/tickets/{sent['id']}").get_data(as_text=True)
    assert "Send it to be signed" in page
    assert '<option value="es" selected>' in page  # the crew's language, to start with
    client.post(f"/v1/tickets/{sent['id']}/reject", headers=acme.headers, json={"reason": "Hours"})
    # Sent back, signing is refused; neither the PM's page nor the crew's phone offers it.
    assert ask(client, acme, sent["id"]).json["error"]["code"] == "ticket_rejected"
    assert "Send it to be signed" not in browser.get(f"/tickets/{sent['id']}").get_data(as_text=True)
    mine = client.post(f"/c/{token}/mine", json={"client_refs": ["phone-back-0001"]}).json
    assert mine["data"][0]["can_request_signature"] is False


@pytest.mark.parametrize("language, priced_by_office", [("en", "Priced by the office"),
                                                        ("es", "La oficina pone el precio")])
def test_an_unpriced_ticket_shows_the_signer_who_prices_it_never_zero_dollars(
        app, client, acme, language, priced_by_office):
    # The crew entered no rate and no rate sheet prices the line: the office prices it later.
    ticket = create(client, acme, labor=[{"trade": "Laborer", "workers": 2, "hours": 3}], equipment=[],
                    materials=[{"description": "Sleeve", "quantity": 1, "unitCost": 40}])
    page = client.get(signing_path(ask(client, acme, ticket["id"], language=language))) \
        .get_data(as_text=True)
    assert "$0.00" not in page
    lines = re.findall(r'<li class="sign-line (\w+)">.*?</li>', page, re.S)
    assert lines == ["labor", "materials"]
    labor, materials = re.findall(r'<li class="sign-line \w+">(.*?)</li>', page, re.S)
    assert priced_by_office in labor and "$" not in labor
    assert "$40.00" in materials
    # A total without the office's prices would be wrong: it says who prices it.
    total = re.search(r'<p class="sign-total">(.*?)</p>', page, re.S).group(1)
    assert priced_by_office in total and "$" not in total
