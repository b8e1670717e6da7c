"""The image pool's turns between companies and links, its failures one image at a time, and
its workers ending with the server process."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from services.files import image_pool
from services.files.photos import ImageRejected

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = image_pool.PoolSettings(2, 5, 512 * 1024 ** 2)


def die(_raw: bytes) -> None:
    """A worker the kernel ends in the middle of an image."""
    os.kill(os.getpid(), signal.SIGKILL)


def echo_length(raw: bytes) -> int:
    """A well-behaved piece of image work."""
    return len(raw)


def worker_pid(_raw: bytes) -> int:
    """The worker's own process id."""
    return os.getpid()


def hang(_raw: bytes) -> None:
    """An image whose decoding blocks without using CPU: only the worker's watch can end it."""
    signal.pause()


def test_companies_and_links_take_turns_in_the_queue():
    queue = image_pool._FairQueue()
    jobs = {}
    for owner, name in [(("a", "1"), "a1-1"), (("a", "1"), "a1-2"), (("a", "1"), "a1-3"),
                        (("a", "2"), "a2-1"), (("b", "1"), "b1-1"), (("c", "1"), "c1-1"),
                        (("b", "1"), "b1-2")]:
        jobs[name] = image_pool._Job((echo_length, (b"",), {}), 1, time.monotonic() + 60)
        queue.put(owner, jobs[name])
    names = {id(job): name for name, job in jobs.items()}
    order = [names[id(queue.get())] for _ in range(len(jobs))]
    # A flood from company a (three images through link 1) waits its turn with b and c.
    assert order == ["a1-1", "b1-1", "c1-1", "a2-1", "b1-2", "a1-2", "a1-3"]
    assert queue.close() == [] and queue.get() is None


def test_a_newcomer_takes_the_next_free_worker_before_a_busy_company():
    """Company a holds both workers; when one frees up, b's job goes first, not a's next."""
    queue = image_pool._FairQueue()
    jobs = [image_pool._Job((echo_length, (b"",), {}), 1, time.monotonic() + 60) for _ in range(4)]
    for job in jobs[:3]:
        queue.put(("a", "1"), job)
    first, _second = queue.get(), queue.get()  # both workers on company a
    queue.put(("b", "1"), jobs[3])
    queue.done(first)
    assert queue.get() is jobs[3]


def test_a_worker_that_dies_fails_only_its_own_image():
    results = image_pool.run_all([(echo_length, (b"abc",), {}), (die, (b"x",), {}),
                                  (echo_length, (b"ab",), {}), (echo_length, (b"a",), {})],
                                 SETTINGS, budget_s=30)
    assert results[0] == 3 and results[2:] == [2, 1]
    assert isinstance(results[1], ImageRejected)
    # Another request in flight meanwhile is not touched, and the pool is whole again.
    assert image_pool.run_all([(echo_length, (b"abcd",), {})], SETTINGS, budget_s=30) == [4]


WITH_A_POOL = """
import sys, time
from services.files import image_pool
from tests.test_fair_pool import SETTINGS, worker_pid
from tests.test_fair_pool import hang
pids = image_pool.run_all([(worker_pid, (b"",), {})] * 4, SETTINGS, budget_s=60)
print(" ".join(str(p) for p in set(pids)), flush=True)
image_pool.run_all([(hang, (b"",), {})] * 2, SETTINGS, budget_s=3600)  # both workers busy
"""


def _busy(pid: int) -> bool:
    """Whether a worker sits in signal.pause() (the hanging image), not waiting on its pipe."""
    return "pause" in Path(f"/proc/{pid}/wchan").read_text()


def _alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_workers_end_with_a_server_process_killed_with_sigkill():
    server = subprocess.Popen([sys.executable, "-c", WITH_A_POOL], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        workers = [int(pid) for pid in server.stdout.readline().split()]
        assert workers and all(_alive(pid) for pid in workers)
        give_up = time.monotonic() + 10  # bounded: until both workers are in the hanging image
        while time.monotonic() < give_up and not all(_busy(pid) for pid in workers):
            time.sleep(0.05)
        assert all(_busy(pid) for pid in workers)
        fork_server = int(Path(f"/proc/{workers[0]}/stat").read_text().split(") ", 1)[1].split()[1])
        workers.append(fork_server)  # the process the workers were forked from goes too
        server.kill()
        server.wait(timeout=10)
        give_up = time.monotonic() + 10  # bounded: the workers notice within moments
        while any(_alive(pid) for pid in workers) and time.monotonic() < give_up:
            time.sleep(0.05)
        assert not [pid for pid in workers if _alive(pid)]
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)
        server.stdout.close()
