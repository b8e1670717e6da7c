"""No slow client and no tenant flood takes the served app over: slow bodies and headers, big
bodies, unknown links, floods of big images, and the image pool after a kill -9."""
from __future__ import annotations

import io
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
import requests

from support.images import data_url, flat_png, noise_jpeg
from support.servers import free_port
from tests.test_crash import start_server

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
    token = client.post("/v1/links", headers=acme.headers,
                        json={"project_id": acme.project()["id"]}).json["token"]
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


def _rss_kib(pid: int) -> int:
    """Resident memory of the server process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def process_tree(root: int) -> list[int]:
    """A process and all its descendants (the image pool's fork server and workers)."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                todo.extend(int(c) for c in (task / "children").read_text().split())
            except OSError:
                pass
    return found


def _alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.fixture
def served(app, sandbox_server, tmp_path):
    """The app as `make run` serves it, on loopback; stopped (its whole group) afterwards."""
    port = free_port()
    server = start_server(app, sandbox_server, tmp_path, port)
    yield f"http://127.0.0.1:{port}", port, server
    try:
        os.killpg(server.pid, 15)
    except ProcessLookupError:
        pass
    server.wait(timeout=30)


def _trickle(port: int, head: bytes, stop: threading.Event, pace_s: float = 0.5) -> None:
    """Send `head`, then one byte every `pace_s` until told to stop (or cut off)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(head)
            while not stop.wait(pace_s):
                sock.sendall(b"a")
    except OSError:
        pass  # the server cut the connection off: what it should do, in time


def _sign_in(base: str, email: str) -> int:
    """Sign a reviewer in through the pages; the status of the form's answer."""
    from tests.test_review_pages import PASSWORD, csrf_token

    with requests.Session() as browser:
        token = csrf_token(browser.get(f"{base}/login", timeout=3).text)
        return browser.post(f"{base}/login", data={"csrf_token": token, "email": email,
                                                   "password": PASSWORD},
                            allow_redirects=False, timeout=3).status_code


@pytest.mark.live
@pytest.mark.alone  # measures how long others wait: nothing else may load the machine
def test_slow_bodies_and_headers_leave_sign_in_capture_and_healthz_answering(served, app, acme, rival):
    """Six bodies trickling to a capture link and twelve slow header senders hold no thread:
    sign-in, another company's capture page and /healthz each answer within 3 s."""
    from tests.test_review_pages import add_reviewer

    base, port, _ = served
    email = add_reviewer(app, acme)
    ours = requests.post(f"{base}/v1/links", headers=acme.headers, timeout=5,
                         json={"project_id": acme.project()["id"]}).json()["token"]
    theirs = requests.post(f"{base}/v1/links", headers=rival.headers, timeout=5,
                           json={"project_id": rival.project()["id"]}).json()["token"]
    stop = threading.Event()
    body_head = (f"POST /c/{ours}/tickets HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{").encode()
    header_head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
    attackers = [threading.Thread(target=_trickle, args=(port, body_head, stop)) for _ in range(6)]
    attackers += [threading.Thread(target=_trickle, args=(port, header_head, stop)) for _ in range(12)]
    for attacker in attackers:
        attacker.start()
    try:
        for _ in range(3):  # three rounds while all eighteen are connected and sending
            for name, ask in (("sign-in", lambda: _sign_in(base, email)),
                              ("capture page",
                               lambda: requests.get(f"{base}/c/{theirs}", timeout=3).status_code),
                              ("healthz", lambda: requests.get(f"{base}/healthz", timeout=3).status_code)):
                started = time.monotonic()
                status = ask()
                took = time.monotonic() - started
                assert status in (200, 302) and took < 3, (name, status, took)
            assert sum(a.is_alive() for a in attackers) == 18  # none gave up or was cut off yet
    finally:
        stop.set()
        for attacker in attackers:
            attacker.join(timeout=20)


@pytest.mark.live
def test_a_request_not_in_by_its_deadline_is_cut_off(app, sandbox_server, tmp_path):
    port = free_port()
    server = start_server(app, sandbox_server, tmp_path, port, EWT_REQUEST_HEADER_DEADLINE_S="2")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            started, cut = time.monotonic(), False
            sock.settimeout(0.5)
            while time.monotonic() - started < 10 and not cut:  # bounded: the deadline is 2 s
                try:
                    sock.sendall(b"a")
                    cut = sock.recv(1) == b""
                except TimeoutError:
                    continue
                except OSError:
                    cut = True
            assert cut and time.monotonic() - started < 6
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


@pytest.mark.live
def test_a_huge_body_to_an_unknown_link_costs_no_memory(served):
    base, _, server = served
    before = _rss_kib(server.pid)
    body = b'{"photos": [' + b'{"a": [1, 2, 3]},' * 1_800_000 + b'{}]}'  # about 30 MiB
    answers = []

    def send() -> None:
        try:
            answers.append(requests.post(f"{base}/c/{'z' * 32}/tickets", data=body,
                                         headers={"Content-Type": "application/json"}, timeout=30))
        except requests.RequestException as error:  # the server may hang up on the rest of the body
            answers.append(error)

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    after = _rss_kib(server.pid)
    statuses = [a.status_code for a in answers if isinstance(a, requests.Response)]
    assert all(status == 404 for status in statuses)
    assert after - before < 64 * 1024, f"the server grew by {(after - before) // 1024} MiB"
    assert requests.get(f"{base}/healthz", timeout=3).status_code == 200


def _flood_ticket(count: int) -> dict:
    """A capture ticket of `count` 15-megapixel PNGs (about 20 kB each on the wire)."""
    raw = data_url(flat_png(4096, 3662), "image/png")
    return {"description": "Flood", "reason": "r", "directed_by": "d",
            "photos": [{"name": f"f{i}.png", "data_url": raw} for i in range(count)]}


def _busy_pool(server_pid: int) -> list[int]:
    """The image pool's processes (fork server and workers) once both workers are decoding."""
    give_up = time.monotonic() + 30  # bounded: the first images reach the pool within moments
    while time.monotonic() < give_up:
        pool = process_tree(server_pid)[1:]
        busy = [pid for pid in pool if Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] == "R"]
        if len(pool) >= 3 and busy:
            return pool
        time.sleep(0.05)
    raise AssertionError("the image pool never started")


