"""The backup package: written tickets of one project as one PDF, a cover with the totals, then
each ticket's own document pages with its photos; over /v1, for a signed-in PM and from the queue."""
from __future__ import annotations

import io
import re
import subprocess
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from urllib.parse import unquote

import pytest
from PIL import Image

from models import short_reference
from support.images import data_url, noise_jpeg, png_bytes
from tests.test_accessibility import OpenRequests, serious_violations, settle
from tests.test_approval import act, control, create
from tests.test_documents import pdf_text
from tests.test_openapi import assert_error_matches_document
from tests.test_review_pages import sign_in
from tests.test_review_triage import browser_sign_in

pytestmark = pytest.mark.live

SIGNATURE = {"name": "Dana Reyes", "role": "GC superintendent",
             "signed_at": "2026-06-03T21:00:00Z", "image": None}


def photos(count: int, seed: int) -> list[dict]:
    """`count` distinct photos, each with a name of its own."""
    return [{"name": f"view-{seed}-{n}.jpg", "data_url": data_url(noise_jpeg(640, 480, seed=seed * 10 + n))}
            for n in range(1, count + 1)]


def written_ticket(client, tenant, sub: str, photo_count: int, seed: int, **extra) -> dict:
    """A signed ticket with photos, approved into its own change event, as the API reads it."""
    signature = dict(SIGNATURE, image=data_url(png_bytes(), "image/png"))
    ticket = create(client, tenant, sub=sub, photos=photos(photo_count, seed), signature=signature,
                    **extra)
    answer = act(client, tenant, ticket["id"], "approve")
    assert answer.status_code == 200, answer.json
    return client.get(f"/v1/tickets/{ticket['id']}", headers=tenant.headers).json


def three_written(client, tenant) -> list[dict]:
    """Three written tickets of one project, of two subs, with 2, 1 and 3 photos."""
    return [written_ticket(client, tenant, "Cedar Framing & Trim", 2, 1),
            written_ticket(client, tenant, "Bayside Rentals", 1, 2,
                           labor=[{"trade": "Flagger", "hours": 2, "rate": 50, "costCode": "01-500"}]),
            written_ticket(client, tenant, "Cedar Framing & Trim", 3, 3,
                           materials=[{"description": "Rebar", "quantity": 7, "unitCost": 12.35,
                                       "costCode": "02-200"}])]


def package(client, tenant, project_id: str, **query):
    """GET /v1/projects/{id}/backup-package with the query given."""
    return client.get(f"/v1/projects/{project_id}/backup-package", headers=tenant.headers,
                      query_string=query)


def pdf_pages(pdf: bytes, folder: Path) -> int:
    """How many pages a PDF has, as pdfinfo reads it."""
    path = folder / "count.pdf"
    path.write_bytes(pdf)
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, check=True, text=True,
                          timeout=60).stdout
    return int(re.search(r"^Pages:\s+(\d+)", info, re.MULTILINE).group(1))


def page_texts(pdf: bytes, folder: Path) -> list[str]:
    """The text of each page, laid out as printed (pdftotext -layout), page by page."""
    path = folder / "pages.pdf"
    path.write_bytes(pdf)
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True,
                          check=True, text=True, timeout=60).stdout
    return text.split("\f")[:pdf_pages(pdf, folder)]


def cover_text(pdf: bytes, folder: Path) -> str:
    """The cover's text in the order it is drawn (each cell whole), its spaces folded."""
    path = folder / "cover.pdf"
    path.write_bytes(pdf)
    return " ".join(subprocess.run(["pdftotext", "-raw", "-f", "1", "-l", "1", str(path), "-"],
                                   capture_output=True, check=True, text=True,
                                   timeout=60).stdout.split())


def image_count(pdf: bytes, folder: Path) -> int:
    """How many images are drawn on the PDF's pages (pdfimages -list)."""
    path = folder / "images.pdf"
    path.write_bytes(pdf)
    listing = subprocess.run(["pdfimages", "-list", str(path)], capture_output=True, check=True,
                             text=True, timeout=60).stdout.splitlines()
    return sum(1 for line in listing[2:] if line.split()[2:3] == ["image"])


