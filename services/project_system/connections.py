"""Per-company project-system connections and the clients built from them."""
from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from flask import current_app
from sqlalchemy import select

from models import Company, ProjectSystemConnection, db, utcnow
from services.platform.database import write_transaction
from services.platform.errors import (
    Conflict,
    NotFound,
    ProjectSystemRefused,
    ServiceError,
    ValidationFailed,
    field_problem,
)
from services.project_system import (
    ProcoreClient,
    ProjectSystem,
    ProjectSystemAuthError,
    ProjectSystemError,
    ProjectSystemRateLimited,
    ProjectSystemUnavailable,
    WriteUnconfirmed,
)
from services.project_system.pacing import Budget, RedisBudget

EMBEDDED = "embedded_sandbox"


_seen_lock = threading.Lock()
_last_seen: dict[str, Any] = {"ok_at": None, "failed_at": None, "last_error": None}


def project_system_seen(ok: bool, code: str | None = None) -> None:
    """Remember, in this process, the outcome of the latest project-system call."""
    with _seen_lock:
        if ok:
            _last_seen["ok_at"] = time.time()
        else:
            _last_seen["failed_at"] = time.time()
            _last_seen["last_error"] = code


def last_seen() -> dict[str, Any]:
    """When this process last reached the project system, last failed to, and why."""
    with _seen_lock:
        return dict(_last_seen)


@dataclass(frozen=True)
class Hosts:
    """Where one Procore environment answers."""

    oauth_base: str
    api_base: str
    web_base: str


PROCORE_ENVIRONMENTS = {
    "production": Hosts("https://login.procore.com", "https://api.procore.com",
                        "https://app.procore.com"),
    "developer_sandbox": Hosts("https://login-sandbox.procore.com", "https://sandbox.procore.com",
                               "https://sandbox.procore.com"),
    "monthly_sandbox": Hosts("https://login-sandbox-monthly.procore.com",
                             "https://api-monthly.procore.com", "https://api-monthly.procore.com"),
}
ENVIRONMENTS = (EMBEDDED, *PROCORE_ENVIRONMENTS, "custom")

_clients_lock = threading.Lock()


def get_connection(company_id: int) -> ProjectSystemConnection | None:
    """Return a company's connection settings, or None."""
    return db.session.get(ProjectSystemConnection, company_id)


def hosts_for(connection: ProjectSystemConnection) -> Hosts:
    """Resolve the addresses a connection talks to."""
    if connection.environment == EMBEDDED:
        base = current_app.config["SANDBOX_URL"].rstrip("/")
        web = (current_app.config.get("SANDBOX_PUBLIC_URL") or base).rstrip("/")
        return Hosts(base, base, web)
    if connection.environment in PROCORE_ENVIRONMENTS:
        return PROCORE_ENVIRONMENTS[connection.environment]
    return Hosts(connection.oauth_base, connection.api_base, connection.web_base or connection.api_base)


def _shared_budget(api_base: str, client_id: str, remote_company_id: int) -> Budget | None:
    """On Redis (the scale setup's limiter storage), a Procore call budget every process shares;
    otherwise None: the client keeps its own, shared by this process's threads."""
    storage = str(current_app.config["RATELIMIT_STORAGE_URI"])
    if not storage.startswith(("redis://", "rediss://")):
        return None
    import redis  # only an install keeping its limits on Redis loads it (6 MB a process)

    # Short timeouts: a Redis that does not answer is paced around (in-process), not waited on.
    return RedisBudget(redis.Redis.from_url(storage, socket_timeout=1, socket_connect_timeout=1),
                       f"ewt:procore-budget:{api_base}:{client_id}:{remote_company_id}")


def client_for(company_id: int) -> ProjectSystem:
    """Return the project-system client of a company, reusing it (and its token) across requests."""
    connection = get_connection(company_id)
    if connection is None:
        raise Conflict("this company is not connected to a project system yet; run "
                       "`flask --app app project-system connect`", code="project_system_not_connected")
    hosts = hosts_for(connection)
    fingerprint = (connection.environment, hosts, connection.client_id, connection.client_secret,
                   connection.remote_company_id, current_app.config["PROJECT_SYSTEM_READ_RETRIES"],
                   current_app.config["PROJECT_SYSTEM_CONNECT_TIMEOUT_S"],
                   current_app.config["PROJECT_SYSTEM_READ_TIMEOUT_S"],
                   current_app.config["PROJECT_SYSTEM_WRITE_TIMEOUT_S"],
                   current_app.config["PROJECT_SYSTEM_RATE_LIMIT_WAIT_S"])
    with _clients_lock:
        _clients = current_app.extensions.setdefault("project_system_clients", {})
        cached = _clients.get(company_id)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        client = ProcoreClient(
            api_base=hosts.api_base, oauth_base=hosts.oauth_base, web_base=hosts.web_base,
            client_id=connection.client_id, client_secret=connection.client_secret,
            company_id=connection.remote_company_id,
            timeout=(current_app.config["PROJECT_SYSTEM_CONNECT_TIMEOUT_S"],
                     current_app.config["PROJECT_SYSTEM_READ_TIMEOUT_S"]),
            write_timeout=(current_app.config["PROJECT_SYSTEM_CONNECT_TIMEOUT_S"],
                           current_app.config["PROJECT_SYSTEM_WRITE_TIMEOUT_S"]),
            max_read_retries=current_app.config["PROJECT_SYSTEM_READ_RETRIES"],
            max_rate_limit_wait_s=float(current_app.config["PROJECT_SYSTEM_RATE_LIMIT_WAIT_S"]),
            budget=_shared_budget(hosts.api_base, connection.client_id,
                                  connection.remote_company_id),
        )
        _clients[company_id] = (fingerprint, client)
        return client


