"""The signed ticket document: its text, its pages, its downloads and its place in Procore."""
from __future__ import annotations

import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest
from PIL import Image

from models import Ticket, db, short_reference
from services.files.storage import StoreSpec
from support.images import data_url, noise_jpeg, png_bytes
from tests.test_approval import act, actor, create, origin_rows, remote
from tests.test_review_pages import sign_in

pytestmark = pytest.mark.live

HOSTILE = '<script>alert(1)</script><b>bold</b> & "quoted"'
SIGNED_HASH = "ab" * 32
VOIDED_HASH = "cd" * 32


def pdf_text(pdf: bytes, folder: Path) -> str:
    """The text of a PDF as pdftotext reads it."""
    path = folder / "document.pdf"
    path.write_bytes(pdf)
    return subprocess.run(["pdftotext", str(path), "-"], capture_output=True,
                          check=True, text=True, timeout=60).stdout


def page_images(pdf: bytes, folder: Path) -> list[Image.Image]:
    """Every page of a PDF rendered to a PNG by pdftoppm, as images."""
    path = folder / "pages.pdf"
    path.write_bytes(pdf)
    subprocess.run(["pdftoppm", "-r", "40", "-png", str(path), str(folder / "page")],
                   check=True, capture_output=True, timeout=60)
    pages = []
    for png in sorted(folder.glob("page-*.png")):
        with Image.open(png) as image:
            pages.append(image.convert("L"))
    return pages


def inked(image: Image.Image) -> float:
    """The share of a page's pixels that are not white."""
    histogram = image.histogram()
    return 1 - sum(histogram[245:]) / (image.width * image.height)


def download(client, tenant, ticket_id: str):
    """GET the ticket's document through the API."""
    return client.get(f"/v1/tickets/{ticket_id}/document.pdf", headers=tenant.headers)


def signed_ticket(client, tenant, **extra) -> dict:
    """A ticket with hostile typed text, two photos (one with time and place) and a signature."""
    return create(
        client, tenant, description=f"Moved the trench {HOSTILE}",
        directed_by="Sam <i>Ortiz</i> (GC super)",
        labor=[{"trade": "Laborer <img src=x>", "hours": 8, "workers": 3, "rate": 55.5,
                "costCode": "02-200"}],
        photos=[{"name": "trench <east>.jpg", "data_url": data_url(noise_jpeg(640, 480)),
                 "taken_at": "2026-06-03T20:30:00Z",
                 "coords": {"lat": 37.77493, "lng": -122.41942, "accuracy_m": 8}},
                {"name": "gravel.jpg", "data_url": data_url(noise_jpeg(300, 400, seed=2))}],
        signature={"name": "Dana <u>Reyes</u>", "role": "GC superintendent",
                   "signed_at": "2026-06-03T21:00:00Z",
                   "image": data_url(png_bytes(), "image/png")}, **extra)


def give_signature_fields(app, ticket_id: str, voided=(), **fields) -> None:
    """Store the fields a signing link adds to a signature (qualifier code, hash), and voided ones."""
    with app.app_context():
        record = db.session.get(Ticket, ticket_id)
        record.signature = {**record.signature, **fields}
        record.voided_signatures = list(voided)
        db.session.commit()


@pytest.mark.both_stores
def test_document_holds_the_claim_as_text_and_every_page_renders(client, acme, app, tmp_path):
    ticket = signed_ticket(client, acme)
    give_signature_fields(
        app, ticket["id"], qualifier="verified_scope_disputed",
        qualifier_reason="Scope is in <b>bid package 4</b>", content_sha256=SIGNED_HASH,
        signed_via="signing_link",
        voided=[{"name": "Pat Early", "role": "Foreman", "signed_at": "2026-06-03T18:00:00Z",
                 "voided_at": "2026-06-03T19:00:00Z", "qualifier": "verified",
                 "image_key": "0" * 64 + ".png", "content_sha256": VOIDED_HASH,
                 "void_reason": "hours changed"}])
    answer = download(client, acme, ticket["id"])
    assert answer.status_code == 200, answer.get_data(as_text=True)[:500]
    assert answer.mimetype == "application/pdf" and answer.data.startswith(b"%PDF-")
    reference = short_reference(ticket["id"])
    assert answer.headers["Content-Disposition"] == f'attachment; filename="ticket-{reference}.pdf"'
    text = pdf_text(answer.data, tmp_path)
    flat = " ".join(text.split())
    for expected in (
            "Acme Mechanical", "Riverside Medical Office Building", reference,
            f"Moved the trench {HOSTILE}", "Conflict with an unmarked gas line",
            "Sam <i>Ortiz</i> (GC super)", "Lee Park",
            # every line: quantity, hours, rate, amount, budget code
            "Labor: Laborer <img src=x>", "24 worker-h", "3 × 8 h", "$55.50/h", "$1,332.00",
            "02-200.L", "Equipment: Mini excavator", "$95.00/h", "$380.00", "02-200.E",
            "Materials: Gravel", "$41.25 each", "$123.75", "02-200.M",
            "Labor subtotal", "Equipment subtotal", "Materials subtotal", "Total (USD)", "$1,835.75",
            # photos with time and place
            "Photo 1: trench <east>.jpg", "2026-06-03 13:30 PDT", "37.77493, -122.41942",
            "(within 8 m)", "Photo 2: gravel.jpg", "time not given · place not given",
            # the signature: signer, role, time, qualifier, reason, hash and the voided one
            "Signed by Dana <u>Reyes</u>, GC superintendent · 2026-06-03 14:00 PDT",
            "from a signing link", "Signed as: Time and materials verified; scope disputed",
            "Reason given: Scope is in <b>bid package 4</b>", SIGNED_HASH,
            "Pat Early, Foreman", "Time and materials verified", "hours changed", VOIDED_HASH,
            # history
            "Recorded by Lee Park via a connected program"):
        assert expected in flat, (expected, text)
    assert "&lt;" not in flat and "&amp;" not in flat  # typed text is text, never markup
    assert ticket["project_id"] not in flat  # the project by its name, not the system's id
    pages = page_images(answer.data, tmp_path)
    assert len(pages) >= 2
    assert all(inked(page) > 0.01 for page in pages), [inked(page) for page in pages]
    # the photos are on the pages as pictures: a page with them is well inked
    assert max(inked(page) for page in pages) > 0.08