def money(amount: Decimal) -> str:
    """Dollars as the documents print them."""
    return f"${amount:,.2f}"


def test_a_package_of_three_tickets_holds_every_ticket_and_every_photo_page(client, acme, tmp_path):
    tickets = three_written(client, acme)
    project_id = tickets[0]["project_id"]
    # named by T-reference and by id alike
    names = [short_reference(tickets[0]["id"]), tickets[1]["id"], short_reference(tickets[2]["id"])]
    answer = package(client, acme, project_id, tickets=",".join(names))
    assert answer.status_code == 200, answer.get_data(as_text=True)[:500]
    assert answer.mimetype == "application/pdf" and answer.data.startswith(b"%PDF-")
    assert re.fullmatch(rf'attachment; filename="backup-package-{project_id}-\d{{4}}-\d{{2}}-\d{{2}}\.pdf"',
                        answer.headers["Content-Disposition"])
    pages = page_texts(answer.data, tmp_path)
    # each ticket's pages are the pages of its own document, after a cover of one page
    own = [client.get(f"/v1/tickets/{t['id']}/document.pdf", headers=acme.headers).data
           for t in tickets]
    own_pages = [pdf_pages(pdf, tmp_path) for pdf in own]
    assert len(pages) == 1 + sum(own_pages)
    assert "Backup package" in pages[0] and "Totals by budget code" in pages[0]
    start = 1
    for ticket, count in zip(tickets, own_pages, strict=True):
        reference = short_reference(ticket["id"])
        assert reference in pages[0]  # listed on the cover
        first = " ".join(pages[start].split())
        assert f"Extra-work ticket {reference}" in first, (reference, first[:300])
        # every page of its own says whose it is at its foot
        assert all(f"· ticket {reference}" in page for page in pages[start:start + count])
        section = " ".join(" ".join(pages[start:start + count]).split())
        for number, photo in enumerate(ticket["photos"], start=1):
            assert f"Photo {number}: {photo['name']}" in section, (photo["name"], reference)
        assert "Signed by Dana Reyes" in section
        start += count
    # every photo and every signature is drawn, once each
    assert image_count(answer.data, tmp_path) == sum(len(t["photos"]) + 1 for t in tickets)


def cover_figures(cover: str, heading: str, stop: str) -> dict[str, str]:
    """The rows of one of the cover's sums tables: name -> amount as printed."""
    flat = cover.split(heading, 1)[1].split(stop, 1)[0]
    rows = {}
    for line in flat.splitlines():
        found = re.match(r"\s*(.+?)\s{2,}(\$[\d,]+\.\d\d)\s*$", line)
        if found and found.group(1) not in ("Total",):
            rows[found.group(1).strip()] = found.group(2)
    return rows


def test_the_cover_totals_are_the_sums_by_budget_code_and_by_sub(client, acme, app, tmp_path):
    from models.schemas import BackupPackageQuery
    from services.reports import backup_package

    tickets = three_written(client, acme)
    project_id = tickets[0]["project_id"]
    by_code: dict[str, Decimal] = defaultdict(Decimal)
    by_sub: dict[str, Decimal] = defaultdict(Decimal)
    for ticket in tickets:
        for route in ticket["routing"]:
            by_code[route["budget_code"] or "No budget code"] += Decimal(str(route["amount"]))
        by_sub[ticket["sub"]] += Decimal(str(ticket["total"]))
    grand = sum((Decimal(str(t["total"])) for t in tickets), Decimal("0"))
    assert sum(by_code.values()) == grand == sum(by_sub.values())
    assert len(by_code) >= 4 and len(by_sub) == 2
    answer = package(client, acme, project_id, tickets=",".join(t["id"] for t in tickets))
    assert answer.status_code == 200, answer.get_data(as_text=True)[:500]
    cover = page_texts(answer.data, tmp_path)[0]
    # the two tables stand side by side: the codes are left, the subs right, on the same lines
    column = next(line.index("Totals by sub") for line in cover.splitlines() if "Totals by sub" in line)
    left = "\n".join(line[:column] for line in cover.splitlines())
    codes = dict(re.findall(r"^\s*(\d\d-\d\d\d\.[A-Z]+)\s+(\$[\d,]+\.\d\d)", left, re.MULTILINE))
    assert codes == {code: money(amount) for code, amount in by_code.items()}, cover
    for sub, amount in by_sub.items():
        assert re.search(re.escape(sub) + r"\s+" + re.escape(money(amount)), cover), (sub, cover)
    assert cover.count(money(grand)) >= 3  # the package's total, and under each table
    # and the service's own sums, exact decimals
    with app.test_request_context():
        query = BackupPackageQuery(tickets=",".join(t["id"] for t in tickets))
        records = backup_package.chosen_tickets(acme.company_id, project_id, query)
        views = [backup_package.documents.ticket_pages(t)[0] for t in records]
        codes_sum, subs_sum, total = backup_package.totals(views, records)
    assert dict(codes_sum) == dict(by_code) and dict(subs_sum) == dict(by_sub) and total == grand
    assert all(isinstance(amount, Decimal) for _, amount in codes_sum + subs_sum)


