"""Pytest fixtures for the Procore sandbox: a live server over loopback, a fresh company per
test, a ProcoreClient with a fake clock, and a control handle for faults and switches.

Load with ``pytest_plugins = ["tests.plugins.sandbox"]``.
"""
from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask
from werkzeug.serving import make_server

from sandbox import SandboxRequestHandler, create_sandbox_app
from sandbox.seed import create_demo_company
from services.project_system import ProcoreClient
from tests.plugins.parallel import hold_apart


@dataclass(frozen=True)
class SandboxServer:
    """A running sandbox: its base URL, database file, attachment folder and app."""

    url: str
    db_path: str
    files_dir: str
    app: Flask


def advance_sandbox_clock(db_path: str, company_id: int, seconds: float) -> None:
    """Move a sandbox company's clock (Procore's, for its rate windows) on by ``seconds``."""
    with closing(sqlite3.connect(db_path, timeout=10)) as connection:
        connection.execute("UPDATE companies SET clock_offset_s = coalesce(clock_offset_s, 0) "
                           "+ ? WHERE id = ?", [seconds, company_id])
        connection.commit()


class SkippingClock:
    """Real time, but a wait is skipped: it moves this clock and the sandbox company's clock
    on together, at once (the app's clients, in tests that are not about time)."""

    def __init__(self, db_path: str, company_id: int) -> None:
        """A clock for one sandbox company's client."""
        self.db_path, self.company_id = db_path, company_id
        self.skipped = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        """Real time plus every wait skipped so far."""
        return time.time() + self.skipped

    def sleep(self, seconds: float) -> None:
        """Skip a wait: Procore's clock first, so the client never reads ahead of it."""
        with self._lock:
            advance_sandbox_clock(self.db_path, self.company_id, seconds)
            self.skipped += seconds


