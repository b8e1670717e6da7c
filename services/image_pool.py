"""Decode untrusted images in a small pool of worker processes with hard limits.

A crafted image can cost seconds of CPU and hundreds of megabytes while Pillow decodes it,
inside C code no thread can interrupt. So decoding happens in separate processes:

- at most `IMAGE_WORKERS` at once across the whole server (default 2), so image work can
  never take every thread or core from the pages and /healthz;
- each image gets `IMAGE_CPU_SECONDS` of CPU: the worker's RLIMIT_CPU soft limit is set
  just above what it has used so far, and the kernel ends the worker when it is passed;
- each worker's address space is capped at `IMAGE_MEMORY_BYTES` (RLIMIT_AS), so an
  allocation past it fails inside the worker instead of growing the server;
- a request waits at most `IMAGE_REQUEST_BUDGET_S` for all its images together.

A worker the kernel ended breaks the pool; the pool is then replaced and the images of the
requests waiting on it are refused (send them again). Workers come from a fork server, not
from the threaded server process itself. After `CALLS_PER_POOL` calls the pool is replaced
by a fresh one (calls already running finish in the old workers), so no worker lives on
with whatever a long run of images left in its memory.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import resource
import threading
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from services.photos import ImageRejected

__all__ = ["PoolSettings", "run_all"]

TOO_SLOW = "took too long to read; send it again later"
TOO_BIG = "needs too much memory to read"


class PoolSettings(tuple):
    """(workers, cpu_seconds, memory_bytes): the pool is rebuilt when these change."""

    def __new__(cls, workers: int, cpu_seconds: int, memory_bytes: int) -> PoolSettings:
        """Keep the three numbers."""
        return super().__new__(cls, (int(workers), int(cpu_seconds), int(memory_bytes)))


# Fresh workers after this many calls. Not ProcessPoolExecutor's own max_tasks_per_child: on
# Python 3.11 a pool whose workers retire that way can be left with no process and never
# start another, and every image after that waits out its budget.
CALLS_PER_POOL = 400

_lock = threading.Lock()
_pool: cf.ProcessPoolExecutor | None = None
_pool_settings: PoolSettings | None = None
_pool_calls = 0


def _init_worker(memory_bytes: int) -> None:
    """In each new worker: cap its address space."""
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def _limited_call(cpu_seconds: int, function: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """Run one image's work in a worker under a CPU limit counted from now."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = used + cpu_seconds
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    try:
        return function(*args, **kwargs)
    except MemoryError:
        raise ImageRejected(TOO_BIG) from None


def _get_pool(settings: PoolSettings, calls: int) -> cf.ProcessPoolExecutor:
    """The shared pool for these settings to take `calls` more calls: started on first use,
    and again when the settings change or the pool has taken CALLS_PER_POOL calls."""
    global _pool, _pool_settings, _pool_calls
    with _lock:
        if _pool is None or _pool_settings != settings or _pool_calls + calls > CALLS_PER_POOL:
            if _pool is not None:
                _pool.shutdown(wait=False)  # what it is running finishes there
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["services.photos"])
            _pool = cf.ProcessPoolExecutor(settings[0], mp_context=context, initializer=_init_worker,
                                           initargs=(settings[2],))
            _pool_settings, _pool_calls = settings, 0
        _pool_calls += calls
        return _pool


def _discard(pool: cf.ProcessPoolExecutor) -> None:
    """Replace a broken pool on the next use."""
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    pool.shutdown(wait=False, cancel_futures=True)


def run_all(calls: list[tuple[Callable[..., Any], tuple, dict]], settings: PoolSettings,
            budget_s: float, cpu_seconds: int | None = None) -> list[Any]:
    """Run each (function, args, kwargs) in the pool; each result, or the ImageRejected it met.

    The whole list shares one time budget; what is not done by then is refused. Each call
    gets the settings' CPU seconds, or `cpu_seconds` (a document takes longer than one image).
    """
    if not calls:
        return []
    cpu = int(cpu_seconds or settings[1])
    pool = _get_pool(settings, len(calls))
    try:
        futures = [pool.submit(_limited_call, cpu, fn, args, kwargs) for fn, args, kwargs in calls]
    except (BrokenProcessPool, RuntimeError):
        _discard(pool)
        pool = _get_pool(settings, len(calls))
        futures = [pool.submit(_limited_call, cpu, fn, args, kwargs) for fn, args, kwargs in calls]
    cf.wait(futures, timeout=budget_s)
    results: list[Any] = []
    broken = False
    for future in futures:
        if not future.done():
            future.cancel()
            results.append(ImageRejected(TOO_SLOW))
            continue
        try:
            results.append(future.result())
        except ImageRejected as error:
            results.append(error)
        except BrokenProcessPool:
            broken = True
            results.append(ImageRejected(TOO_SLOW))
        except MemoryError:
            results.append(ImageRejected(TOO_BIG))
    if broken:
        _discard(pool)
    return results