def test_a_change_events_package_shows_its_number_status_and_change_orders(client, acme,
                                                                           sandbox_server, tmp_path):
    ticket = written_ticket(client, acme, "Cedar Framing & Trim", 1, 4)
    external = ticket["external"]
    answer = package(client, acme, ticket["project_id"], change_event_id=external["change_event_id"])
    assert answer.status_code == 200, answer.get_data(as_text=True)[:500]
    assert f"-change-event-{external['change_event_id']}-" in answer.headers["Content-Disposition"]
    cover = cover_text(answer.data, tmp_path)
    assert f"Change event #{external['number']} Not read from Procore yet" in cover
    assert short_reference(ticket["id"]) in cover
    # a record read back keeps its status on the ticket; the cover says it
    assert client.post(f"/v1/tickets/{ticket['id']}/sync", headers=acme.headers).status_code == 200
    answer = package(client, acme, ticket["project_id"], change_event_id=external["change_event_id"])
    cover = cover_text(answer.data, tmp_path)
    assert re.search(rf"Change event #{external['number']} Open \(read 20\d\d-\d\d-\d\d \d\d:\d\d ", cover)
    # closed in Procore and put on the sub's commitment change order, as read back
    procore = control(sandbox_server, acme)
    procore.set_change_event_status(int(ticket["project_id"]), external["change_event_id"], "Closed")
    procore.put_on_change_orders(external["change_event_id"], "commitment", "pending",
                                 title="Cedar extra work")
    procore.close()
    assert client.post(f"/v1/tickets/{ticket['id']}/sync", headers=acme.headers).status_code == 200
    answer = package(client, acme, ticket["project_id"], change_event_id=external["change_event_id"])
    cover = cover_text(answer.data, tmp_path)
    assert f"Change event #{external['number']} Closed (read " in cover
    assert "Commitment change order CCO-001 “Cedar extra work” (pending)" in cover
    # a change event of the project with no written ticket on it
    missing = package(client, acme, ticket["project_id"], change_event_id=987654)
    assert missing.status_code == 404 and missing.json["error"]["code"] == "change_event_not_found"


def test_another_companys_ticket_is_not_found_and_nothing_of_it_shows(app, client, acme, rival):
    mine = written_ticket(client, acme, "Cedar Framing & Trim", 1, 5)
    theirs = written_ticket(client, rival, "Cedar Framing & Trim", 1, 6,
                            description="Rival secret work behind the wall")
    for project_id in (mine["project_id"], theirs["project_id"]):
        for names in (theirs["id"], short_reference(theirs["id"]),
                      f"{mine['id']},{theirs['id']}"):
            answer = package(client, acme, project_id, tickets=names)
            assert answer.status_code == 404, answer.data[:300]
            assert answer.json["error"]["code"] == "ticket_not_found"
            assert "Rival" not in answer.get_data(as_text=True)
    # their change event is none of ours either
    answer = package(client, acme, theirs["project_id"],
                     change_event_id=theirs["external"]["change_event_id"])
    assert answer.status_code == 404 and answer.json["error"]["code"] == "change_event_not_found"
    # a reviewer of this company cannot open it either
    browser = sign_in(app, client, acme)
    page = browser.get(f"/projects/{theirs['project_id']}/backup-package?tickets={theirs['id']}")
    assert page.status_code == 404 and b"Rival secret" not in page.data


