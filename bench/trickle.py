"""How many trickling connections it takes to make /healthz slower than 1 s under `make run`.

Starts bin/serve (server.py: waitress, services/platform/serving.py) on a private instance, then opens
trickling connections from 127.0.0.2 in steps: each sends a capture link's request headers
whole, then its body at a byte a second. After each step /healthz is asked three times from
127.0.0.1; the step where its median passes 1 s is the answer. The server keeps at most
SERVER_CONNECTIONS_PER_ADDRESS of one address's connections open and closes bodies slower than
REQUEST_BODY_MIN_BYTES_S, so "open" stays small however many are tried.
`python -m bench.trickle` writes its row into bench/RESULTS.md (a section of its own).
"""
from __future__ import annotations

import datetime as dt
import resource
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

from bench import sections
from bench.servers import start_service
from webapp import default_config

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
START, END = "<!-- trickle -->", "<!-- /trickle -->"
STEPS = (50, 100, 200, 400, 800, 1200, 1600, 1900, 2000, 2100, 2400)
SLOW_S = 1.0


class Tricklers:
    """Many connections, each sending one byte a second from one thread (a selector)."""

    def __init__(self, port: int, head: bytes) -> None:
        self.port, self.head = port, head
        self.sockets: list[socket.socket] = []
        self.cut = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._send, daemon=True)
        self.thread.start()

    def add(self, count: int) -> None:
        """Open `count` more connections and send their headers."""
        for _ in range(count):
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=5,
                                                source_address=("127.0.0.2", 0))
                sock.sendall(self.head)
            except OSError:  # refused at once: the address has its fill of connections
                self.cut += 1
                continue
            sock.setblocking(False)
            self.sockets.append(sock)

    def _send(self) -> None:
        """Once a second: one byte on every open connection; drop the ones the server closed."""
        while not self.stop.wait(1.0):
            for sock in list(self.sockets):
                try:
                    sock.send(b"a")
                except OSError:
                    self.sockets.remove(sock)
                    self.cut += 1
                    sock.close()

    def close(self) -> None:
        """Stop sending and close every connection."""
        self.stop.set()
        self.thread.join(timeout=5)
        for sock in self.sockets:
            sock.close()


def healthz_median(base: str) -> float:
    """The median of three /healthz answers' times, in seconds (10 s when it does not answer)."""
    times = []
    for _ in range(3):
        started = time.monotonic()
        try:
            requests.get(f"{base}/healthz", timeout=10)
            times.append(time.monotonic() - started)
        except requests.RequestException:
            times.append(10.0)
    return statistics.median(times)


def measure() -> dict:
    """Open tricklers step by step; the first count at which /healthz is slower than 1 s."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    with tempfile.TemporaryDirectory() as folder:
        service = start_service(Path(folder), EWT_SERVER_CONNECTIONS_PER_ADDRESS=str(
            default_config(folder)["SERVER_CONNECTIONS_PER_ADDRESS"]))
        try:
            base = service.url
            head = (f"POST /c/{'t' * 32}/tickets HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{").encode()
            tricklers = Tricklers(service.port, head)
            rows, found = [], None
            try:
                for step in STEPS:
                    tricklers.add(step - len(tricklers.sockets))
                    time.sleep(2.5)  # the sender's next rounds find the connections reset
                    median = healthz_median(base)
                    rows.append((step, round(median, 3), len(tricklers.sockets)))
                    print(f"{step} trickling: /healthz {median:.3f} s ({len(tricklers.sockets)} open)",
                          flush=True)
                    if median > SLOW_S:
                        found = step
                        break
            finally:
                tricklers.close()
        finally:
            service.stop()
    return {"steps": rows, "slow_at": found, "max_tried": STEPS[-1]}


def section(result: dict) -> list[str]:
    """Markdown lines of the trickle section."""
    found = result["slow_at"]
    answer = f"{found}" if found else f"more than {result['max_tried']} (never slower than 1 s)"
    steps = "; ".join(f"{n}: {s} s" for n, s, _ in result["steps"])
    return [START, "", "## Slow clients (`python -m bench.trickle`)", "",
            "Connections from 127.0.0.2 that send a capture request's headers, then its body at a "
            "byte a second, against `make run` (server.py, as deployed: waitress, one process, 8 "
            "threads); /healthz's median of three from 127.0.0.1 after each step. The server keeps "
            "`SERVER_CONNECTIONS_PER_ADDRESS` (64) of one address open and resets the rest, and "
            "closes a body under `REQUEST_BODY_MIN_BYTES_S`; 'open' is what it kept.", "",
            "| Trickling connections to make /healthz slower than 1 s | /healthz median by step | Recorded |",
            "|---|---|---|",
            f"| {answer} | {steps} | {dt.date.today().isoformat()} |", "", END]


def update(result: dict, path: Path = RESULTS) -> None:
    """Replace (or add) the trickle section of RESULTS.md."""
    sections.put(path, section(result), START, END)


if __name__ == "__main__":
    outcome = measure()
    update(outcome)
    sys.exit(0)
