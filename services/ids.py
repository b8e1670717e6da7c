"""Random record ids (version 4 UUIDs) drawn from the operating system in bulk.

`uuid.uuid4()` asks the kernel for 16 bytes on every call, and that system call lets
go of the interpreter lock: under load each new ticket then waits its turn to take the
lock back. Here one call fetches the bytes of many ids at once, so an id costs the same
randomness (os.urandom, nothing guessable) without a system call of its own.
"""
from __future__ import annotations

import collections
import os
import uuid

# Ids fetched per system call: a 4 KB read.
BATCH = 256

# 16 random bytes per id not handed out yet.
_ready: collections.deque[bytes] = collections.deque()


def new_id() -> str:
    """A fresh random UUID in its canonical text form."""
    while True:
        try:
            # popleft is atomic, so two threads never take the same bytes.
            return str(uuid.UUID(bytes=_ready.popleft(), version=4))
        except IndexError:
            _refill()


def _refill() -> None:
    """Fetch the bytes of a batch of ids in one system call."""
    data = os.urandom(16 * BATCH)
    _ready.extend(data[start:start + 16] for start in range(0, len(data), 16))


def _forget_after_fork() -> None:
    """Drop ids fetched before a fork, so parent and child never hand out the same one."""
    _ready.clear()


os.register_at_fork(after_in_child=_forget_after_fork)