def test_what_cannot_be_packaged_is_refused_with_a_stable_code(client, acme, app):
    written = written_ticket(client, acme, "Cedar Framing & Trim", 1, 7)
    project_id = written["project_id"]
    unwritten = create(client, acme)
    other_project = next(p for p in acme.projects if str(p["id"]) != project_id)
    elsewhere = create(client, acme, project={**other_project, "id": str(other_project["id"])})
    cases = [
        ({}, 400, "validation_failed"),
        ({"tickets": " , "}, 400, "validation_failed"),
        ({"tickets": "bogus"}, 400, "validation_failed"),
        ({"tickets": "T-12"}, 400, "validation_failed"),
        ({"tickets": written["id"], "change_event_id": 5}, 400, "validation_failed"),
        ({"change_event_id": "abc"}, 400, "validation_failed"),
        ({"change_event_id": "0"}, 400, "validation_failed"),
        ({"change_event_id": str(2 ** 70)}, 400, "validation_failed"),
        ({"tickets": "x" * 5000}, 400, "validation_failed"),
        ({"tickets": ",".join(f"T-{n:08X}" for n in range(51))}, 400, "too_many_tickets"),
        ({"tickets": unwritten["id"]}, 409, "ticket_not_written"),
        ({"tickets": f"{written['id']},{unwritten['id']}"}, 409, "ticket_not_written"),
        ({"tickets": elsewhere["id"]}, 404, "ticket_not_found"),
        ({"tickets": "T-00000000"}, 404, "ticket_not_found"),
        ({"tickets": "00000000-0000-4000-8000-000000000000"}, 404, "ticket_not_found"),
    ]
    document = client.get("/v1/openapi.json").json
    for query, status, code in cases:
        answer = package(client, acme, project_id, **query)
        assert (answer.status_code, answer.json["error"]["code"]) == (status, code), (query, answer.json)
        # each body, its details included, is the shape the document gives its status
        assert_error_matches_document(document, "/projects/{project_id}/backup-package", "get",
                                      answer)
    refused = package(client, acme, project_id, tickets=unwritten["id"]).json["error"]
    assert refused["details"] == {"tickets": [short_reference(unwritten["id"])]}
    too_many = package(client, acme, project_id, tickets=",".join(f"T-{n:08X}" for n in range(51)))
    assert too_many.json["error"]["details"] == {"limit": 50, "chosen": 51}
    assert package(client, acme, "not-a-project", tickets=written["id"]).json["error"]["code"] \
        == "project_not_found"


def test_a_busy_renderer_answers_503_with_retry_after(client, acme, app):
    from services.tickets import documents

    ticket = written_ticket(client, acme, "Cedar Framing & Trim", 1, 8)
    app.config["DOCUMENT_WAIT_S"] = 0
    with app.app_context():
        slots = documents._slots()
        held = [slots.acquire(timeout=0) for _ in range(app.config["DOCUMENT_SLOTS"])]
    try:
        answer = package(client, acme, ticket["project_id"], tickets=ticket["id"])
        assert answer.status_code == 503 and answer.json["error"]["code"] == "document_busy"
        assert answer.headers["Retry-After"] == "5"
    finally:
        for _ in held:
            slots.release()


