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

from support.images import data_url, flat_png, jpeg_bytes, jpeg_scan_bomb
from support.servers import free_port
from tests.soak.test_soak import record
from tests.test_crash import start_server
from tests.test_slow_clients import process_tree

pytestmark = pytest.mark.soak
SECONDS = float(os.environ.get("EWT_ABUSE_SECONDS", "120"))
TICKS = os.sysconf("SC_CLK_TCK")


def _usage(root: int) -> tuple[float, int]:
    """(CPU seconds so far, resident KiB now) of a process tree; exited children's CPU included."""
    cpu, rss = 0.0, 0
    for pid in process_tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu += sum(int(v) for v in fields[11:15]) / TICKS  # utime stime cutime cstime
            rss += int(fields[21]) * os.sysconf("SC_PAGE_SIZE") // 1024
        except (OSError, IndexError, ValueError):
            pass
    return cpu, rss


# Its abusers are threads written inside it, whose loops McCabe counts into it (C901).
def test_abuse_is_refused_and_healthz_answers_throughout(app, acme, sandbox_server, tmp_path):  # noqa: C901
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


def test_slow_clients_and_a_flood_leave_the_others_served(app, acme, rival, sandbox_server, tmp_path):
    """For EWT_ABUSE_SECONDS: bodies trickling to one company's capture link, slow header
    senders, and that company's flood of 15-megapixel images; meanwhile sign-in, the other
    company's capture page and /healthz answer within 3 s, and its photo is stored within 6 s."""
    from tests.test_review_pages import add_reviewer
    from tests.test_slow_clients import _flood_ticket, _sign_in, _trickle

    port = free_port()
    # Signing in every few seconds is what is watched here, not the sign-in limits.
    server = start_server(app, sandbox_server, tmp_path, port,
                          EWT_LOGIN_ACCOUNT_RATE_LIMIT='"10000 per minute"')
    base = f"http://127.0.0.1:{port}"
    email = add_reviewer(app, acme)
    links = {name: requests.post(f"{base}/v1/links", headers=tenant.headers, timeout=30,
                                 json={"project_id": tenant.project()["id"]}).json()["token"]
             for name, tenant in (("flood", acme), ("theirs", rival))}
    stop = threading.Event()
    flood, flood_answers = _flood_ticket(12), Counter()

    def flooder() -> None:
        session = requests.Session()
        while not stop.is_set():
            try:
                flood_answers[session.post(f"{base}/c/{links['flood']}/tickets", json=flood,
                                           timeout=120).status_code] += 1
            except requests.RequestException as error:
                flood_answers[type(error).__name__] += 1

    body_head = (f"POST /c/{links['flood']}/tickets HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{").encode()
    header_head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "

    def trickler(head: bytes) -> None:
        while not stop.is_set():  # a new one whenever the server cuts one off
            _trickle(port, head, stop)

    workers = [threading.Thread(target=trickler, args=(body_head,)) for _ in range(6)]
    workers += [threading.Thread(target=trickler, args=(header_head,)) for _ in range(12)]
    workers += [threading.Thread(target=flooder) for _ in range(3)]
    photo = {"description": "Core drill", "reason": "r", "directed_by": "d",
             "photos": [{"name": "site.jpg", "data_url": data_url(jpeg_bytes(800, 600))}]}
    waits: dict[str, list[float]] = {"sign-in": [], "capture page": [], "healthz": [], "photo": []}
    failures = []
    try:
        for worker in workers:
            worker.start()
        ends = time.monotonic() + SECONDS
        while time.monotonic() < ends:
            for name, ask in (
                    ("sign-in", lambda: _sign_in(base, email)),
                    ("capture page",
                     lambda: requests.get(f"{base}/c/{links['theirs']}", timeout=10).status_code),
                    ("healthz", lambda: requests.get(f"{base}/healthz", timeout=10).status_code),
                    ("photo", lambda: requests.post(f"{base}/c/{links['theirs']}/tickets", json=photo,
                                                    timeout=30).status_code)):
                started = time.monotonic()
                try:
                    status = ask()
                except requests.RequestException as error:
                    status = type(error).__name__
                waits[name].append(time.monotonic() - started)
                if status not in (200, 302):
                    failures.append((name, status))
            time.sleep(1)
    finally:
        stop.set()
        for worker in workers:
            worker.join(150)
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
    figures = {"seconds": SECONDS, "flood_answers": dict(flood_answers),
               **{f"{name.replace(' ', '_')}_slowest_s": round(max(found), 2)
                  for name, found in waits.items()},
               "checks": len(waits["healthz"]), "failures": len(failures)}
    record("slow_clients_and_flood", figures)
    print(figures)
    assert not failures, (failures, figures)
    assert max(waits["photo"]) < 6 and all(
        max(waits[n]) < 3 for n in ("sign-in", "capture page", "healthz")), figures