def rate_limit_wait(company_id: int) -> float:
    """How many seconds a call to the company's project system would now wait for its rate
    limit (0.0: none, or not connected)."""
    try:
        client = client_for(company_id)
    except ServiceError:
        return 0.0
    budget = getattr(client, "budget", None)  # a shared one Redis cannot read paces locally
    return max(budget.waiting(client.clock()), 0.0) if budget is not None else 0.0


class ProjectSystemBusy(ServiceError):
    """This company already has as many project-system calls under way as it may, or the
    project system asked for a pause (Retry-After says how long)."""

    status = 503
    code = "project_system_busy"


def refuse_while_paced(company_id: int) -> None:
    """A first read that timed out while waiting for the company's rate limit is busy, not away."""
    wait = rate_limit_wait(company_id)
    if wait > 0:
        raise paced_busy(wait)


def paced_busy(wait_s: float, detail: str | None = None) -> ProjectSystemBusy:
    """The busy answer while the project system's rate limit holds calls for `wait_s`."""
    seconds = max(1, math.ceil(wait_s))
    return ProjectSystemBusy(f"the project system asks for a pause of {seconds} s before more "
                             f"calls (its rate limit){f': {detail}' if detail else ''}",
                             headers={"Retry-After": str(seconds)})


_slots_lock = threading.Lock()
# How many times each slot pool was given back, so a waiter sees the queue move.
_released: dict[tuple[int, str, int], int] = {}


# How often a call waiting on the clock of its project-system client looks for a free slot.
SLOT_POLL_S = 0.05


@dataclass(frozen=True)
class Turn:
    """How long a call waits its turn: the slot wait after the latest of its start, the last
    call ahead finishing and the end of the latest wait of the company's client for Procore's
    rate limit (`paced_until`), all on `clock`: as long as the calls ahead move on or wait
    for the company's budget, never behind a hung one."""

    clock: Callable[[], float]
    paced_until: Callable[[], float]


@contextlib.contextmanager
def company_slot(company_id: int, kind: str, turn: Turn | None = None) -> Iterator[None]:
    """Hold one of the company's project-system slots ("read" or "write") for a call.

    One company's slow or hung project system then holds at most its own few slots' worth
    of server threads; a call that cannot get a slot within PROJECT_SYSTEM_SLOT_WAIT_S
    (PROJECT_SYSTEM_WRITE_SLOT_WAIT_S for a write, which may wait out another approval) is
    refused with 503 project_system_busy instead of queueing behind the others. Given a
    `turn`, the wait counts from the last sign that the calls ahead move on (one finished, or
    waits for Procore's rate limit: the company's budget, not a hung system).
    """
    config = current_app.config
    size = int(config["PROJECT_SYSTEM_READS_PER_COMPANY"] if kind == "read"
               else config["PROJECT_SYSTEM_WRITES_PER_COMPANY"])
    with _slots_lock:
        slots = current_app.extensions.setdefault("project_system_slots", {})
        semaphore = slots.setdefault((company_id, kind, size), threading.BoundedSemaphore(size))
    wait = float(config["PROJECT_SYSTEM_WRITE_SLOT_WAIT_S" if kind == "write"
                        else "PROJECT_SYSTEM_SLOT_WAIT_S"])
    key = (company_id, kind, size)
    if turn is None:
        got = semaphore.acquire(timeout=wait)
    else:
        # The slot wait counts from the last time a call ahead finished (the queue moves) or
        # waited for Procore's rate limit (the company's budget); a hung call ahead still
        # makes this one give up after the slot wait.
        started, seen = turn.clock(), _released.get(key, 0)
        while not (got := semaphore.acquire(timeout=SLOT_POLL_S)):
            now = turn.clock()
            if _released.get(key, 0) != seen:
                started, seen = now, _released.get(key, 0)
            if now >= max(started, turn.paced_until()) + wait:
                break
    if not got:
        raise ProjectSystemBusy("the project system is slow for this company right now; try again "
                                "in a moment", headers={"Retry-After": "5"})
    try:
        yield
    finally:
        with _slots_lock:
            _released[key] = _released.get(key, 0) + 1
        semaphore.release()