def test_plain_signature_and_history_of_decisions(client, acme, app, tmp_path):
    ticket = create(client, acme, signature={"name": "Sam", "qualifier": "T&M only",
                                             "image": data_url(png_bytes(), "image/png")})
    assert act(client, acme, ticket["id"], "reject", {"reason": "Hours <b>too</b> high"}
               ).status_code == 200
    assert act(client, acme, ticket["id"], "restore").status_code == 200
    flat = " ".join(pdf_text(download(client, acme, ticket["id"]).data, tmp_path).split())
    # an older free-text qualifier is read as the signer's reason
    assert "Reason given: T&M only" in flat and f"Rejected by {actor(acme)}" in flat
    assert "“Hours <b>too</b> high”" in flat and f"Restored by {actor(acme)}" in flat
    unsigned = create(client, acme)
    assert "Not signed." in pdf_text(download(client, acme, unsigned["id"]).data, tmp_path)


def test_download_is_scoped_to_the_company(client, acme, rival):
    ticket = create(client, acme)
    assert download(client, rival, ticket["id"]).status_code == 404
    assert download(client, rival, ticket["id"]).json["error"]["code"] == "ticket_not_found"
    assert download(client, acme, "not-a-ticket").status_code == 404
    plain = client.get(f"/v1/tickets/{ticket['id']}/document.pdf",
                       headers={**acme.headers, "Accept": "application/octet-stream"})
    assert plain.mimetype == "application/octet-stream" and plain.data.startswith(b"%PDF-")
    assert client.get(f"/v1/tickets/{ticket['id']}/document.pdf").status_code == 401


def test_review_page_links_the_document(app, client, acme, rival):
    ticket = create(client, acme)
    assert client.get(f"/tickets/{ticket['id']}/document.pdf").status_code == 302  # sign in first
    browser = sign_in(app, client, acme)
    page = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    link = f'href="/tickets/{ticket["id"]}/document.pdf"'
    assert link in page and "Download the ticket document (PDF)" in page
    answer = browser.get(f"/tickets/{ticket['id']}/document.pdf")
    assert answer.status_code == 200 and answer.data.startswith(b"%PDF-")
    other = create(client, rival)
    assert browser.get(f"/tickets/{other['id']}/document.pdf").status_code == 404


def test_busy_renderer_answers_503_at_once(client, acme, app):
    from services.tickets import documents

    ticket = create(client, acme)
    app.config["DOCUMENT_WAIT_S"] = 0
    with app.app_context():
        slots = documents._slots()
        held = [slots.acquire(timeout=0) for _ in range(app.config["DOCUMENT_SLOTS"])]
    try:
        answer = download(client, acme, ticket["id"])
        assert answer.status_code == 503 and answer.json["error"]["code"] == "document_busy"
        assert answer.headers["Retry-After"] == "5"
    finally:
        for _ in held:
            slots.release()
    assert download(client, acme, ticket["id"]).status_code == 200


def test_the_document_reads_only_the_tickets_own_images(app, tmp_path):
    from services.files import pdf_render

    secret = tmp_path / "secret.png"
    Image.new("RGB", (200, 200), (0, 0, 0)).save(secret)
    html = (f'<p>x</p><img src="file://{secret}" style="width:150mm;height:150mm">'
            '<img src="http://127.0.0.1:9/a.png">')
    spec = StoreSpec(url=None, folder=str(tmp_path / "photos"), endpoint=None)
    pages = page_images(pdf_render.render_pdf(html, spec), tmp_path)
    assert len(pages) == 1 and inked(pages[0]) < 0.01  # neither image was fetched
    # and rendering leaves Pillow refusing truncated photos, as the photo checks need
    from PIL import ImageFile
    assert ImageFile.LOAD_TRUNCATED_IMAGES is False


