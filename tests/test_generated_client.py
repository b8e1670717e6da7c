"""The API as a program meets it: a client generated from /v1/openapi.json does the whole job.

openapi-python-client (from the test extras) generates a Python client from the live document
into a temporary folder; the flow below uses only that client's typed models and functions.
The document is also linted with Redocly CLI and Spectral (tools/, installed by `make tools`).
"""
from __future__ import annotations

import datetime as dt
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from support.images import data_url, jpeg_bytes, noise_jpeg, png_bytes

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = Path(sys.executable).parent / "openapi-python-client"
REDOCLY = ROOT / "tools" / "node_modules" / ".bin" / "redocly"
SPECTRAL = ROOT / "tools" / "node_modules" / ".bin" / "spectral"
PACKAGE = "ewt_generated_client"


def write_document(app, folder: Path) -> Path:
    """The live document, as a program would download it."""
    path = folder / "openapi.json"
    path.write_text(json.dumps(app.test_client().get("/v1/openapi.json").json))
    return path


# The folder a client was generated into, by the document it was generated from: a test whose
# app serves the same document imports that client instead of generating it again.
GENERATED: dict[str, Path] = {}


@pytest.fixture
def generated(app, tmp_path):
    """Generate the client into a temporary folder and import it; forget it afterwards."""
    document = write_document(app, tmp_path)
    folder = GENERATED.get(document.read_text())
    if folder is None:
        config = tmp_path / "generator.yaml"
        config.write_text(f"package_name_override: {PACKAGE}\npost_hooks: []\n")
        result = subprocess.run(
            [str(GENERATOR), "generate", "--path", str(document), "--meta", "none",
             "--output-path", str(tmp_path / PACKAGE), "--config", str(config)],
            capture_output=True, text=True, timeout=300, cwd=tmp_path)
        output = result.stdout + result.stderr
        assert result.returncode == 0, output
        assert "warning" not in output.lower(), output
        assert "duplicate" not in output.lower(), output
        folder = GENERATED[document.read_text()] = tmp_path
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(folder))
        for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def api(generated, name: str):
    """One generated operation module, e.g. api(c, 'tickets.tickets_create_ticket')."""
    return importlib.import_module(f"{PACKAGE}.api.{name}")


def test_redocly_lint_finds_nothing(app, tmp_path):
    """No error and no warning (tools/redocly.yaml makes an unused component an error)."""
    assert REDOCLY.exists(), "run `make tools` first (make test does)"
    document = write_document(app, tmp_path)
    result = subprocess.run(
        [str(REDOCLY), "lint", "--config", str(ROOT / "tools" / "redocly.yaml"),
         "--format", "json", str(document)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "REDOCLY_TELEMETRY": "off", "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true"})
    report = json.loads(result.stdout[result.stdout.index("{"):])
    problems = [(p["ruleId"], p["severity"], p["message"]) for p in report["problems"]]
    assert result.returncode == 0, problems
    assert problems == []


