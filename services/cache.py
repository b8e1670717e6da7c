"""A small in-process cache with expiry, for answers read from the project system."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class TTLCache(Generic[T]):
    """Maps keys to values that expire a fixed number of seconds after they were stored."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._entries: dict[Hashable, tuple[float, T]] = {}
        self._lock = threading.Lock()
        self._max_entries = max_entries

    def get_or_load(self, key: Hashable, ttl_s: float, load: Callable[[], T]) -> T:
        """Return the cached value for key, loading and storing it when absent or expired."""
        now = time.time()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] > now:
                return entry[1]
        value = load()
        with self._lock:
            if len(self._entries) >= self._max_entries:
                self._evict_expired(now)
            self._entries[key] = (now + ttl_s, value)
        return value

    def invalidate(self, key: Hashable) -> None:
        """Forget one key."""
        with self._lock:
            self._entries.pop(key, None)

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