@pytest.mark.live
@pytest.mark.alone  # measures how long others wait: nothing else may load the machine
def test_one_companys_flood_of_big_images_leaves_anothers_photo_stored_within_5_s(served, app, acme, rival):
    """Ten requests of 12 big images each from one company (more than the server's 8 threads):
    those past the company's share are answered 503 with Retry-After at once (never 400, the
    images are fine), and another company's photo is stored within 5 s."""
    base, _, server = served
    flood_link = requests.post(f"{base}/v1/links", headers=acme.headers, timeout=5,
                               json={"project_id": acme.project()["id"]}).json()["token"]
    their_link = requests.post(f"{base}/v1/links", headers=rival.headers, timeout=5,
                               json={"project_id": rival.project()["id"]}).json()["token"]
    flood = _flood_ticket(12)
    answers: list = []

    def send_flood() -> None:
        try:
            answers.append(requests.post(f"{base}/c/{flood_link}/tickets", json=flood, timeout=120))
        except requests.RequestException as error:
            answers.append(error)

    # The flood is not waited out: the server's stop ends the flooders' requests.
    flooders = [threading.Thread(target=send_flood, daemon=True) for _ in range(10)]
    for flooder in flooders:
        flooder.start()
    _busy_pool(server.pid)
    started = time.monotonic()
    photo = requests.post(f"{base}/c/{their_link}/tickets", timeout=30, json={
        "description": "Core drill", "reason": "r", "directed_by": "d",
        "photos": [{"name": "site.jpg", "data_url": data_url(noise_jpeg(800, 600))}]})
    took = time.monotonic() - started
    assert photo.status_code == 200, photo.text
    assert photo.json()["photo_count"] == 1 and took < 5, took
    share = app.config["IMAGE_COMPANY_REQUESTS"]
    # Those past the share were told to come back, not that their images are bad.
    refused = [a for a in list(answers) if isinstance(a, requests.Response)]
    assert len(refused) >= len(flooders) - share, [getattr(a, "status_code", a) for a in answers]
    for answer in refused:
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "images_busy", answer.text
        assert int(answer.headers["Retry-After"]) > 0
    assert sum(f.is_alive() for f in flooders) == share  # the share still being decoded
    # Not waited out: a graceful stop would decode the share first, some 20 s of a test that
    # runs alone. Its pool goes with the group (kill -9 leaving none is checked on its own).
    os.killpg(server.pid, signal.SIGKILL)


@pytest.mark.live
def test_kill_9_of_the_server_leaves_no_image_pool_process(served, acme):
    base, _, server = served
    link = requests.post(f"{base}/v1/links", headers=acme.headers, timeout=5,
                         json={"project_id": acme.project()["id"]}).json()["token"]
    flood = _flood_ticket(12)

    def send() -> None:
        try:
            requests.post(f"{base}/c/{link}/tickets", json=flood, timeout=60)
        except requests.RequestException:
            pass  # the server is killed under it

    sender = threading.Thread(target=send)
    sender.start()
    pool = _busy_pool(server.pid)
    os.kill(server.pid, 9)  # the server process alone, in the middle of decoding
    server.wait(timeout=10)
    give_up = time.monotonic() + 10
    while any(_alive(pid) for pid in pool) and time.monotonic() < give_up:
        time.sleep(0.05)
    assert [pid for pid in pool if _alive(pid)] == []
    sender.join(timeout=60)
