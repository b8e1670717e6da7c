"""Start and stop the servers under test, find their workers, and load them at a steady rate."""
from __future__ import annotations

import http.client
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from support.servers import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
VENV_BIN = Path(sys.executable).parent
SERVER_THREADS = 8  # what `make run` (bin/serve) uses
TIMEOUT_S = 10.0  # a paced request not answered by then counts as timed out (its wait still counts)


def _children() -> dict[int, list[int]]:
    """Map each process id to the ids of its children, read from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry))
    return tree


def descendants(pid: int) -> list[int]:
    """Every process below pid, depth first."""
    tree, found, stack = _children(), [], [pid]
    while stack:
        for child in tree.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def cmdline(pid: int) -> str:
    """A process's command line with spaces between arguments ('' if it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def rss_mb(pid: int) -> float:
    """Resident memory of one process in MiB (VmRSS from /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Served:
    """A server process group we started: its launcher's pid, port and log file."""

    name: str
    process: subprocess.Popen
    port: int
    log_path: Path
    marker: str  # a piece of the server's command line that identifies its processes
    extra: dict = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The base URL of the server."""
        return f"http://127.0.0.1:{self.port}"

    def worker_pid(self) -> int:
        """The process running the app: waitress's one process (server.py, as make run and
        deploy/ run it, for the service; waitress-serve for the ceiling)."""
        pids = [p for p in (self.process.pid, *descendants(self.process.pid))
                if self.marker in cmdline(p)]
        workers = [p for p in pids if self.marker in cmdline(_parent(p))] or pids
        if len(workers) != 1:
            raise RuntimeError(f"expected one {self.name} worker, found {workers}")
        return workers[0]

    def wait_for_worker(self, timeout_s: float = 60.0) -> None:
        """Block until the serving process has started, or fail after the timeout."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.worker_pid()
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop the launcher with SIGTERM (it stops what it started), then its group if needed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def _parent(pid: int) -> int:
    """The parent of a process (0 if it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def service_env(instance: Path, port: int, sandbox_port: int) -> dict[str, str]:
    """bin/serve's environment on a private instance and ports, with the API rate limit lifted."""
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    env.update(HOST="127.0.0.1", PORT=str(port), SANDBOX_PORT=str(sandbox_port),
               THREADS=str(SERVER_THREADS), EWT_INSTANCE_PATH=str(instance),
               EWT_API_RATE_LIMIT="1000000 per second",
               # One load generator stands for many clients: its address may hold more than
               # one client's share of connections (bench.trickle sets the share back).
               EWT_SERVER_CONNECTIONS_PER_ADDRESS="4096",
               # What bin/serve derives itself, spelt out for the bench's in-process app.
               EWT_SANDBOX_URL=f"http://127.0.0.1:{sandbox_port}",
               EWT_SANDBOX_DB_PATH=str(instance / "sandbox.sqlite3"),
               PATH=f"{VENV_BIN}:{env.get('PATH', '')}")
    return env


def start_service(workdir: Path, **settings: str) -> Served:
    """Start bin/serve (what `make run` runs) on free ports with its instance under workdir,
    with `settings` (EWT_* variables) on top of the bench's environment."""
    port, sandbox_port = free_port(), free_port()
    instance = workdir / "instance"
    env = {**service_env(instance, port, sandbox_port), **settings}
    log_path = workdir / "serve.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([str(ROOT / "bin" / "serve")], cwd=ROOT, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    served = Served("service", process, port, log_path, "-m server ",
                    extra={"instance": instance, "sandbox_port": sandbox_port, "env": env})
    wait_for_port(sandbox_port, 120)
    wait_for_port(port, 120)
    served.wait_for_worker()
    return served


def start_ceiling(workdir: Path, answers: dict[str, dict]) -> Served:
    """Start the bare ceiling app under waitress with bin/serve's settings (no access log).

    `answers` maps "METHOD /path?query" to the status, content type and size of the service's
    answer (see bench/ceiling_app.py).
    """
    port = free_port()
    env = dict(os.environ, BENCH_CEILING_ANSWERS=json.dumps(answers))
    log_path = workdir / "ceiling.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(VENV_BIN / "waitress-serve"), f"--threads={SERVER_THREADS}",
             f"--listen=127.0.0.1:{port}", "--asyncore-use-poll", "--connection-limit=2000",
             "--channel-timeout=30", "--ident=", "bench.ceiling_app:app"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    served = Served("ceiling", process, port, log_path, "bench.ceiling_app:app")
    wait_for_port(port, 60)
    served.wait_for_worker()
    return served


def answer_of(url: str, *, method: str = "GET", headers: dict[str, str] | None = None,
              body: bytes | None = None) -> dict:
    """One request's answer as it crossed the wire: status, content type and body bytes.

    The body is counted as sent (compressed, when the request accepted that), so the
    ceiling can answer the same number of bytes.
    """
    hostport, _, path = url.split("://", 1)[1].partition("/")
    host, _, port = hostport.partition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.request(method, "/" + path, body=body, headers=dict(headers or {}))
        answer = connection.getresponse()
        return {"status": answer.status, "type": answer.getheader("Content-Type", ""),
                "bytes": len(answer.read())}
    finally:
        connection.close()


