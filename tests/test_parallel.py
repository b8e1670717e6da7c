"""The parallel run's isolation: each worker's own Redis database and template, the `alone`
turn that keeps every other test out, and the run's check that workers shared nothing."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.databases import worker_redis_url
from tests.plugins.parallel import shared_between, turn


def test_each_worker_has_its_own_redis_database():
    url = "redis://127.0.0.1:6390/0"
    assert worker_redis_url(url, "") == url
    assert worker_redis_url(url, "gw0") == "redis://127.0.0.1:6390/0"
    assert worker_redis_url(url, "gw1") == "redis://127.0.0.1:6390/1"
    assert worker_redis_url(None, "gw1") is None
    with pytest.raises(RuntimeError):
        worker_redis_url(url, "gw16")


def test_the_run_fails_when_two_workers_held_the_same_resource():
    apart = {"gw0": {"the sandbox database": "/t/gw0/s.sqlite3", "the Redis database": "r/0"},
             "gw1": {"the sandbox database": "/t/gw1/s.sqlite3", "the Redis database": "r/1"}}
    assert shared_between(apart) == []
    apart["gw1"]["the Redis database"] = "r/0"
    assert shared_between(apart) == ["gw0 and gw1 both used the Redis database r/0"]


def blocked_on(path) -> int:
    """How many lock requests wait on the file at ``path`` (the kernel's /proc/locks)."""
    inode = path.stat().st_ino
    return sum(1 for line in Path("/proc/locks").read_text().splitlines()
               if "->" in line and line.split()[6].rsplit(":", 1)[1] == str(inode))


def until(condition) -> None:
    """Poll a condition for at most 10 s."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_an_alone_test_waits_for_the_others_and_keeps_them_out(tmp_path):
    events: list[str] = []
    entered, leave = threading.Event(), threading.Event()

    def shared(name: str) -> None:
        with turn(tmp_path, alone=False):
            events.append(f"{name} in")
            entered.set()
            if name == "first":
                leave.wait(10)
            events.append(f"{name} out")

    def alone() -> None:
        with turn(tmp_path, alone=True):
            events.append("alone in")
            events.append("alone out")

    threads = [threading.Thread(target=shared, args=("first",))]
    threads[0].start()
    until(entered.is_set)
    threads.append(threading.Thread(target=alone))
    threads[1].start()
    until(lambda: blocked_on(tmp_path / "tests-room.lock") == 1)  # waits for the first to end
    threads.append(threading.Thread(target=shared, args=("later",)))
    threads[2].start()
    until(lambda: blocked_on(tmp_path / "tests-turnstile.lock") == 1)  # queued behind it
    leave.set()
    for thread in threads:
        thread.join(10)
    assert events == ["first in", "first out", "alone in", "alone out", "later in", "later out"]
