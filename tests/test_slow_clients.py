"""Anonymous requests cannot hold threads or memory: slow bodies, big bodies, unknown links."""
from __future__ import annotations

import io
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
import requests

from tests.test_crash import start_server
from tests.test_serve import free_port

ROOT = Path(__file__).resolve().parents[1]


class CountingStream(io.BytesIO):
    """A request body that remembers how much of it was read."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.taken = 0

    def read(self, size=-1):
        chunk = super().read(size)
        self.taken += len(chunk)
        return chunk

    def readinto(self, buffer):
        count = super().readinto(buffer)
        self.taken += count
        return count

    def readline(self, size=-1):
        line = super().readline(size)
        self.taken += len(line)
        return line


def test_unknown_link_is_answered_without_reading_the_body(app, client):
    body = CountingStream(b'{"photos": [' + b'{"a": 1},' * 100_000 + b'{}]}')
    response = client.post("/c/" + "u" * 32 + "/tickets", input_stream=body,
                           content_type="application/json",
                           headers={"Content-Length": str(len(body.getvalue()))})
    assert response.status_code == 404 and response.json["error"]["code"] == "link_not_found"
    assert body.taken == 0


def test_made_up_tokens_share_one_limit_per_address(app, client):
    app.config["CAPTURE_RATE_LIMIT"] = "3 per minute"
    statuses = [client.post(f"/c/{'t' * 30}{i:02d}/tickets", json={}).status_code for i in range(6)]
    assert statuses[:3] == [404] * 3 and set(statuses[3:]) == {429}


@pytest.mark.parametrize("path", ["/login", "/v1/me", "/queue"])
def test_small_routes_refuse_big_bodies_from_the_headers(client, path):
    body = CountingStream(b"x" * (1024 * 1024))
    response = client.post(path, input_stream=body, content_type="application/x-www-form-urlencoded",
                           headers={"Content-Length": str(1024 * 1024)})
    assert response.status_code == 413 and body.taken == 0


def test_json_with_too_many_elements_is_refused_before_parsing(app, client, acme, monkeypatch):
    token = client.post("/v1/links", headers=acme.headers, json={"project_id": acme.project()["id"]}).json["token"]
    parsed = []
    real_loads = json.loads
    monkeypatch.setattr(json, "loads", lambda *a, **k: parsed.append(1) or real_loads(*a, **k))
    many = b'{"description": "d", "labor": [' + b",".join([b"{}"] * 50_000) + b"]}"
    response = client.post(f"/c/{token}/tickets", data=many, content_type="application/json")
    assert parsed == []  # the server never parsed it
    assert response.status_code == 400 and "too many elements" in response.json["error"]["message"]
    deep = {"description": "d", "labor": [{"trade": {"a": {"b": {"c": {"d": {"e": {"f": {"g": 1}}}}}}}}]}
    nested = client.post(f"/c/{token}/tickets", json=deep)
    assert nested.status_code == 400 and "nested" in nested.json["error"]["message"]


def _worker_rss_kib(master_pid: int) -> int:
    """Resident memory of the gunicorn master's children together, in KiB."""
    total = 0
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    for pid in children:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def _slow_login(port: int, stop: threading.Event, outcomes: list) -> None:
    """Send a sign-in whose body comes one byte a second, until the server hangs up."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 400\r\n\r\n")
            for _ in range(12):
                if stop.is_set():
                    break
                sock.sendall(b"a")
                time.sleep(1)
            sock.settimeout(5)
            outcomes.append(sock.recv(64))
    except OSError as error:
        outcomes.append(type(error).__name__)


@pytest.fixture
def served(app, sandbox_server, tmp_path):
    port = free_port()
    server = start_server(app, sandbox_server, tmp_path, port, EWT_BODY_IDLE_S="3",
                          EWT_BODY_DEADLINE_S="4", EWT_BODY_READ_SLOTS="2")
    yield port, server
    os.killpg(server.pid, 15)
    server.wait(timeout=30)


@pytest.mark.live
def test_slow_bodies_do_not_take_the_server_down(served):
    port, _ = served
    stop, outcomes = threading.Event(), []
    attackers = [threading.Thread(target=_slow_login, args=(port, stop, outcomes)) for _ in range(10)]
    for attacker in attackers:
        attacker.start()
    try:
        time.sleep(0.5)
        waits = []
        for _ in range(8):  # /healthz answers throughout, each time at once
            started = time.monotonic()
            assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=3).status_code == 200
            waits.append(time.monotonic() - started)
            time.sleep(0.5)
        assert max(waits) < 1.5, waits
    finally:
        stop.set()
        for attacker in attackers:
            attacker.join(timeout=20)
    # Every attacker was told off (503 busy or 408 too slow) rather than served.
    answered = [o for o in outcomes if isinstance(o, bytes) and o]
    assert answered and all(o.split()[1] in (b"408", b"503") for o in answered), outcomes


@pytest.mark.live
def test_a_huge_body_to_an_unknown_link_costs_no_memory(served):
    port, server = served
    before = _worker_rss_kib(server.pid)
    body = b'{"photos": [' + b'{"a": [1, 2, 3]},' * 1_800_000 + b'{}]}'  # about 30 MiB
    answers = []

    def send() -> None:
        try:
            answers.append(requests.post(f"http://127.0.0.1:{port}/c/{'z' * 32}/tickets", data=body,
                                         headers={"Content-Type": "application/json"}, timeout=30))
        except requests.RequestException as error:  # the server may hang up on the rest of the body
            answers.append(error)

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    after = _worker_rss_kib(server.pid)
    statuses = [a.status_code for a in answers if isinstance(a, requests.Response)]
    assert all(status == 404 for status in statuses)
    assert after - before < 64 * 1024, f"workers grew by {(after - before) // 1024} MiB"
    assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=3).status_code == 200


def _hold_body(port: int, path: str) -> socket.socket:
    """Start a POST whose body never comes (one byte of 400), keeping a body-reading slot."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode() +
                 b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 400\r\n\r\na")
    return sock