def test_spectral_lint_finds_nothing(app, tmp_path):
    """Stoplight's OpenAPI ruleset (tools/spectral.yaml): no error, warning, hint or note."""
    assert SPECTRAL.exists(), "run `make tools` first (make test does)"
    document = write_document(app, tmp_path)
    result = subprocess.run(
        [str(SPECTRAL), "lint", "--ruleset", str(ROOT / "tools" / "spectral.yaml"),
         "--format", "json", "--fail-severity", "hint", "--quiet", str(document)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.stdout.lstrip().startswith("["), result.stdout + result.stderr
    problems = [(p["code"], p["severity"], p["message"], ".".join(map(str, p["path"])))
                for p in json.loads(result.stdout)]
    assert problems == []
    assert result.returncode == 0, result.stderr


def test_generated_client_drives_the_whole_flow(app, acme, generated):
    m = importlib.import_module(f"{PACKAGE}.models")
    client_module = importlib.import_module(f"{PACKAGE}.client")
    client = client_module.AuthenticatedClient(
        base_url="http://localhost/v1", token=acme.key,
        httpx_args={"transport": httpx.WSGITransport(app=app)})

    # Who am I, which projects, which codes.
    me = api(generated, "account.me_get_me").sync(client=client)
    assert isinstance(me, m.Me) and me.key.prefix == acme.prefix
    projects = api(generated, "projects.projects_list_projects").sync(client=client)
    assert isinstance(projects, m.ProjectList)
    project_id = acme.project()["id"]
    assert project_id in {p.id for p in projects.data}
    codes = api(generated, "projects.projects_search_cost_codes").sync(
        project_id, client=client, q="02-200")
    assert isinstance(codes, m.CostCodeList) and [c.code for c in codes.data] == ["02-200"]
    earthwork = codes.data[0]
    by_type = {b.cost_type: b for b in earthwork.budget_codes}
    assert by_type[m.CostType.LABOR].code == "02-200.L"
    painting = api(generated, "projects.projects_search_cost_codes").sync(
        project_id, client=client, q="09-650").data[0]
    made = api(generated, "projects.projects_create_budget_code").sync(
        project_id, client=client,
        body=m.BudgetCodeInput(cost_code_item_id=painting.id,
                               cost_type=m.BudgetCodeInputCostType.LABOR))
    assert isinstance(made, m.BudgetCodeOut) and made.created is True
    assert made.cost_type == m.CostType.LABOR

    # A ticket with a photo and a signature.
    taken = dt.datetime(2026, 5, 4, 7, 30, tzinfo=dt.timezone.utc)
    body = m.TicketInput(
        project_id=project_id, description="Moved the trench 3 m east",
        reason="Conflict with an unmarked gas line", directed_by="Sam Ortiz (GC super)",
        labor=[m.LaborLineIn(trade="Laborer", hours=8, workers=3, rate=55.5, cost_code="02-200"),
               m.LaborLineIn(trade="Cleaner", hours=2, rate=10, cost_code="01-500")],
        photos=[m.PhotoIn(data_url=data_url(jpeg_bytes()), name="trench.jpg", taken_at=taken,
                          coords=m.Coords(lat=37.77, lng=-122.42, accuracy_m=8))],
        signature=m.SignatureIn(name="Sam Ortiz", role="GC superintendent", signed_at=taken,
                                qualifier=m.SignatureQualifier.VERIFIED_SCOPE_DISPUTED,
                                image=data_url(png_bytes(), "image/png")))
    ticket = api(generated, "tickets.tickets_create_ticket").sync(client=client, body=body)
    assert isinstance(ticket, m.Ticket), ticket
    assert ticket.status == m.TicketStatus.SUBMITTED and ticket.total == 1352
    assert ticket.photo_count == 1 and ticket.photos[0].coords.lat == 37.77
    assert ticket.signature.name == "Sam Ortiz" and ticket.signature.signed_at == taken
    assert ticket.signature.qualifier == m.SignatureQualifier.VERIFIED_SCOPE_DISPUTED
    assert ticket.signature.signed_via == m.SignedVia.API and len(ticket.signature.content_sha256) == 64
    assert ticket.photos[0].taken_at == taken

    # The evidence a reviewer judges, through the same client and key.
    photo = api(generated, "evidence.tickets_get_photo").sync(ticket.id, ticket.photos[0].id,
                                                             client=client)
    assert photo.payload.read()[:2] == b"\xff\xd8"
    thumb = api(generated, "evidence.tickets_get_signature_thumbnail").sync(ticket.id, client=client)
    assert thumb.payload.read()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ticket.photos[0].url.endswith(f"/v1/tickets/{ticket.id}/photos/{ticket.photos[0].id}")
    # Made without reading the project's codes; the first read routes it.
    assert ticket.routing_pending is True
    ticket = api(generated, "tickets.tickets_get_ticket").sync(ticket.id, client=client)
    assert ticket.routing_pending is False
    assert [line.exact for line in ticket.routing] == [True, False]

    # Listed with filters and paging, read with routing.
    second = api(generated, "tickets.tickets_create_ticket").sync(client=client, body=m.TicketInput(
        project_id=project_id, description="Hauled debris", reason="Owner's debris",
        directed_by="Sam Ortiz", equipment=[m.EquipmentLineIn(description="Dump truck", hours=2,
                                                               rate=90, cost_code="02-200")]))
    page = api(generated, "tickets.tickets_list_tickets").sync(
        client=client, status=m.TicketStatus.SUBMITTED, project_id=project_id, limit=1, offset=1)
    assert isinstance(page, m.TicketList)
    assert (page.total, page.limit, page.offset, [t.id for t in page.data]) == \
        (2, 1, 1, [ticket.id])
    found = api(generated, "tickets.tickets_list_tickets").sync(client=client, q="debris")
    assert [t.id for t in found.data] == [second.id]
    read = api(generated, "tickets.tickets_get_ticket").sync(ticket.id, client=client)
    assert isinstance(read, m.Ticket) and read.routing[1].kind == m.LineKind.LABOR
    assert read.routing[1].budget_code == "01-500.O" and read.routing[1].needs_review

    # Attach a photo, then approve with a person's route and require_exact.
    with_photo = api(generated, "evidence.tickets_add_photos").sync(
        ticket.id, client=client,
        body=m.PhotosInput(photos=[m.PhotoIn(data_url=data_url(jpeg_bytes(color=(1, 2, 3))))]))
    assert isinstance(with_photo, m.Ticket) and with_photo.photo_count == 2
    refused = api(generated, "approval.tickets_approve_ticket").sync(
        ticket.id, client=client, body=m.ApproveInput(require_exact=True))
    assert isinstance(refused, m.ErrorBody) and refused.error.code == "lines_need_review"
    assert [(d.line, d.reason) for d in refused.error.details] == \
        [(1, "not on a confirmed budget code (exact: false)")]
    assert all(isinstance(d, m.LineRefusal) for d in refused.error.details)
    labor = by_type[m.CostType.LABOR]
    approved = api(generated, "approval.tickets_approve_ticket").sync(
        ticket.id, client=client,
        body=m.ApproveInput(require_exact=True,
                            routes=m.ApproveInputRoutes.from_dict({"1": labor.id})))
    assert isinstance(approved, m.ApprovalResult), approved
    assert approved.status == m.TicketStatus.WRITTEN and approved.already is False
    assert approved.external.destination == m.Destination.CHANGE_EVENT
    assert isinstance(approved.external.written_at, dt.datetime)
    assert approved.routing[1].budget_code_id == labor.id and approved.routing[1].exact
    again = api(generated, "approval.tickets_approve_ticket").sync(
        ticket.id, client=client, body=m.ApproveInput())
    assert again.already is True
    # Where it stands in Procore, read back.
    synced = api(generated, "approval.tickets_sync_ticket").sync(ticket.id, client=client)
    assert isinstance(synced, m.Ticket) and synced.external.status == "Open"
    assert synced.external.change_orders == [] and synced.external.deleted is False
    assert isinstance(synced.external.status_read_at, dt.datetime)

    # Reject and restore the second ticket.
    rejected = api(generated, "approval.tickets_reject_ticket").sync(second.id, client=client)
    assert isinstance(rejected, m.Ticket) and rejected.status == m.TicketStatus.REJECTED
    restored = api(generated, "approval.tickets_restore_ticket").sync(second.id, client=client)
    assert restored.status == m.TicketStatus.SUBMITTED
    assert [d.action.value for d in restored.decisions] == ["rejected", "restored"]

    # Sent to be signed from a link: the link is in the answer only, then listed and revoked.
    asked = api(generated, "signature_requests.signatures_create_signature_request").sync(
        second.id, client=client,
        body=m.SignatureRequestInput(name="Sam Ortiz", role="GC superintendent",
                                     phone="+1 555 123 4567"))
    assert isinstance(asked, m.SignatureRequestCreated), asked
    assert asked.state == m.SignatureRequestState.OPEN and "/s/" in asked.url
    listed = api(generated, "signature_requests.signatures_list_signature_requests").sync(
        second.id, client=client)
    assert isinstance(listed, m.SignatureRequestList) and [r.id for r in listed.data] == [asked.id]
    assert not hasattr(listed.data[0], "url")
    cancelled = api(generated, "signature_requests.signatures_revoke_signature_request").sync(
        second.id, str(asked.id), client=client)
    assert isinstance(cancelled, m.SignatureRequest)
    assert cancelled.state == m.SignatureRequestState.REVOKED
    signed_already = api(generated, "signature_requests.signatures_create_signature_request").sync(
        ticket.id, client=client, body=m.SignatureRequestInput(name="Sam", email="sam@gc.example"))
    assert isinstance(signed_already, m.ErrorBody)
    assert signed_already.error.code in ("ticket_written", "ticket_already_signed")

    # The ticket log as CSV, with the list's filters.
    exported = api(generated, "tickets.tickets_export_tickets").sync(
        client=client, status=m.TicketStatus.SUBMITTED, project_id=project_id)
    assert isinstance(exported, str) and exported.startswith("\ufeffreference,status,")
    assert second.id in exported and ticket.id not in exported

    # Capture links.
    link = api(generated, "links.links_create_link").sync(
        client=client, body=m.LinkInput(project_id=project_id, label="North trailer"))
    assert isinstance(link, m.Link) and link.urls.qr.endswith("/q")
    links = api(generated, "links.links_list_links").sync(client=client)
    assert [item.token for item in links.data] == [link.token]
    revoked = api(generated, "links.links_revoke_link").sync(link.token, client=client)
    assert isinstance(revoked, m.Link) and isinstance(revoked.revoked_at, dt.datetime)

    # Webhooks: an endpoint with its secret once, its deliveries typed, a private address refused.
    endpoint = api(generated, "webhooks.webhooks_create_webhook").sync(
        client=client, body=m.WebhookEndpointInput(
            url="https://erp.example.com/in", events=[m.WebhookEventType.TICKET_WRITTEN]))
    assert isinstance(endpoint, m.WebhookEndpointCreated) and endpoint.secret.startswith("whsec_")
    changed = api(generated, "webhooks.webhooks_update_webhook").sync(
        endpoint.id, client=client, body=m.WebhookEndpointPatch(enabled=False))
    assert isinstance(changed, m.WebhookEndpoint) and changed.enabled is False
    deliveries = api(generated, "webhooks.webhooks_list_webhook_deliveries").sync(
        endpoint.id, client=client)
    assert isinstance(deliveries, m.WebhookDeliveryList) and deliveries.data == []
    refused = api(generated, "webhooks.webhooks_create_webhook").sync(
        client=client, body=m.WebhookEndpointInput(url="http://169.254.169.254/latest"))
    assert isinstance(refused, m.ErrorBody) and refused.error.code == "webhook_url_refused"

    # Errors come back as typed bodies.
    bad = api(generated, "tickets.tickets_create_ticket").sync(client=client, body=m.TicketInput(
        project_id=project_id, description="x", reason="y", directed_by="z",
        photos=[m.PhotoIn(data_url=data_url(b"not an image"))]))
    assert isinstance(bad, m.ErrorBody) and bad.error.code == "validation_failed"
    assert all(isinstance(d, m.FieldProblem) for d in bad.error.details)
    assert bad.error.details[0].field.startswith("photos[0]")
    missing = api(generated, "tickets.tickets_get_ticket").sync(
        "00000000-0000-4000-8000-000000000000", client=client)
    assert isinstance(missing, m.ErrorBody) and missing.error.code == "ticket_not_found"
    written = api(generated, "approval.tickets_reject_ticket").sync(ticket.id, client=client)
    assert isinstance(written, m.ErrorBody) and written.error.code == "ticket_written"
    app.config["API_RATE_LIMIT"] = "1 per minute"
    assert api(generated, "account.me_get_me").sync_detailed(client=client).status_code == 200
    limited = api(generated, "account.me_get_me").sync_detailed(client=client)
    assert limited.status_code == 429
    assert isinstance(limited.parsed, m.ErrorBody) and limited.parsed.error.code == "rate_limited"
    assert int(limited.headers["Retry-After"]) >= 1
    assert limited.headers["RateLimit-Remaining"] == "0"


def ticket_for_a_photo(app, acme, generated):
    """The generated models and types, a client on the app, and a ticket expecting one photo."""
    m = importlib.import_module(f"{PACKAGE}.models")
    types = importlib.import_module(f"{PACKAGE}.types")
    client = importlib.import_module(f"{PACKAGE}.client").AuthenticatedClient(
        base_url="http://localhost/v1", token=acme.key,
        httpx_args={"transport": httpx.WSGITransport(app=app)})
    ticket = api(generated, "tickets.tickets_create_ticket").sync(client=client, body=m.TicketInput(
        project_id=acme.project()["id"], description="Moved the trench",
        reason="Gas line", directed_by="Sam", photos_expected=1))
    return m, types, client, ticket


def test_generated_client_uploads_a_photo_as_its_bytes(app, acme, generated):
    m, types, client, ticket = ticket_for_a_photo(app, acme, generated)
    taken = dt.datetime(2026, 5, 4, 7, 30, tzinfo=dt.timezone.utc)
    sent = api(generated, "evidence.tickets_put_photo").sync(
        ticket.id, "front", client=client, body=types.File(payload=jpeg_bytes()),
        name="front.jpg", taken_at=taken, lat=37.77, lng=-122.42)
    assert isinstance(sent, m.Ticket), sent
    assert sent.photo_count == 1 and sent.photos[0].name == "front.jpg"
    assert sent.photos[0].taken_at == taken and sent.photos[0].coords.lat == 37.77


def test_generated_client_sends_a_photo_in_pieces_and_resumes(app, acme, generated):
    m, types, client, ticket = ticket_for_a_photo(app, acme, generated)
    photo = noise_jpeg(420, 320, seed=3)
    upload = api(generated, "evidence.tickets_put_photo")
    size = 20_000

    def piece(start: int):
        end = min(start + size, len(photo))
        return upload.sync_detailed(ticket.id, "front", client=client, name="front.jpg",
                                    body=types.File(payload=photo[start:end]),
                                    content_range=f"bytes {start}-{end - 1}/{len(photo)}")

    first = piece(0)
    assert first.status_code == 202 and isinstance(first.parsed, m.UploadProgress)
    assert first.parsed.offset == size
    # A sender that lost track sends from 0 again and is told where the server is.
    lost = piece(0)
    assert lost.status_code == 409 and lost.parsed.error.code == "upload_offset_mismatch"
    offset = lost.parsed.error.details.offset
    assert offset == size and int(lost.headers["Upload-Offset"]) == size
    while True:
        answer = piece(offset)
        if not isinstance(answer.parsed, m.UploadProgress):
            break
        offset = answer.parsed.offset
    assert isinstance(answer.parsed, m.Ticket), answer
    assert answer.parsed.photo_count == 1 and answer.parsed.photos[0].name == "front.jpg"


def test_generated_client_makes_lists_and_ends_a_share_link(app, acme, generated):
    """201 with the new link and its address, the list without it, 204 on ending, 404 after
    for another company's or a missing id, all as the generated client reads them."""
    m = importlib.import_module(f"{PACKAGE}.models")
    client = importlib.import_module(f"{PACKAGE}.client").AuthenticatedClient(
        base_url="http://localhost/v1", token=acme.key,
        httpx_args={"transport": httpx.WSGITransport(app=app)})
    expires = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(days=7)
    made = api(generated, "share_links.share_links_create_share_link").sync_detailed(
        client=client, body=m.ShareLinkInput(sub="Apex Concrete", expires_at=expires))
    assert made.status_code == 201 and isinstance(made.parsed, m.ShareLinkCreated), made.content
    assert made.parsed.url.split("/l/", 1)[1] and made.parsed.expires_at == expires
    listed = api(generated, "share_links.share_links_list_share_links").sync(client=client, limit=10)
    assert isinstance(listed, m.ShareLinkList) and listed.total == 1
    assert listed.data[0].id == made.parsed.id and not hasattr(listed.data[0], "url")
    ended = api(generated, "share_links.share_links_delete_share_link").sync_detailed(
        made.parsed.id, client=client)
    assert ended.status_code == 204
    missing = api(generated, "share_links.share_links_delete_share_link").sync(999999, client=client)
    assert isinstance(missing, m.ErrorBody) and missing.error.code == "share_link_not_found"
