"""The project-system answer cache (services.platform.cache.TTLCache): expiry on a clock the test
turns, and one load per key at a time however many threads ask."""
from __future__ import annotations

import threading

import pytest

from services.platform.cache import TTLCache


class Clock:
    """A clock that moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class SlowLoad:
    """A load that counts its calls and, once held, waits until the test lets it finish."""

    def __init__(self, value: str) -> None:
        self.value = value
        self.calls = 0
        self.started = threading.Event()
        self.go_on = threading.Event()
        self.go_on.set()
        self.error: Exception | None = None

    def hold(self) -> None:
        """Make the next load wait for release()."""
        self.go_on.clear()
        self.started.clear()

    def release(self) -> None:
        """Let a held load finish."""
        self.go_on.set()

    def __call__(self) -> str:
        self.calls += 1
        self.started.set()
        assert self.go_on.wait(timeout=30)
        if self.error is not None:
            raise self.error
        return f"{self.value} #{self.calls}"


def in_threads(work, count: int) -> tuple[list[threading.Thread], list]:
    """Start count threads running work(); their results (or errors) land in the list."""
    results: list = []

    def run() -> None:
        try:
            results.append(work())
        except Exception as error:  # noqa: BLE001 - kept for the assertions
            results.append(error)

    threads = [threading.Thread(target=run, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads, results


def finish(threads: list[threading.Thread]) -> None:
    """Join threads, failing the test if one hangs."""
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive(), "a caller was left waiting"


def test_a_value_is_kept_for_its_time_and_loaded_again_after():
    clock, load = Clock(), SlowLoad("codes")
    cache = TTLCache(clock=clock)
    assert cache.get_or_load("k", 30, load) == "codes #1"
    clock.now += 29.9
    assert cache.get_or_load("k", 30, load) == "codes #1"
    clock.now += 0.2
    assert cache.get_or_load("k", 30, load) == "codes #2"
    assert load.calls == 2


def test_callers_during_a_reload_get_the_expired_value_and_load_nothing():
    clock, load = Clock(), SlowLoad("codes")
    cache = TTLCache(clock=clock)
    cache.get_or_load("k", 30, load)
    clock.now += 31
    load.hold()
    reloading, reloaded = in_threads(lambda: cache.get_or_load("k", 30, load), 1)
    assert load.started.wait(timeout=30)
    # Eight more callers while the reload is under way: none waits, none loads.
    assert [cache.get_or_load("k", 30, load) for _ in range(8)] == ["codes #1"] * 8
    load.release()
    finish(reloading)
    assert reloaded == ["codes #2"] and load.calls == 2
    assert cache.get_or_load("k", 30, load) == "codes #2"


def test_callers_of_a_key_not_yet_loaded_wait_for_its_one_load():
    load = SlowLoad("projects")
    cache = TTLCache(clock=Clock())
    load.hold()
    first, first_result = in_threads(lambda: cache.get_or_load("k", 60, load), 1)
    assert load.started.wait(timeout=30)
    others, other_results = in_threads(lambda: cache.get_or_load("k", 60, load), 6)
    load.release()
    finish(first + others)
    assert first_result + other_results == ["projects #1"] * 7
    assert load.calls == 1


def test_a_failed_load_fails_its_waiters_and_the_next_caller_tries_again():
    load = SlowLoad("projects")
    cache = TTLCache(clock=Clock())
    load.hold()
    load.error = ConnectionError("project system unreachable")
    first, first_result = in_threads(lambda: cache.get_or_load("k", 60, load), 1)
    assert load.started.wait(timeout=30)
    others, other_results = in_threads(lambda: cache.get_or_load("k", 60, load), 3)
    load.release()
    finish(first + others)
    assert all(result is load.error for result in first_result + other_results)
    load.error = None
    assert cache.get_or_load("k", 60, load) == "projects #2"


def test_a_slow_load_of_one_key_holds_up_no_other_key():
    slow, quick = SlowLoad("slow"), SlowLoad("quick")
    cache = TTLCache(clock=Clock())
    slow.hold()
    loading, _ = in_threads(lambda: cache.get_or_load("a", 60, slow), 1)
    assert slow.started.wait(timeout=30)
    assert cache.get_or_load("b", 60, quick) == "quick #1"
    slow.release()
    finish(loading)


def test_a_load_interrupted_by_something_else_frees_the_key():
    cache = TTLCache(clock=Clock())

    def interrupted() -> str:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cache.get_or_load("k", 60, interrupted)
    after, results = in_threads(lambda: cache.get_or_load("k", 60, lambda: "loaded"), 1)
    finish(after)
    assert results == ["loaded"]
