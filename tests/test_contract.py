"""Every call of a full approval, held to Procore's published contract (tests/contract)."""
from __future__ import annotations

from collections import Counter
from urllib.parse import urlsplit

import pytest

from support.images import data_url, jpeg_bytes, png_bytes
from tests.contract import operations, problems
from tests.plugins.sandbox import Exchange, ExchangeRecorder
from tests.test_approval import act, create, origin_rows, remote

pytestmark = pytest.mark.live


def exercised(exchanges: list[Exchange]) -> Counter[str]:
    """How often each contract operation was called."""
    found: Counter[str] = Counter()
    for exchange in exchanges:
        path = urlsplit(exchange.url).path
        op = next((op for op in operations()
                   if op.method == exchange.method and op.pattern.match(path)), None)
        found[op.id if op else f"outside: {exchange.method} {path}"] += 1
    return found


def test_full_approval_keeps_procores_contract(client, acme, app, sandbox_server):
    """A change event with photos and a signature, and a daily log entry: every call checked."""
    recorder = ExchangeRecorder()
    recorder.attach(remote(app, acme))
    photos = [{"name": "trench.jpg", "data_url": data_url(jpeg_bytes(30, 20))},
              {"name": "spoil.jpg", "data_url": data_url(jpeg_bytes(20, 30))}]
    ticket = create(client, acme, photos=photos,
                    signature={"name": "Sam", "image": data_url(png_bytes(), "image/png")})
    approved = act(client, acme, ticket["id"], "approve", {})
    assert approved.status_code == 200, approved.json
    daily = create(client, acme, project=acme.projects[2])
    logged = act(client, acme, daily["id"], "approve", {"destination": "daily_log"})
    assert logged.status_code == 200, logged.json
    assert len(origin_rows(sandbox_server, "change_events", ticket["id"])) == 1
    assert len(origin_rows(sandbox_server, "manpower_logs", daily["id"])) == 1

    found = [problem for exchange in recorder.exchanges for problem in problems(exchange)]
    assert found == []
    calls = exercised(recorder.exchanges)
    # two photos, the signature and the signed ticket document
    assert calls["create_upload"] == calls["storage_upload"] == 4
    assert calls["update_change_event"] == 1  # all four files in one PATCH
    for op_id in ("oauth_token", "list_projects", "list_tools", "list_units_of_measure",
                  "list_wbs_codes", "list_change_event_statuses", "create_change_event",
                  "list_change_events",
                  "create_manpower_log", "list_manpower_logs"):
        assert calls[op_id] >= 1, (op_id, calls)
    assert all(exchange.status < 400 for exchange in recorder.exchanges)


def test_an_exchange_outside_the_contract_is_reported():
    """The v1.0 multipart PATCH holding only attachments[] breaks the contract, as it should."""
    body = (b"--b\r\nContent-Disposition: form-data; name=\"attachments[]\"; "
            b"filename=\"a.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n\xff\xd8\r\n--b--\r\n")
    patch = Exchange(
        method="PATCH", url="http://sandbox/rest/v1.0/change_events/5?project_id=7",
        headers={"Authorization": "Bearer t", "Procore-Company-Id": "1",
                 "Content-Type": "multipart/form-data; boundary=b"},
        content_type="multipart/form-data", body=body, status=400,
        answer_headers={"Content-Type": "application/json", "X-Rate-Limit-Limit": "1",
                        "X-Rate-Limit-Remaining": "1", "X-Rate-Limit-Reset": "1"},
        answer_body=b'{"message": "param is missing or the value is empty: change_event"}')
    assert any("'change_event' is a required property" in problem for problem in problems(patch))
    unknown = Exchange(method="GET", url="http://sandbox/rest/v1.0/change_events", headers={},
                       content_type="", body=b"", status=200, answer_headers={},
                       answer_body=b"{}")
    assert problems(unknown) == ["GET /rest/v1.0/change_events is not an operation of the "
                                 "contract"]


def test_every_operation_cites_its_source():
    """Each operation of the contract file says where Procore documents it."""
    for op in operations():
        assert op.spec.get("x-source"), op.id
        assert op.spec.get("responses"), op.id
