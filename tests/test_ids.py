"""Record ids: random version 4 UUIDs, fetched from the OS in bulk, never handed out twice."""
from __future__ import annotations

import os
import threading
import uuid

import pytest

from services import ids


@pytest.fixture
def urandom_calls(monkeypatch):
    """Count the module's calls to os.urandom (which still supplies the bytes)."""
    calls = []
    real = os.urandom

    def counted(size: int) -> bytes:
        calls.append(size)
        return real(size)

    ids._ready.clear()
    monkeypatch.setattr(ids.os, "urandom", counted)
    return calls


def test_ids_are_distinct_version_4_uuids_across_refills(urandom_calls):
    drawn = [ids.new_id() for _ in range(3 * ids.BATCH + 5)]
    assert len(set(drawn)) == len(drawn)
    for text in drawn:
        parsed = uuid.UUID(text)
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
        assert str(parsed) == text


def test_one_system_call_fetches_a_whole_batch(urandom_calls):
    for _ in range(3 * ids.BATCH):
        ids.new_id()
    assert urandom_calls == [16 * ids.BATCH] * 3


def test_threads_drawing_at_once_never_share_an_id(urandom_calls):
    per_thread, drawn = 2_000, []
    start = threading.Barrier(8)

    def draw() -> None:
        start.wait()
        mine = [ids.new_id() for _ in range(per_thread)]
        drawn.extend(mine)

    threads = [threading.Thread(target=draw) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(drawn) == 8 * per_thread
    assert len(set(drawn)) == len(drawn)


def test_a_forked_worker_does_not_reuse_the_parents_fetched_ids(urandom_calls):
    ids.new_id()  # the parent now holds BATCH - 1 fetched ids
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked process
        try:
            os.write(writer, ids.new_id().encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as pipe:
        child_id = pipe.read()
    os.waitpid(child, 0)
    parents_next = [ids.new_id() for _ in range(ids.BATCH)]
    assert uuid.UUID(child_id).version == 4
    assert child_id not in parents_next