@contextlib.contextmanager
def project_system_errors(company_id: int | None = None, kind: str = "read",
                          turn: Turn | None = None) -> Iterator[None]:
    """Turn project-system failures into 502 answers that carry the project system's message.

    Given the company, the block also holds one of its project-system slots (`company_slot`,
    waited for as `turn` says when given).
    """
    slot = (company_slot(company_id, kind, turn) if company_id is not None
            else contextlib.nullcontext())
    try:
        with slot:
            yield
    except ProjectSystemAuthError as error:
        project_system_seen(False, "auth_failed")
        raise ProjectSystemRefused(f"the project system refused our credentials: {error.message}",
                                   code="project_system_auth_failed") from error
    except WriteUnconfirmed as error:
        project_system_seen(False, "unavailable")
        raise ProjectSystemRefused(f"the project system did not confirm the write, which may be "
                                   f"there in whole or in part: {error.message}; a retry finds "
                                   "it and completes it, never writing it twice",
                                   code="project_system_write_unconfirmed") from error
    except ProjectSystemRateLimited as error:
        project_system_seen(True)
        raise paced_busy(error.retry_after_s, error.message) from error
    except ProjectSystemUnavailable as error:
        project_system_seen(False, "unavailable")
        raise ProjectSystemRefused(f"the project system could not be reached: {error.message}",
                                   code="project_system_unavailable") from error
    except ProjectSystemError as error:
        reachable = error.status is not None and error.status < 500
        project_system_seen(reachable, None if reachable else f"http_{error.status}")
        status = f" ({error.status})" if error.status else ""
        raise ProjectSystemRefused(f"the project system answered{status}: {error.message}",
                                   code="project_system_error") from error
    else:
        project_system_seen(True)


def save_connection(company_id: int, *, environment: str, client_id: str, client_secret: str,
                    remote_company_id: int, api_base: str | None = None,
                    oauth_base: str | None = None, web_base: str | None = None
                    ) -> ProjectSystemConnection:
    """Create or replace a company's connection settings."""
    problems = []
    if environment not in ENVIRONMENTS:
        problems.append(field_problem("environment", f"one of {', '.join(ENVIRONMENTS)}"))
    if environment == "custom" and not (api_base and oauth_base):
        problems.append(field_problem("api_base", "custom hosts need api_base and oauth_base"))
    if not client_id or not client_secret:
        problems.append(field_problem("client_id", "client id and secret are required"))
    if problems:
        raise ValidationFailed("the connection settings have problems", details=problems)
    with write_transaction() as session:
        if session.get(Company, company_id) is None:
            raise NotFound(f"no company with id {company_id}", code="company_not_found")
        connection = session.get(ProjectSystemConnection, company_id)
        if connection is None:
            connection = ProjectSystemConnection(company_id=company_id)
            session.add(connection)
        connection.environment = environment
        connection.client_id = client_id
        connection.client_secret = client_secret
        connection.remote_company_id = remote_company_id
        connection.api_base = api_base.rstrip("/") if api_base else None
        connection.oauth_base = oauth_base.rstrip("/") if oauth_base else None
        connection.web_base = web_base.rstrip("/") if web_base else None
        connection.updated_at = utcnow()
    return connection


def record_status(company_id: int, status: str) -> None:
    """Remember the last outcome of talking to the project system (shown by health checks)."""
    with write_transaction() as session:
        connection = session.get(ProjectSystemConnection, company_id)
        if connection is not None:
            connection.last_status = status
            connection.last_checked_at = utcnow()


def check_connection(company_id: int) -> list[tuple[bool, str]]:
    """Try a connection step by step and say, in plain words, what works and what does not."""
    findings: list[tuple[bool, str]] = []
    connection = get_connection(company_id)
    if connection is None:
        return [(False, "no connection is configured for this company")]
    hosts = hosts_for(connection)
    findings.append((True, f"environment {connection.environment}: API {hosts.api_base}, "
                           f"login {hosts.oauth_base}"))
    client = client_for(company_id)
    try:
        projects = client.list_projects()
    except ProjectSystemAuthError as error:
        findings.append((False, f"login refused: {error.message} — check the client id and secret, "
                                "and that the app is installed in this Procore company"))
    except ProjectSystemUnavailable as error:
        findings.append((False, f"cannot reach the project system: {error.message}"))
    except ProjectSystemError as error:
        findings.append((False, f"the project system answered {error.status}: {error.message} — "
                                "check the Procore company id and the app's permitted projects"))
    else:
        findings.append((True, f"logged in; {len(projects)} project(s) visible"))
        if not projects:
            findings.append((False, "no projects are visible: add projects to the app's permitted "
                                    "projects in Procore"))
        for project in projects[:20]:
            try:
                enabled = client.change_events_enabled(project.id)
            except ProjectSystemError as error:
                findings.append((False, f"project {project.id} {project.name}: {error.message}"))
                continue
            tool = "change events on" if enabled else "no change events (daily log only)"
            findings.append((True, f"project {project.id} {project.name}: {tool}"))
    record_status(company_id, "ok" if all(ok for ok, _ in findings) else "failing")
    return findings


def connected_company_ids() -> list[int]:
    """Ids of every company that has a connection."""
    return list(db.session.scalars(select(ProjectSystemConnection.company_id)))