@pytest.mark.live
def test_slow_anonymous_bodies_leave_the_signed_in_their_slots(app, acme, sandbox_server, tmp_path):
    from tests.test_review_pages import PASSWORD, add_reviewer, csrf_token

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(app, sandbox_server, tmp_path, port, EWT_BODY_IDLE_S="10",
                          EWT_BODY_DEADLINE_S="10", EWT_BODY_READ_SLOTS="2",
                          EWT_BODY_READ_SLOTS_SIGNED_IN="2",
                          EWT_LOGIN_RATE_LIMIT='"1000 per minute"')
    held: list[socket.socket] = []
    reviewer = requests.Session()
    try:
        email = add_reviewer(app, acme)
        token = csrf_token(reviewer.get(f"{base}/login", timeout=5).text)
        signed = reviewer.post(f"{base}/login", data={"csrf_token": token, "email": email,
                                                       "password": PASSWORD}, timeout=5)
        assert signed.status_code == 200 and "/login" not in signed.url
        form_token = csrf_token(reviewer.get(f"{base}/links", timeout=5).text)
        held = [_hold_body(port, "/login") for _ in range(2)]
        # Bounded: the two slow sign-ins take the anonymous slots within the body deadline.
        give_up = time.monotonic() + 5
        while time.monotonic() < give_up:
            probe = requests.post(f"{base}/login", data={"email": "x"}, timeout=5)
            if probe.status_code == 503:
                break
        assert probe.status_code == 503
        # An anonymous body, even with a made-up key, waits for the anonymous slots ...
        fake = requests.post(f"{base}/v1/links", json={"project_id": acme.project()["id"]},
                             headers={"Authorization": "Bearer ewt_" + "x" * 43}, timeout=5)
        assert fake.status_code == 503
        # ... while a valid API key and a signed-in reviewer are served at once.
        made = requests.post(f"{base}/v1/links", headers=acme.headers, timeout=5,
                             json={"project_id": acme.project()["id"]})
        assert made.status_code == 200, made.text
        page = reviewer.post(f"{base}/links", timeout=5, headers={"X-CSRFToken": form_token},
                             data={"csrf_token": form_token, "project_id": acme.project()["id"]})
        assert page.status_code == 200, page.text
        # A kept-alive connection, open while its answer lives, holds a stopping worker 2 s.
        del signed, probe, fake, made, page
    finally:
        for sock in held:
            sock.close()
        reviewer.close()
        os.killpg(server.pid, 15)
        server.wait(timeout=30)



def test_no_body_waits_for_a_slot_when_its_pool_is_full(app, client, acme, monkeypatch):
    """A keyed body and an anonymous one are both told busy at once when their pools are full:
    no request thread sits waiting for a slot."""
    from services import bodies

    asked = []

    class Taken:
        """A slot pool whose slots are all taken; it notes how each caller asked."""

        def acquire(self, blocking=True, timeout=None):
            asked.append((blocking, timeout))
            return False

    monkeypatch.setattr(bodies, "_slot_semaphore", lambda pool, count: Taken())
    keyed = client.post("/v1/links", headers=acme.headers, json={"project_id": "1"})
    anonymous = client.post("/login", data={"email": "x"})
    assert keyed.status_code == 503 and anonymous.status_code == 503
    assert keyed.json["error"]["code"] == "busy" and keyed.headers["Retry-After"] == "5"
    assert asked == [(False, None), (False, None)]