def wait_until_idle(pid: int, timeout_s: float = 300.0) -> None:
    """Wait until a worker has finished what it was given (under 5 % CPU for 0.3 s).

    A run slower than its rate leaves requests queued behind it; the next run starts after
    them, not on top of them.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(0.3)
        if cpu_seconds(pid) - before < 0.015:
            return


@dataclass(frozen=True)
class LoadResult:
    """One paced load run's figures."""

    url: str
    seconds: float
    requests: int
    rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    errors: dict
    worker_cpu_s: float | None

    @property
    def ok(self) -> bool:
        """No socket errors and no error statuses."""
        return not any(self.errors.values())


def _percentile(sorted_ms: list[float], percent: float) -> float:
    """Nearest-rank percentile of sorted values (0 when there are none)."""
    if not sorted_ms:
        return 0.0
    return sorted_ms[max(0, math.ceil(percent / 100 * len(sorted_ms)) - 1)]


class _PacedClient:
    """Keep-alive HTTP connections, one per sending thread, to one loopback server."""

    IDLE_S = 1.0  # a connection idle longer is opened anew, well inside the servers' idle limit

    def __init__(self, url: str, method: str, headers: dict[str, str],
                 body: bytes | list[bytes] | None) -> None:
        rest = url.split("://", 1)[1]
        hostport, _, path = rest.partition("/")
        self.host, _, port = hostport.partition(":")
        self.port, self.path = int(port), "/" + path
        self.method, self.headers, self.body = method, headers, body
        # Several bodies are sent in turn, one a request.
        self._bodies = itertools.cycle(body) if isinstance(body, list) else None
        self._local = threading.local()
        self.failures: list[str] = []

    def send(self) -> str | int:
        """One request on this thread's connection: its status, or which error it met."""
        local = self._local
        connection = getattr(local, "connection", None)
        if connection is not None and time.perf_counter() - local.used > self.IDLE_S:
            connection.close()
            connection = None
        if connection is None:
            connection = local.connection = http.client.HTTPConnection(
                self.host, self.port, timeout=TIMEOUT_S)
        try:
            body = next(self._bodies) if self._bodies is not None else self.body
            connection.request(self.method, self.path, body=body, headers=self.headers)
            answer = connection.getresponse()
            answer.read()
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            local.connection = None
            self.failures.append(f"{type(error).__name__}: {error}")
            if isinstance(error, TimeoutError):
                return "timeout"
            return "connect" if isinstance(error, ConnectionRefusedError) else "read"
        local.used = time.perf_counter()
        if answer.will_close:
            connection.close()
            local.connection = None
        return answer.status


def paced(url: str, *, method: str = "GET", headers: dict[str, str] | None = None,
          body: bytes | list[bytes] | None = None, rate: float = 20.0, seconds: float = 10.0,
          warmup_s: float = 1.0, worker_pid: int | None = None,
          max_in_flight: int = 64) -> LoadResult:
    """Send requests at a fixed rate (open loop), timing each from its scheduled start (a list
    of bodies is sent in turn)."""
    client = _PacedClient(url, method, dict(headers or {}), body)
    latencies: list[float] = []
    errors = {"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 0}
    lock = threading.Lock()

    def one(scheduled: float, record: bool) -> None:
        """Send one request and record its latency and outcome."""
        status = client.send()
        took_ms = (time.perf_counter() - scheduled) * 1000
        if not record:
            return
        with lock:
            latencies.append(took_ms)
            if isinstance(status, str):
                errors[status] += 1
            elif not 200 <= status < 300:  # a redirect to the sign-in page is a failure too
                errors["status"] += 1

    def run(pool: ThreadPoolExecutor, count: int, record: bool) -> float:
        """Schedule `count` requests at the rate; return the run's length in seconds."""
        start = time.perf_counter()
        sent = []
        for i in range(count):
            scheduled = start + i / rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            sent.append(pool.submit(one, scheduled, record))
        wait(sent)
        ended = time.perf_counter()
        for future in sent:
            future.result()  # a failure of the client itself is raised, not lost
        return max(ended - start, count / rate)

    # One pool for the warm-up and the run, so the run reuses the warm-up's connections.
    with ThreadPoolExecutor(max_workers=max_in_flight) as pool:
        if warmup_s:
            run(pool, max(1, int(rate * warmup_s)), record=False)
        cpu_before = cpu_seconds(worker_pid) if worker_pid else None
        duration = run(pool, max(1, int(rate * seconds)), record=True)
        cpu = cpu_seconds(worker_pid) - cpu_before if worker_pid else None
    if client.failures:
        print(f"paced {method} {url}: {len(client.failures)} failed, first "
              f"{client.failures[0]}", file=sys.stderr, flush=True)
    ordered = sorted(latencies)
    return LoadResult(url=url, seconds=duration, requests=len(ordered),
                      rps=len(ordered) / duration, p50_ms=_percentile(ordered, 50),
                      p90_ms=_percentile(ordered, 90), p99_ms=_percentile(ordered, 99),
                      max_ms=ordered[-1] if ordered else 0.0, errors=errors, worker_cpu_s=cpu)
