"""The `hold` fixture: a step of the served app held in the middle of a request until the test
lets it go, so two requests of the same photo overlap exactly where a loaded server lets them."""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

WAIT_S = 60.0


class Held:
    """The first call of a function, held before it runs until `release()`; later calls run at once."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        self.finished = threading.Event()
        self._lock = threading.Lock()
        self._taken = False

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """`function`, whose first call waits for `release()` (its later calls do not)."""
        def held(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                first, self._taken = not self._taken, True
            if not first:
                return function(*args, **kwargs)
            self.entered.set()
            self.released.wait(WAIT_S)
            try:
                return function(*args, **kwargs)
            finally:
                self.finished.set()
        return held

    def release(self) -> None:
        """Let the held call go on."""
        self.released.set()

    def wait_until_done(self) -> None:
        """Let the held call go on and wait until it returned (or raised)."""
        self.release()
        if self.entered.is_set():
            assert self.finished.wait(WAIT_S), "the held request did not finish"


@pytest.fixture
def hold(monkeypatch) -> Iterator[Callable[[Any, str], Held]]:
    """hold(owner, name): hold the first call of owner.name in the app until it is released;
    every hold is released, and its call waited for, when the test ends."""
    holds: list[Held] = []

    def start(owner: Any, name: str) -> Held:
        held = Held()
        monkeypatch.setattr(owner, name, held.wrap(getattr(owner, name)))
        holds.append(held)
        return held

    try:
        yield start
    finally:
        for held in holds:
            held.wait_until_done()