def sandbox_file(sandbox_server, change_event_id: int, suffix: str) -> bytes:
    """The one file ending in `suffix` attached to a change event in the sandbox."""
    with closing(sqlite3.connect(sandbox_server.db_path)) as connection:
        rows = connection.execute("SELECT id FROM attachments WHERE owner_kind = 'change_event' "
                                  "AND owner_id = ? AND filename LIKE ?",
                                  [change_event_id, f"%{suffix}"]).fetchall()
    assert len(rows) == 1, rows
    return (Path(sandbox_server.files_dir) / str(rows[0][0])).read_bytes()


def test_approval_attaches_the_approved_document_once(client, acme, app, sandbox_server, tmp_path):
    ticket = signed_ticket(client, acme)
    written = act(client, acme, ticket["id"], "approve")
    assert written.status_code == 200, written.json
    external = written.json["external"]
    event = remote(app, acme).get_change_event(int(ticket["project_id"]),
                                               external["change_event_id"])
    reference = short_reference(ticket["id"])
    names = [a["filename"] for a in event["attachments"]]
    assert names == ["photo-01-trench-east.jpg", "photo-02-gravel.jpg", "signature.png",
                     f"ticket-{reference}.pdf"]
    document = next(a for a in event["attachments"] if a["filename"].endswith(".pdf"))
    assert document["content_type"] == "application/pdf"
    pdf = sandbox_file(sandbox_server, external["change_event_id"], ".pdf")
    flat = " ".join(pdf_text(pdf, tmp_path).split())
    assert "Approved, being written to Procore" in flat
    assert f"Approved by {actor(acme)}, written to Procore as a change event" in flat
    assert "02-200.L" in flat and "$1,835.75" in flat
    assert act(client, acme, ticket["id"], "approve").json["already"] is True
    again = remote(app, acme).get_change_event(int(ticket["project_id"]), external["change_event_id"])
    assert [a["filename"] for a in again["attachments"]] == names
    # the written ticket's own document now says where it went
    flat = " ".join(pdf_text(download(client, acme, ticket["id"]).data, tmp_path).split())
    assert "Written to Procore · Change event #001" in flat
    assert f"Approved by {actor(acme)}" in flat


def test_daily_log_notes_link_the_document(client, acme, app, sandbox_server):
    app.config["PUBLIC_BASE_URL"] = "https://tickets.example.com/"
    project = acme.project(change_events=False)
    ticket = create(client, acme, project)
    response = act(client, acme, ticket["id"], "approve", {"destination": "daily_log"})
    assert response.status_code == 200, response.json
    assert "signed ticket document" in response.json["external"]["note"]
    log = remote(app, acme).get_manpower_log(int(project["id"]),
                                             response.json["external"]["manpower_log_id"])
    assert f"https://tickets.example.com/tickets/{ticket['id']}/document.pdf" in log["notes"]
    assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []


def test_a_worker_that_made_a_document_still_refuses_truncated_photos(tmp_path):
    from services.files import image_pool, pdf_render
    from services.files.photos import ImageRejected, process_photo

    settings = image_pool.PoolSettings(1, 10, 768 * 1024 ** 2)  # one worker: the same process
    spec = StoreSpec(url=None, folder=str(tmp_path), endpoint=None)
    [pdf] = image_pool.run_all([(pdf_render.render_pdf, ("<p>x</p>", spec), {})],
                               settings, budget_s=60)
    assert pdf.startswith(b"%PDF-")
    whole = noise_jpeg(400, 300)
    [refused] = image_pool.run_all([(process_photo, (whole[:len(whole) // 2],), {})], settings,
                                   budget_s=60)
    assert isinstance(refused, ImageRejected) and "truncated" in refused.message


def test_the_document_is_in_the_api_description_as_a_file(client):
    document = client.get("/v1/openapi.json").json
    operation = document["paths"]["/tickets/{ticket_id}/document.pdf"]["get"]
    binary = {"schema": {"type": "string", "format": "binary"}}
    assert operation["responses"]["200"]["content"] == {"application/pdf": binary,
                                                        "application/octet-stream": binary}
    assert operation["responses"]["404"]["x-error-codes"] == ["not_found", "ticket_not_found"]
    assert "document_busy" in operation["responses"]["503"]["x-error-codes"]
    approve = document["paths"]["/tickets/{ticket_id}/approve"]["post"]
    assert "document_busy" in approve["responses"]["503"]["x-error-codes"]


def test_an_unpriced_ticket_is_priced_by_the_office_never_zero_dollars(client, acme, tmp_path):
    ticket = create(client, acme, labor=[{"trade": "Laborer", "hours": 3, "workers": 2,
                                          "costCode": "02-200"}])
    answer = download(client, acme, ticket["id"])
    assert answer.status_code == 200, answer.get_data(as_text=True)[:500]
    flat = " ".join(pdf_text(answer.data, tmp_path).split())
    assert "$0.00" not in flat
    assert "Total (USD) Priced by the office" in flat, flat
