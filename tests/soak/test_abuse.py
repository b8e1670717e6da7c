"""`make soak`: a bounded abuse run against a served app on loopback, /healthz watched throughout.

Attackers, all at 127.0.0.1 and for EWT_ABUSE_SECONDS (default 120): slow sign-in bodies,
JPEG scan bombs and 50-megapixel PNGs through a capture link, 30 MiB JSON bodies to made-up
links, and a password guesser. Reported: requests by answer, the server's CPU seconds and
peak memory (its whole process tree, image workers included), and /healthz's slowest answer.
"""
from __future__ import annotations

import base64
import os
import socket
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import requests

from tests.images import data_url, flat_png, jpeg_bytes, jpeg_scan_bomb
from tests.soak.test_soak import record
from tests.test_crash import start_server
from tests.test_serve import free_port

pytestmark = pytest.mark.soak
SECONDS = float(os.environ.get("EWT_ABUSE_SECONDS", "120"))
TICKS = os.sysconf("SC_CLK_TCK")


def _tree(root: int) -> list[int]:
    """The process and all its descendants."""
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


def _usage(root: int) -> tuple[float, int]:
    """(CPU seconds so far, resident KiB now) of a process tree; exited children's CPU included."""
    cpu, rss = 0.0, 0
    for pid in _tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu += sum(int(v) for v in fields[11:15]) / TICKS  # utime stime cutime cstime
            rss += int(fields[21]) * os.sysconf("SC_PAGE_SIZE") // 1024
        except (OSError, IndexError, ValueError):
            pass
    return cpu, rss


def test_abuse_is_refused_and_healthz_answers_throughout(app, acme, sandbox_server, tmp_path):
    port = free_port()
    server = start_server(app, sandbox_server, tmp_path, port)
    base = f"http://127.0.0.1:{port}"
    token = requests.post(f"{base}/v1/links", headers=acme.headers, timeout=30,
                          json={"project_id": acme.project()["id"]}).json()["token"]
    stop = threading.Event()
    answers: Counter = Counter()
    lock = threading.Lock()

    def count(kind: str, outcome) -> None:
        with lock:
            answers[(kind, outcome)] += 1

    def slow_login() -> None:
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                    sock.sendall(b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n"
                                 b"Content-Type: application/x-www-form-urlencoded\r\n\r\n")
                    for _ in range(30):
                        if stop.is_set():
                            break
                        sock.sendall(b"a")
                        time.sleep(1)
                    sock.settimeout(5)
                    status = sock.recv(32).split(b" ")[1].decode()
            except (OSError, IndexError):
                status = "hung up"
            count("slow sign-in body", status)

    bomb = data_url(jpeg_scan_bomb(4000, 3000, scans=600))
    big_png = data_url(flat_png(7071, 7071), "image/png")
    good = data_url(jpeg_bytes())
    huge_json = b'{"photos": [' + b'{"a": [1, 2, 3]},' * 1_800_000 + b"{}]}"

    def post_loop(kind: str, send) -> None:
        session = requests.Session()
        while not stop.is_set():
            try:
                count(kind, send(session).status_code)
            except requests.RequestException as error:
                count(kind, type(error).__name__)

    ticket = lambda photo: {"description": "d", "reason": "r", "directed_by": "x",  # noqa: E731
                            "photos": [{"name": "ok.jpg", "data_url": good},
                                       {"name": "bad", "data_url": photo}]}
    workers = [threading.Thread(target=slow_login) for _ in range(6)]
    workers += [threading.Thread(target=post_loop, args=("JPEG scan bomb", lambda s: s.post(
        f"{base}/c/{token}/tickets", json=ticket(bomb), timeout=60))) for _ in range(2)]
    workers += [threading.Thread(target=post_loop, args=("50 MP PNG", lambda s: s.post(
        f"{base}/c/{token}/tickets", json=ticket(big_png), timeout=60))) for _ in range(2)]
    workers += [threading.Thread(target=post_loop, args=("30 MiB JSON, unknown link", lambda s: s.post(
        f"{base}/c/{base64.urlsafe_b64encode(os.urandom(24)).decode()}/tickets", data=huge_json,
        headers={"Content-Type": "application/json"}, timeout=60)))]
    workers += [threading.Thread(target=post_loop, args=("password guess", lambda s: s.post(
        f"{base}/login", data={"email": "pm@acme.example", "password": "guess"}, timeout=60)))]

    cpu_before, _ = _usage(server.pid)
    peak_kib, waits, failures = 0, [], []
    try:
        for worker in workers:
            worker.start()
        ends = time.monotonic() + SECONDS
        while time.monotonic() < ends:
            started = time.monotonic()
            try:
                ok = requests.get(f"{base}/healthz", timeout=5).status_code == 200
            except requests.RequestException as error:
                ok = False
                failures.append(type(error).__name__)
            waits.append(time.monotonic() - started)
            if not ok and not failures:
                failures.append("not 200")
            peak_kib = max(peak_kib, _usage(server.pid)[1])
            time.sleep(0.5)
    finally:
        stop.set()
        for worker in workers:
            worker.join(90)
        cpu_after, _ = _usage(server.pid)
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
    figures = {
        "seconds": SECONDS,
        "requests": {f"{kind}: {outcome}": n for (kind, outcome), n in sorted(answers.items(), key=str)},
        "refused": sum(n for (kind, outcome), n in answers.items() if str(outcome) != "200"),
        "server_cpu_s": round(cpu_after - cpu_before, 1),
        "server_peak_rss_mib": round(peak_kib / 1024, 1),
        "healthz_checks": len(waits),
        "healthz_slowest_s": round(max(waits), 2),
        "healthz_failures": len(failures),
    }
    record("abuse", figures)
    print(figures)
    assert not failures, figures
    assert max(waits) < 2.0, figures
    assert all(str(outcome) != "200" for (kind, outcome) in answers), figures  # nothing abusive stored
