"""Approvals against the sandbox: project-system calls per approval and how long one takes.

Tickets with one photo and a signature are made through the live service; an approval
attaches both and the signed ticket document (three attachments). Approvals then run in this
process on an app built from the service's own environment (same database, same sandbox), so
the ProcoreClient's call log can be read; one more approval goes through the live service over
HTTP for comparison.
"""
from __future__ import annotations

import io
import statistics
import time
from dataclasses import dataclass, field

import requests
from PIL import Image

from support.images import data_url, signature_png


def ticket_body(project_id: str) -> dict:
    """A ticket with three exactly routed lines and no photos: the bench's standard create."""
    return {"project_id": project_id,
            "description": "Cut and patched the slab for a plumbing sleeve the plumber missed",
            "reason": "Sleeve was left out by the plumbing sub; not in our concrete scope",
            "directed_by": "Sam Ortiz, GC superintendent", "captured_by": "Lee Park",
            "labor": [{"trade": "Concrete finisher", "workers": 2, "hours": 3, "rate": 72.5,
                       "costCode": "03-300"}],
            "equipment": [{"description": "Core drill", "hours": 2, "rate": 45,
                           "costCode": "03-300"}],
            "materials": [{"description": "Non-shrink grout", "quantity": 3, "unitCost": 29,
                           "costCode": "03-300"}]}


def make_ticket(base_url: str, key: str, project_id: str, photo: bytes) -> str:
    """Create a ticket with one photo and a signature through the live API; return its id."""
    body = {
        **ticket_body(project_id),
        "photos": [{"name": "drain.jpg", "data_url": data_url(photo, "image/jpeg")}],
        "signature": {"name": "Sam Ortiz", "role": "Superintendent",
                      "image": data_url(signature_png(), "image/png")},
    }
    answer = requests.post(f"{base_url}/v1/tickets", json=body, timeout=60,
                           headers={"Authorization": f"Bearer {key}"})
    answer.raise_for_status()
    return str(answer.json()["id"])


@dataclass
class Approval:
    """One approval: wall time, project-system calls made and the time spent in them."""

    ms: float
    calls: list[tuple[str, str]]
    project_system_ms: float
    attachments: int


@dataclass
class ApprovalFigures:
    """Warm approvals (caches filled by an earlier one) and the first, cold one."""

    warm: list[Approval]
    cold: Approval
    live_ms: list[float] = field(default_factory=list)

    @property
    def calls(self) -> int:
        """Project-system calls of a warm approval (the largest seen)."""
        return max(len(a.calls) for a in self.warm)

    @property
    def attachments(self) -> int:
        """Attachments per approved ticket."""
        return self.warm[0].attachments

    @property
    def ms(self) -> float:
        """Median wall time of the warm approvals."""
        return statistics.median(a.ms for a in self.warm)

    @property
    def project_system_ms(self) -> float:
        """Median time the warm approvals spent waiting on the project system."""
        return statistics.median(a.project_system_ms for a in self.warm)


def _timed_session(client) -> list[float]:
    """Wrap a ProcoreClient's HTTP session so each call's duration is recorded."""
    spent: list[float] = []
    session = client._session
    original = session.request

    def request(*args, **kwargs):
        """Time one HTTP call to the project system."""
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent.append((time.perf_counter() - start) * 1000)

    session.request = request
    return spent


def approve_in_process(app, company_id: int, key: str, ticket_id: str) -> Approval:
    """Approve one ticket through the app's own API route, counting project-system calls."""
    from services.project_system.connections import client_for

    with app.app_context():
        client = client_for(company_id)
    if not hasattr(client, "_bench_spent"):
        client._bench_spent = _timed_session(client)
    before, spent_before = len(client.calls), len(client._bench_spent)
    test = app.test_client()
    start = time.perf_counter()
    answer = test.post(f"/v1/tickets/{ticket_id}/approve", json={},
                       headers={"Authorization": f"Bearer {key}"})
    ms = (time.perf_counter() - start) * 1000
    if answer.status_code != 200:
        raise RuntimeError(f"approve answered {answer.status_code}: {answer.get_data(as_text=True)}")
    body = answer.get_json()
    return Approval(ms=ms, calls=list(client.calls[before:]),
                    project_system_ms=sum(client._bench_spent[spent_before:]),
                    # the photos, the signature and the signed ticket document
                    attachments=body["photo_count"] + (1 if body.get("signature") else 0) + 1)


