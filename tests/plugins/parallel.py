"""Tests side by side under pytest-xdist (`make test` runs `-n auto`), and the `alone` marker.

A test marked `alone` (it measures time, holds thousands of connections, or needs the whole
machine) runs while no other worker runs a test: every test holds a shared lock on one file of
the run for its set-up, call and tear-down, an `alone` test an exclusive one. A turnstile lock
taken before either keeps a waiting `alone` test from being passed by the next shared ones.
Each worker already has its own sandbox, temporary folders, servers on free ports, S3 buckets,
PostgreSQL template and Redis database (tests/databases.py).
"""
from __future__ import annotations

import fcntl
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

LOCKS = "ewt_lock_folder"  # the workerinput key naming the run's lock folder
_folder_key = pytest.StashKey[Path]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """In the controller, tell each worker where the run's locks are (made for the first)."""
    stash = node.config.stash
    if _folder_key not in stash:
        stash[_folder_key] = Path(tempfile.mkdtemp(prefix="ewt-test-locks-"))
    node.workerinput[LOCKS] = str(stash[_folder_key])


def pytest_unconfigure(config) -> None:
    """Remove the run's lock folder once every worker has stopped."""
    folder = config.stash.get(_folder_key, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def run_folder(config) -> Path | None:
    """The folder of the run's locks, in a worker of an xdist run; None otherwise."""
    workerinput = getattr(config, "workerinput", None)
    return Path(workerinput[LOCKS]) if workerinput and LOCKS in workerinput else None


@contextmanager
def turn(folder: Path, alone: bool) -> Iterator[None]:
    """Hold the run's room shared (or, for an `alone` test, exclusively) until the block ends."""
    with open(folder / "tests-turnstile.lock", "a") as turnstile, \
            open(folder / "tests-room.lock", "a") as room:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Run each test inside its turn of the run's room."""
    folder = run_folder(item.config)
    if folder is None:
        yield
        return
    with turn(folder, alone=item.get_closest_marker("alone") is not None):
        yield


# What this worker's session fixtures hold that no other worker may share, by kind.
_held: dict[str, str] = {}
HELD = "ewt_held_apart"  # the workeroutput key that carries them to the controller
_reports_key = pytest.StashKey[dict[str, dict[str, str]]]()


def hold_apart(kind: str, value: object) -> None:
    """Note a resource of this worker (a database, a folder, a server) that no other worker of
    the run may use; the controller fails the run when two workers name the same one."""
    _held[kind] = str(value)


def pytest_sessionfinish(session) -> None:
    """In a worker, hand what it held to the controller; in the controller, fail the run when
    two workers held the same."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[HELD] = dict(_held)
    elif shared_between(session.config.stash.get(_reports_key, {})):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """In the controller, keep what a worker that stopped held."""
    reports = node.config.stash.setdefault(_reports_key, {})
    output = getattr(node, "workeroutput", None) or {}
    reports[node.gateway.id] = output.get(HELD, {})


def shared_between(reports: dict[str, dict[str, str]]) -> list[str]:
    """Each resource that two workers held, in words."""
    owners: dict[tuple[str, str], str] = {}
    shared = []
    for worker, held in sorted(reports.items()):
        for kind, value in sorted(held.items()):
            if (kind, value) in owners:
                shared.append(f"{owners[kind, value]} and {worker} both used {kind} {value}")
            owners.setdefault((kind, value), worker)
    return shared


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """In the controller, say which resources two workers shared (the run has failed)."""
    shared = shared_between(config.stash.get(_reports_key, {}))
    if shared:
        terminalreporter.section("workers not kept apart: the run fails", red=True)
        for line in shared:
            terminalreporter.line(line, red=True)