class FakeClock:
    """Time that only moves when told to; ``sleep`` records each wait and moves time on (and
    the sandbox company's clock with it, given ``on_sleep``)."""

    def __init__(self, start: float, on_sleep: Any = None) -> None:
        """Start the clock at ``start`` (unix seconds)."""
        self.now = start
        self.sleeps: list[float] = []
        self._on_sleep = on_sleep

    def __call__(self) -> float:
        """The current fake time, in the shape of ``time.time``."""
        return self.now

    def sleep(self, seconds: float) -> None:
        """Record a wait and advance the clock by it, without really waiting."""
        self.sleeps.append(seconds)
        if self._on_sleep is not None:
            self._on_sleep(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self.now += seconds


class SharedFakeClock(FakeClock):
    """A FakeClock several threads wait on at once: a wait lasts until the moment the waiting
    thread last read plus the seconds asked, so waits that overlap in time overlap here too
    instead of adding up."""

    def __init__(self, start: float) -> None:
        """Start the clock at ``start`` (unix seconds)."""
        super().__init__(start)
        self._lock = threading.Lock()
        self._read = threading.local()

    def __call__(self) -> float:
        """The current fake time, remembered as this thread's last reading."""
        self._read.at = self.now
        return self.now

    def wait(self, seconds: float, before: Any = None) -> float:
        """Move the clock to this thread's last reading plus ``seconds`` (if it is not past
        that already), calling ``before(step)`` first; returns the step."""
        with self._lock:
            self.sleeps.append(seconds)
            step = max(getattr(self._read, "at", self.now) + seconds - self.now, 0.0)
            if before is not None and step:
                before(step)
            self.now += step
            self._read.at = self.now
            return step


class SandboxControl:
    """Drives the sandbox's /_sandbox switches for one company, with its own token."""

    def __init__(self, server: SandboxServer, company: dict[str, Any]) -> None:
        """Get a token for the company, used only for control calls."""
        self.server = server
        self.company = company
        self.session = requests.Session()
        self._login()

    def _login(self) -> None:
        """Fetch a token with the company's credentials and use it for later calls."""
        answer = self.session.post(f"{self.server.url}/oauth/token", data={
            "grant_type": "client_credentials", "client_id": self.company["client_id"],
            "client_secret": self.company["client_secret"]}, timeout=10)
        answer.raise_for_status()
        self.session.headers["Authorization"] = f"Bearer {answer.json()['access_token']}"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One control call; raises on an error status."""
        answer = self.session.request(method, f"{self.server.url}/_sandbox{path}", json=body,
                                      timeout=10)
        answer.raise_for_status()
        return answer.json() if answer.content else None

    def fault(self, status: int, count: int = 1, **options: Any) -> dict[str, Any]:
        """Make the next ``count`` matching calls fail (see POST /_sandbox/faults)."""
        fault: dict[str, Any] = self._call("POST", "/faults",
                                           {"status": status, "count": count, **options})
        return fault

    def faults(self) -> list[dict[str, Any]]:
        """The faults that still have uses left."""
        faults: list[dict[str, Any]] = self._call("GET", "/faults")
        return faults

    def revoke_tokens(self) -> int:
        """Revoke every token of the company, this handle's own included, then get a new one."""
        revoked = int(self._call("POST", "/tokens/revoke")["revoked"])
        self._login()
        return revoked

    def set_rate_limit(self, per_hour: int | None) -> None:
        """Override the company's hourly call limit (None restores the default)."""
        self._call("POST", "/rate_limit", {"per_hour": per_hour})

    def set_spike_limit(self, per_10s: int | str | None, window_s: int = 10,
                        rolling: bool = False) -> None:
        """Limit the company to ``per_10s`` calls per window (None switches it off, "default"
        goes back to the sandbox's SANDBOX_SPIKE_LIMIT); ``window_s`` 10 or 60, fixed or
        ``rolling``."""
        self._call("POST", "/spike_limit", {"per_10s": per_10s, "window_s": window_s,
                                            "rolling": rolling})

    def set_attachments_mode(self, mode: str | None = None, rename: bool | None = None) -> None:
        """Make a change event's attachments_by_uuid "add" to its files or "replace" them;
        with ``rename``, store files under another name than sent."""
        self._call("POST", "/attachments", {"mode": mode, "rename": rename})

    def skew_clock(self, seconds: float) -> None:
        """Set the company's Procore clock ``seconds`` apart from real time (its
        X-Rate-Limit-Reset and Date with it)."""
        self._call("POST", "/clock", {"skew_s": seconds})

    def set_error_shape(self, shape: str) -> None:
        """Answer the company's errors in v1's shape or v2.0's ({"error": {...}})."""
        self._call("POST", "/error_shape", {"shape": shape})

    def set_latency(self, ms: float | None) -> None:
        """Make every REST call of the company take ``ms`` longer (None: none added)."""
        self._call("POST", "/latency", {"ms": ms})

    def freeze_clock(self) -> float:
        """Stop the company's sandbox clock; only advance_clock moves it from now on. Returns the
        time it stopped at (unix seconds), for a FakeClock that should read the same."""
        self._call("POST", "/clock", {"freeze": True})
        with closing(sqlite3.connect(self.server.db_path)) as connection:
            return float(connection.execute("SELECT clock_frozen_at FROM companies WHERE id = ?",
                                            [self.company["company_id"]]).fetchone()[0])

    def advance_clock(self, seconds: float) -> None:
        """Move the company's sandbox clock forward, so rate windows roll over at once."""
        self._call("POST", "/clock", {"advance_s": seconds})

    def set_tool(self, project_id: int, engine_name: str, is_active: bool) -> None:
        """Switch a project tool on or off."""
        self._call("POST", f"/projects/{project_id}/tools",
                   {"engine_name": engine_name, "is_active": is_active})

    def put_on_change_orders(self, event_id: int, kind: str = "commitment",
                             status: str = "approved", title: str | None = None
                             ) -> list[dict[str, Any]]:
        """Put a change event's lines on commitment change orders (one per commitment) or on a
        prime one, with ``status``, as a PM does in Procore; again, to change their status."""
        body: dict[str, Any] = {"kind": kind, "status": status}
        if title is not None:
            body["title"] = title
        orders: list[dict[str, Any]] = self._call("POST", f"/change_events/{event_id}/"
                                                          "change_orders", body)
        return orders

    def set_change_event_status(self, project_id: int, event_id: int, name: str) -> None:
        """Move a change event to the company's status of this name ("Pending", "Closed",
        "Void"), through Procore's own PATCH, as a PM does."""
        headers = {"Procore-Company-Id": str(self.company["company_id"])}
        statuses = self.session.get(f"{self.server.url}/rest/v1.0/change_event/statuses",
                                    params={"project_id": project_id}, headers=headers,
                                    timeout=10)
        statuses.raise_for_status()
        status_id = next(row["id"] for row in statuses.json() if row["name"] == name)
        answer = self.session.patch(f"{self.server.url}/rest/v1.1/change_events/{event_id}",
                                    params={"project_id": project_id}, headers=headers,
                                    json={"change_event": {"status": {"id": status_id}}},
                                    timeout=10)
        answer.raise_for_status()

    def close(self) -> None:
        """Close the HTTP session."""
        self.session.close()


@pytest.fixture(scope="session")
def sandbox_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxServer]:
    """A sandbox app on a free loopback port, served by a threaded Werkzeug server."""
    folder: Path = tmp_path_factory.mktemp("procore-sandbox")
    db_path, files_dir = str(folder / "sandbox.sqlite3"), str(folder / "files")
    hold_apart("the sandbox database", db_path)
    # Procore's spike limit, as the sandbox has it by default (25 calls in 10 s per company):
    # each test has a company of its own, so one test's calls never slow another's.
    app = create_sandbox_app({"SANDBOX_DB_PATH": db_path, "SANDBOX_FILES_DIR": files_dir})
    server = make_server("127.0.0.1", 0, app, threaded=True,
                         request_handler=SandboxRequestHandler)
    thread = threading.Thread(target=server.serve_forever, name="procore-sandbox", daemon=True)
    thread.start()
    hold_apart("the sandbox server", server.server_port)
    try:
        yield SandboxServer(url=f"http://127.0.0.1:{server.server_port}", db_path=db_path,
                            files_dir=files_dir, app=app)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def sandbox_company(sandbox_server: SandboxServer) -> dict[str, Any]:
    """A fresh demo company (credentials and projects) for this test alone."""
    return create_demo_company(sandbox_server.db_path)


