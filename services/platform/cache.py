"""A small in-process cache with expiry, for answers read from the project system."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Load(Generic[T]):
    """One load of a key under way, which other callers may wait for."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None

    def finish(self, value: T | None, error: BaseException | None) -> None:
        """Hand the load's value, or its error, to whoever waits."""
        self._value, self._error = value, error
        self._done.set()

    def result(self, timeout: float | None = None) -> T:
        """Wait for the load (TimeoutError past `timeout`), then give its value or raise its error."""
        if not self._done.wait(timeout):
            raise TimeoutError("the load under way did not finish in time")
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


class TTLCache(Generic[T]):
    """Maps keys to values that expire a fixed number of seconds after they were stored.

    A key is loaded by one caller at a time. While it loads, other callers get the
    expired value if there is one, or else wait for that load and share its value or its
    error. Without this, an expiry under load sent every busy thread to the project system
    at once, each spending a request of the company's hourly allowance on the same answer.
    """

    def __init__(self, max_entries: int = 4096,
                 clock: Callable[[], float] = time.time) -> None:
        self._entries: dict[Hashable, tuple[float, T]] = {}
        self._loading: dict[Hashable, _Load[T]] = {}
        self._lock = threading.Lock()
        self._max_entries = max_entries
        self._clock = clock

    def get_or_load(self, key: Hashable, ttl_s: float, load: Callable[[], T],
                    wait_s: float | None = None) -> T:
        """Return the cached value for key, loading and storing it when absent or expired.

        A caller that finds another's load under way (and no expired value) waits for it at
        most `wait_s` seconds, then gets TimeoutError.
        """
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] > self._clock():
                return entry[1]
            under_way = self._loading.get(key)
            if under_way is None:
                mine = self._loading[key] = _Load()
            elif entry is not None:
                return entry[1]
        if under_way is not None:
            return under_way.result(wait_s)
        try:
            value = load()
        except BaseException as error:
            with self._lock:
                del self._loading[key]
            mine.finish(None, error)
            raise
        with self._lock:
            now = self._clock()
            if len(self._entries) >= self._max_entries:
                self._evict_expired(now)
            self._entries[key] = (now + ttl_s, value)
            del self._loading[key]
        mine.finish(value, None)
        return value

    def peek(self, key: Hashable, *, stale: bool = False) -> T | None:
        """The cached value without loading: None when absent, or expired unless `stale`."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or (not stale and entry[0] <= self._clock()):
            return None
        return entry[1]

    def invalidate(self, key: Hashable) -> None:
        """Forget one key."""
        with self._lock:
            self._entries.pop(key, None)

    def expire_all(self) -> None:
        """Make every value stale now; each stays as the last one known until loaded again."""
        with self._lock:
            self._entries = {key: (0.0, value) for key, (_, value) in self._entries.items()}

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()

    def _evict_expired(self, now: float) -> None:
        """Drop expired entries, and the oldest half if that is not enough."""
        for key in [k for k, (expires, _) in self._entries.items() if expires <= now]:
            del self._entries[key]
        if len(self._entries) >= self._max_entries:
            oldest = sorted(self._entries, key=lambda k: self._entries[k][0])
            for key in oldest[: len(oldest) // 2]:
                del self._entries[key]
