"""The server as make run and deploy/ run it (server.py): no address starves the others, a body
slower than any phone is closed, and SIGTERM lets requests in flight finish."""
from __future__ import annotations

import errno
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from services.platform.serving import forwarded_client
from support.images import data_url, noise_jpeg
from support.servers import free_port
from tests.test_crash import start_server
from tests.test_review_pages import PASSWORD, add_reviewer, csrf_token

ATTACKERS = 2200


def _enough_files(wanted: int) -> None:
    """Raise this process's open-file soft limit to `wanted`, or skip when the hard limit is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted:
        return
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the open-file hard limit ({hard}) is below {wanted}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _open_trickles(port: int, count: int, head: bytes) -> list[socket.socket]:
    """`count` connections from 127.0.0.2, each sending `head` once it is connected (non-blocking)."""
    socks = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.2", 0))
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        socks.append(sock)
    return socks


def _trickle_round(socks: list[socket.socket], head: bytes, sent_head: set[int]) -> int:
    """Send one byte (or the head first) on each connection; how many the server still keeps."""
    alive = 0
    for sock in socks:
        if sock.fileno() < 0:
            continue
        try:
            if sock.fileno() not in sent_head:
                sock.send(head)
                sent_head.add(sock.fileno())
            else:
                sock.send(b"a")
            alive += 1
        except BlockingIOError:
            alive += 1  # still connecting (or the buffer is full): not refused yet
        except OSError as error:
            if error.errno in (errno.ENOTCONN, errno.EAGAIN):
                alive += 1
            else:
                sock.close()
    return alive


def _signed_in(base: str, email: str) -> requests.Session:
    """A browser session signed in as the reviewer."""
    browser = requests.Session()
    token = csrf_token(browser.get(f"{base}/login", timeout=5).text)
    answer = browser.post(f"{base}/login", data={"csrf_token": token, "email": email,
                                                 "password": PASSWORD},
                          allow_redirects=False, timeout=5)
    assert answer.status_code == 302, answer.text
    return browser


@pytest.mark.live
@pytest.mark.alone  # measures how long others wait: nothing else may load the machine
def test_2200_trickling_connections_from_one_address_leave_others_served_within_1_s(
        app, acme, sandbox_server, tmp_path):
    _enough_files(ATTACKERS + 512)
    port = free_port()
    server = start_server(app, sandbox_server, tmp_path, port)
    base = f"http://127.0.0.1:{port}"
    browser = _signed_in(base, add_reviewer(app, acme))
    head = (b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
            b"Content-Length: 100000\r\n\r\n")
    socks = _open_trickles(port, ATTACKERS, head)
    sent_head: set[int] = set()
    try:
        held = []
        ends = time.monotonic() + 16  # bounded: eight rounds of one byte every 2 s
        while time.monotonic() < ends:
            held.append(_trickle_round(socks, head, sent_head))
            for name, path in (("healthz", "/healthz"), ("queue", "/queue")):
                started = time.monotonic()
                answer = (browser if name == "queue" else requests).get(base + path, timeout=5)
                took = time.monotonic() - started
                assert answer.status_code == 200 and took < 1, (name, answer.status_code, took)
            time.sleep(max(0.0, 2 - (time.monotonic() % 2)))
        # The server kept at most its per-address share of them; it reset the rest.
        assert held[-1] <= app.config["SERVER_CONNECTIONS_PER_ADDRESS"], held
    finally:
        for sock in socks:
            sock.close()
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


@pytest.mark.live
def test_a_body_slower_than_any_phone_is_closed_and_a_fast_one_is_not(app, sandbox_server, tmp_path):
    port = free_port()
    server = start_server(app, sandbox_server, tmp_path, port, EWT_REQUEST_BODY_RATE_WINDOW_S="2",
                          EWT_REQUEST_BODY_MIN_BYTES_S="1024")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n")
            started, cut = time.monotonic(), False
            sock.settimeout(0.5)
            while time.monotonic() - started < 12 and not cut:  # bounded: the window is 2 s
                try:
                    sock.sendall(b"a" * 100)  # 200 bytes a second, under the 1,024 floor
                    cut = sock.recv(1) == b""
                except TimeoutError:
                    continue
                except OSError:
                    cut = True
            assert cut and time.monotonic() - started < 8
        # Past the window, at one bar's pace (25 kB a second), a 100 kB body arrives whole.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n"
                         b"Connection: close\r\n\r\n")
            for _ in range(40):
                sock.sendall(b"a" * 2500)
                time.sleep(0.1)
            assert sock.recv(64).startswith(b"HTTP/1.1 4")  # answered (the route refuses it), not cut
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


@pytest.mark.live
def test_behind_a_trusted_proxy_connections_count_for_the_forwarded_address(app, sandbox_server, tmp_path):
    assert forwarded_client("198.51.100.1, 203.0.113.7", 1) == "203.0.113.7"
    assert forwarded_client("nonsense", 1) is None and forwarded_client("", 1) is None
    port = free_port()
    server = start_server(app, sandbox_server, tmp_path, port, EWT_TRUSTED_PROXIES="1",
                          EWT_SERVER_CONNECTIONS_PER_ADDRESS="4")
    head = (b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: 203.0.113.7\r\n"
            b"Content-Length: 100000\r\n\r\n")
    socks = []
    try:
        for _ in range(8):  # the proxy's connections for one client: four are kept
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(head)
            socks.append(sock)
        time.sleep(0.5)
        closed = 0
        for sock in socks:
            sock.settimeout(0.2)
            try:
                closed += sock.recv(1) == b""
            except TimeoutError:
                pass
            except OSError:
                closed += 1
        assert closed == 4
        # Another client through the same proxy is served.
        other = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=3,
                             headers={"X-Forwarded-For": "198.51.100.20"})
        assert other.status_code == 200
    finally:
        for sock in socks:
            sock.close()
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


@pytest.mark.live
def test_sigterm_during_an_upload_lets_it_finish_then_stops(app, acme, sandbox_server, tmp_path):
    port = free_port()
    server = start_server(app, sandbox_server, tmp_path, port)
    base = f"http://127.0.0.1:{port}"
    token = requests.post(f"{base}/v1/links", headers=acme.headers, timeout=5,
                          json={"project_id": acme.project()["id"]}).json()["token"]
    photo = {"name": "site.jpg", "data_url": data_url(noise_jpeg(800, 600))}
    body = json.dumps({"description": "Core drill", "reason": "r", "directed_by": "d",
                       "photos": [photo]}).encode()
    answer = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(f"POST /c/{token}/tickets HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                         "Connection: close\r\n\r\n".encode() + body[:len(body) // 2])
            time.sleep(0.3)
            os.kill(server.pid, signal.SIGTERM)  # the server alone, as systemd's KillMode=mixed does
            time.sleep(0.5)
            with pytest.raises(OSError):  # no new connection is taken
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
            sock.sendall(body[len(body) // 2:])
            while chunk := sock.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
        assert b'"photo_count":1' in answer.replace(b" ", b"")
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


# Eight threads allocating at once, after the server is made as server.py makes it; glibc
# then lists each malloc arena in malloc_stats().
ARENAS_SCRIPT = """
import ctypes, sys, threading
from services.platform.serving import make_server
from webapp import create_web_app
app = create_web_app({"INSTANCE_PATH": sys.argv[1], "SERVER_MALLOC_ARENAS": int(sys.argv[2])})
server = make_server(app, "127.0.0.1", 0, 8)
together = threading.Barrier(8)
def allocate():
    kept = [bytearray(50_000) for _ in range(40)]
    together.wait()
threads = [threading.Thread(target=allocate) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
ctypes.CDLL(None).malloc_stats()
"""


def _malloc_arenas(tmp_path: Path, setting: int) -> int:
    """How many malloc arenas a process with the server's setting ends up with."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run([sys.executable, "-c", ARENAS_SCRIPT, str(tmp_path / str(setting)),
                           str(setting)], cwd=Path(__file__).resolve().parents[1], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stderr.count("Arena ")


def test_the_server_threads_share_two_malloc_arenas(tmp_path):
    assert _malloc_arenas(tmp_path, 2) == 2
    assert _malloc_arenas(tmp_path, 0) > 2  # glibc's own default: one a thread