def test_the_page_needs_a_session_and_the_ticket_page_and_queue_lead_to_it(app, client, acme,
                                                                          tmp_path):
    tickets = three_written(client, acme)
    first = tickets[0]
    project_id = first["project_id"]
    address = f"/projects/{project_id}/backup-package?tickets={first['id']}"
    anonymous = app.test_client().get(address)
    assert anonymous.status_code in (302, 401) and b"%PDF" not in anonymous.data
    browser = sign_in(app, client, acme)
    answer = browser.get(address)
    assert answer.status_code == 200 and answer.data.startswith(b"%PDF-")
    # the written ticket's page links its change event's package
    event = first["external"]["change_event_id"]
    page = browser.get(f"/tickets/{first['id']}").get_data(as_text=True)
    link = f"/projects/{project_id}/backup-package?change_event_id={event}"
    assert f'href="{link}"' in page and "Backup package of change event" in page
    assert browser.get(link).data.startswith(b"%PDF-")
    # the queue's written tickets can be chosen and sent on to their package
    queue = browser.get("/queue?status=written").get_data(as_text=True)
    assert 'id="backup-package"' in queue and 'name="ids"' in queue
    sent = browser.post("/queue/backup-package", {"ids": [t["id"] for t in tickets[:2]]})
    assert sent.status_code == 303
    chosen = ",".join(t["id"] for t in tickets[:2])  # by id (never ambiguous), oldest first
    assert unquote(sent.headers["Location"]).endswith(
        f"/projects/{project_id}/backup-package?tickets={chosen}")
    text = pdf_text(browser.get(sent.headers["Location"]).data, tmp_path)
    assert all(short_reference(t["id"]) in text for t in tickets[:2])
    assert short_reference(tickets[2]["id"]) not in text
    by_htmx = browser.post("/queue/backup-package", {"ids": [tickets[0]["id"]]}, htmx=True)
    assert by_htmx.headers["HX-Redirect"].startswith(f"/projects/{project_id}/backup-package?")
    # what cannot be packaged is said in the queue, in a PM's words
    unwritten = create(client, acme)
    for ids, words in (([], "Choose the written tickets"),
                       ([first["id"], unwritten["id"]], "written to Procore only")):
        again = browser.post("/queue/backup-package", {"ids": ids, "from": "status=written"},
                             htmx=True)
        assert again.status_code == 200 and "HX-Redirect" not in again.headers
        assert words in again.get_data(as_text=True)
        assert "tickets=" not in again.get_data(as_text=True).split("package-refused", 1)[1][:300]


def test_the_operation_is_in_the_api_description_with_its_errors(client):
    spec = client.get("/v1/openapi.json").json
    operation = spec["paths"]["/projects/{project_id}/backup-package"]["get"]
    assert "application/pdf" in operation["responses"]["200"]["content"]
    assert {p["name"] for p in operation["parameters"]} >= {"project_id", "tickets", "change_event_id"}
    for status, code in (("400", "too_many_tickets"), ("404", "ticket_not_found"),
                         ("409", "ticket_not_written"), ("503", "document_busy")):
        assert code in operation["responses"][status]["x-error-codes"], status


def test_package_photos_are_shrunk_for_a_package_within_one_documents_limits(client, acme,
                                                                             tmp_path):
    ticket = written_ticket(client, acme, "Cedar Framing & Trim", 2, 9)
    own = client.get(f"/v1/tickets/{ticket['id']}/document.pdf", headers=acme.headers).data
    answer = package(client, acme, ticket["project_id"], tickets=ticket["id"])
    sizes = {}
    for name, pdf in (("own", own), ("package", answer.data)):
        path = tmp_path / f"{name}.pdf"
        path.write_bytes(pdf)
        listing = subprocess.run(["pdfimages", "-list", str(path)], capture_output=True,
                                 check=True, text=True, timeout=60).stdout.splitlines()[2:]
        sizes[name] = sorted(max(int(line.split()[3]), int(line.split()[4])) for line in listing
                             if line.split()[2] == "image")  # not the signature's alpha mask
    # the photos (640 px) keep their size in the ticket's own document, and are at most
    # PACKAGE_IMAGE_EDGE in the package; the signature (120 px) is drawn as it is
    assert sizes["own"] == [120, 640, 640]
    assert sizes["package"] == [120, 512, 512]