@pytest.fixture
def sandbox_control(sandbox_server: SandboxServer,
                    sandbox_company: dict[str, Any]) -> Iterator[SandboxControl]:
    """Fault injection and switches for this test's company."""
    control = SandboxControl(sandbox_server, sandbox_company)
    yield control
    control.close()


@pytest.fixture
def contract_company(sandbox_server: SandboxServer) -> dict[str, Any]:
    """A fresh company that also has the projects real companies differ by (see seed.py)."""
    return create_demo_company(sandbox_server.db_path, contract_projects=True)


@pytest.fixture
def contract_client(sandbox_server: SandboxServer,
                    contract_company: dict[str, Any]) -> Iterator[ProcoreClient]:
    """A ProcoreClient with a FakeClock for the contract company (its waits move the
    company's sandbox clock on: Procore's spike limit costs no test time)."""
    clock = FakeClock(time.time(), lambda seconds: advance_sandbox_clock(
        sandbox_server.db_path, contract_company["company_id"], seconds))
    client = ProcoreClient(sandbox_server.url, sandbox_server.url, contract_company["client_id"],
                           contract_company["client_secret"], contract_company["company_id"],
                           clock=clock, sleep=clock.sleep)
    yield client
    client.close()


@dataclass
class Exchange:
    """One HTTP call a client made and the answer it got."""

    method: str
    url: str
    headers: dict[str, str]
    content_type: str
    body: bytes
    status: int
    answer_headers: dict[str, str]
    answer_body: bytes


class ExchangeRecorder:
    """Collects every exchange of the ProcoreClients it is attached to."""

    def __init__(self) -> None:
        """Start with no exchanges."""
        self.exchanges: list[Exchange] = []

    def attach(self, client: ProcoreClient) -> None:
        """Record this client's exchanges from now on."""
        client.observer = self

    def __call__(self, response: requests.Response, body: bytes) -> None:
        """Keep one request and its answer."""
        sent = response.request
        raw = sent.body or b""
        self.exchanges.append(Exchange(
            method=str(sent.method), url=str(sent.url), headers=dict(sent.headers),
            content_type=str(sent.headers.get("Content-Type", "")).split(";")[0].strip(),
            body=raw.encode() if isinstance(raw, str) else bytes(raw), status=response.status_code,
            answer_headers=dict(response.headers), answer_body=body))


@pytest.fixture
def procore_client(sandbox_server: SandboxServer,
                   sandbox_company: dict[str, Any]) -> Iterator[ProcoreClient]:
    """A ProcoreClient for this test's company; ``procore_client.clock`` is a FakeClock (its
    waits move the company's sandbox clock on: Procore's spike limit costs no test time)."""
    clock = FakeClock(time.time(), lambda seconds: advance_sandbox_clock(
        sandbox_server.db_path, sandbox_company["company_id"], seconds))
    client = ProcoreClient(sandbox_server.url, sandbox_server.url, sandbox_company["client_id"],
                           sandbox_company["client_secret"], sandbox_company["company_id"],
                           clock=clock, sleep=clock.sleep)
    yield client
    client.close()