def make_photo_ticket(base_url: str, key: str, project_id: str, photo: bytes, photos: int) -> str:
    """Create a ticket with `photos` photos (each a little different) and a signature."""
    shots = []
    for n in range(photos):
        image = Image.open(io.BytesIO(photo))
        image.putpixel((n, n), (n * 40, 0, 0))  # a different file each: nothing de-duplicated
        out = io.BytesIO()
        image.save(out, "JPEG", quality=90)
        shots.append({"name": f"shot-{n + 1}.jpg", "data_url": data_url(out.getvalue(),
                                                                        "image/jpeg")})
    body = {**ticket_body(project_id), "photos": shots,
            "signature": {"name": "Sam Ortiz", "image": data_url(signature_png(), "image/png")}}
    answer = requests.post(f"{base_url}/v1/tickets", json=body, timeout=60,
                           headers={"Authorization": f"Bearer {key}"})
    answer.raise_for_status()
    return str(answer.json()["id"])


def measure_distant(app, base_url: str, company_id: int, key: str, project_id: str,
                    photo: bytes, latency_ms: float = 150) -> dict:
    """An approval with three photos, a signature and the document while every Procore call
    takes `latency_ms` longer: the files sent side by side, and one at a time for the ceiling."""
    from services.project_system import procore
    from services.project_system.connections import client_for

    with app.app_context():
        client = client_for(company_id)
    ids = [make_photo_ticket(base_url, key, project_id, photo, 3) for _ in range(3)]
    approve_in_process(app, company_id, key, ids[0])  # caches filled, as on a working day
    client._request("POST", "/_sandbox/latency", json_body={"ms": latency_ms})
    # Latency alone: the spike limit (25 calls in 10 s) would add its own waits to the figure.
    client._request("POST", "/_sandbox/spike_limit", json_body={"per_10s": None})
    try:
        side_by_side = approve_in_process(app, company_id, key, ids[1])
        threads = procore.UPLOAD_THREADS
        procore.UPLOAD_THREADS = 1
        try:
            one_at_a_time = approve_in_process(app, company_id, key, ids[2])
        finally:
            procore.UPLOAD_THREADS = threads
    finally:
        client._request("POST", "/_sandbox/latency", json_body={"ms": None})
        client._request("POST", "/_sandbox/spike_limit", json_body={"per_10s": "default"})
    return {"latency_ms": latency_ms, "attachments": side_by_side.attachments,
            "ms": side_by_side.ms, "calls": len(side_by_side.calls),
            "sequential_ms": one_at_a_time.ms}


def approve_live(base_url: str, key: str, ticket_id: str) -> float:
    """Approve one ticket through the live service over HTTP; return the wall time in ms."""
    start = time.perf_counter()
    answer = requests.post(f"{base_url}/v1/tickets/{ticket_id}/approve", json={}, timeout=120,
                           headers={"Authorization": f"Bearer {key}"})
    ms = (time.perf_counter() - start) * 1000
    answer.raise_for_status()
    return ms


def measure_approvals(app, base_url: str, company_id: int, key: str, project_id: str,
                      photo: bytes, warm_runs: int = 3, live_runs: int = 3) -> ApprovalFigures:
    """Cold then warm in-process approvals, then a few through the live service."""
    ids = [make_ticket(base_url, key, project_id, photo) for _ in range(1 + warm_runs + live_runs)]
    cold = approve_in_process(app, company_id, key, ids[0])
    warm = [approve_in_process(app, company_id, key, ticket) for ticket in ids[1:1 + warm_runs]]
    live = [approve_live(base_url, key, ticket) for ticket in ids[1 + warm_runs:]]
    return ApprovalFigures(warm=warm, cold=cold, live_ms=live)