def test_a_jpeg_is_decoded_at_the_smallest_scale_its_shrunk_size_allows(monkeypatch):
    from PIL import JpegImagePlugin

    from services.files import pdf_render

    decoded = []
    draft = JpegImagePlugin.JpegImageFile.draft

    def recorded(self, mode, size):
        """The size the JPEG is decoded at, once draft has chosen its scale."""
        answer = draft(self, mode, size)
        decoded.append(self.size)
        return answer

    monkeypatch.setattr(JpegImagePlugin.JpegImageFile, "draft", recorded)
    photo = noise_jpeg(2048, 1536)
    data, media_type = pdf_render.shrunk(photo)
    assert media_type == "image/jpeg"
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (1000, 750)
    assert decoded == [(1024, 768)]  # half scale, not the whole photo
    pdf_render.shrunk(photo, pdf_render.PACKAGE_IMAGE_EDGE)
    assert decoded[-1] == (512, 384)  # a quarter


@pytest.mark.browser
def test_a_pm_downloads_a_package_from_the_queue_and_the_ticket_page(app, client, acme,
                                                                     live_server, axe_tablet,
                                                                     tmp_path):
    tickets = three_written(client, acme)
    page = axe_tablet.new_page()
    requests = OpenRequests(page)
    browser_sign_in(page, live_server, app, acme)
    page.goto(f"{live_server.url}/queue?status=written")
    settle(page, requests)
    assert page.locator("#backup-package").is_disabled()  # nothing chosen yet
    for ticket in tickets[:2]:
        page.check(f"#pick-{ticket['id']}")
    assert page.locator("#backup-package").is_enabled()
    assert serious_violations(page) == []
    with page.expect_download() as download:
        page.click("#backup-package")
    saved = tmp_path / "from-queue.pdf"
    download.value.save_as(saved)
    assert download.value.suggested_filename.startswith(f"backup-package-{tickets[0]['project_id']}-")
    text = pdf_text(saved.read_bytes(), tmp_path)
    assert all(short_reference(t["id"]) in text for t in tickets[:2])
    assert short_reference(tickets[2]["id"]) not in text
    assert page.url.endswith("/queue?status=written")  # the queue stays where it was
    # the written ticket's page offers its change event's package
    page.goto(f"{live_server.url}/tickets/{tickets[2]['id']}")
    settle(page, requests)
    link = page.get_by_role("link", name=re.compile("Backup package of change event"))
    assert serious_violations(page) == []
    with page.expect_download() as download:
        link.click()
    saved = tmp_path / "from-ticket.pdf"
    download.value.save_as(saved)
    assert short_reference(tickets[2]["id"]) in pdf_text(saved.read_bytes(), tmp_path)


def test_a_reference_two_tickets_share_is_refused_and_their_ids_still_work(client, acme, app):
    from sqlalchemy import text

    from models import db

    first, second = create(client, acme), create(client, acme)
    twin = first["id"][:8] + second["id"][8:]
    with app.app_context():
        db.session.execute(text("UPDATE tickets SET id = :twin WHERE id = :id"),
                           {"twin": twin, "id": second["id"]})
        db.session.commit()
    reference = short_reference(first["id"])
    assert short_reference(twin) == reference
    answer = package(client, acme, first["project_id"], tickets=reference)
    assert answer.status_code == 400, answer.json
    assert answer.json["error"]["code"] == "ticket_reference_ambiguous"
    # by id each is found (and refused only for not being written)
    for ticket_id in (first["id"], twin):
        named = package(client, acme, first["project_id"], tickets=ticket_id)
        assert named.json["error"]["code"] == "ticket_not_written"


def test_a_daily_log_entry_is_named_as_one_on_the_cover(client, acme, tmp_path):
    project = acme.project(change_events=False)
    ticket = create(client, acme, project, sub="Bayside Rentals")
    answer = act(client, acme, ticket["id"], "approve", {"destination": "daily_log"})
    assert answer.status_code == 200, answer.json
    made = package(client, acme, project["id"], tickets=short_reference(ticket["id"]))
    assert made.status_code == 200, made.get_data(as_text=True)[:300]
    cover = cover_text(made.data, tmp_path)
    number = answer.json["external"]["number"]
    assert f"Daily log entry{' #' + number if number else ''} Not read from Procore yet" in cover
    assert "Bayside Rentals $1,835.75" in cover
    # a daily log entry is no change event
    missing = package(client, acme, project["id"],
                      change_event_id=answer.json["external"]["manpower_log_id"])
    assert missing.json["error"]["code"] == "change_event_not_found"
