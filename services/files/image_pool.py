"""Decode untrusted images in a few worker processes with hard limits, fairly between tenants.

A crafted image can cost seconds of CPU and hundreds of megabytes while Pillow decodes it,
inside C code no thread can interrupt. So decoding (and PDF rendering) happens in separate
processes:

- at most `IMAGE_WORKERS` at once across the whole server (default 2), so image work can
  never take every thread or core from the pages and /healthz;
- work waits in one queue per company and, within it, per link (or key): the workers take
  the companies in turn, and each company's links in turn, so one company's flood delays
  another's photo by at most the images already being decoded;
- each image gets `IMAGE_CPU_SECONDS` of CPU: the worker's RLIMIT_CPU soft limit is set
  just above what it has used so far, and the kernel ends the worker when it is passed;
- each worker's address space is capped at `IMAGE_MEMORY_BYTES` (RLIMIT_AS), so an
  allocation past it fails inside the worker instead of growing the server;
- a request waits at most `IMAGE_REQUEST_BUDGET_S` for all its images together, and at most
  `IMAGE_COMPANY_REQUESTS` requests of one company wait at once, so a flood cannot take every
  server thread either; when the pool is saturated (a request over that share, or an image
  not done by the deadline though within its CPU limit) the request is answered 503 with
  Retry-After (`ImagesBusy`): a busy host is not a bad photo.

Each worker is its own process on its own pipe: one the kernel ended, or one past its
image's deadline, fails only that image and is replaced. A worker ends with the server
process (a pidfd watch, and PR_SET_PDEATHSIG for the fork server it came from), so a kill -9
leaves none behind. Workers come from a fork server, not from the threaded server process
itself, and are replaced after `CALLS_PER_POOL` calls, so none lives on with whatever a
long run of images left in its memory.
"""
from __future__ import annotations

import collections
import concurrent.futures as cf
import contextlib
import ctypes
import multiprocessing
import os
import resource
import select
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from services.files.photos import ImageRejected
from services.platform.errors import ServiceError

__all__ = ["ImagesBusy", "PoolSettings", "run_all"]

TOO_SLOW = "takes too long to read (past its CPU limit)"
TOO_BIG = "needs too much memory to read"
Owner = tuple[str, str]
ANONYMOUS: Owner = ("", "")


class ImagesBusy(ServiceError):
    """The image pool is saturated: nothing was stored; send the same request again later."""

    status = 503
    code = "images_busy"

    def __init__(self) -> None:
        super().__init__("the server is busy reading other images; nothing was kept, send it again "
                         "after the seconds in Retry-After", headers={"Retry-After": "5"})


class _Busy:
    """What a job gets when the pool could not do it in time (not the image's fault)."""


BUSY = _Busy()


class PoolSettings(tuple):
    """(workers, cpu_seconds, memory_bytes): the pool is rebuilt when these change."""

    def __new__(cls, workers: int, cpu_seconds: int, memory_bytes: int) -> PoolSettings:
        """Keep the three numbers."""
        return super().__new__(cls, (int(workers), int(cpu_seconds), int(memory_bytes)))


# A worker is replaced by a fresh process after this many calls.
CALLS_PER_POOL = 400
PR_SET_PDEATHSIG = 1


def _die_with(parent_pid: int) -> None:
    """In a worker: end when the server process ends, however it ends (kill -9 included)."""
    try:  # the fork server is our parent: its death (it follows the server's) kills us too
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    try:
        pidfd = os.pidfd_open(parent_pid)
    except ProcessLookupError:
        os._exit(1)

    def watch() -> None:
        """Block until the server process is gone, then leave at once."""
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.poll()
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


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


def _worker_main(connection, memory_bytes: int, parent_pid: int) -> None:
    """A worker's loop: take one call from the pipe, answer ("ok"|"error", value), repeat."""
    _die_with(parent_pid)
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    while True:
        try:
            cpu, function, args, kwargs = connection.recv()
        except (EOFError, OSError):
            return
        try:
            answer = ("ok", _limited_call(cpu, function, args, kwargs))
        except MemoryError:
            answer = ("error", ImageRejected(TOO_BIG))
        except Exception as error:  # noqa: BLE001 - handed back to the caller as it was raised
            answer = ("error", error)
        connection.send(answer)


class _Job:
    """One call waiting for a worker, with its deadline and the future its caller waits on."""

    __slots__ = ("call", "cpu", "deadline", "future", "company")

    def __init__(self, call: tuple, cpu: int, deadline: float) -> None:
        self.call, self.cpu, self.deadline = call, cpu, deadline
        self.future: cf.Future = cf.Future()
        self.company = ""


class _FairQueue:
    """Jobs queued per company and per link within it, handed out in turn (round robin); a
    company with fewer jobs already running goes first, so a newcomer takes the next free
    worker rather than waiting for a company that holds the others."""

    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._companies: collections.OrderedDict[str, collections.OrderedDict[str, collections.deque]] = \
            collections.OrderedDict()
        self._running: collections.Counter = collections.Counter()
        self._closed = False

    def put(self, owner: Owner, job: _Job) -> None:
        """Queue a job behind its own company's and link's earlier ones."""
        company, link = owner
        job.company = company
        with self._ready:
            self._companies.setdefault(company, collections.OrderedDict()) \
                .setdefault(link, collections.deque()).append(job)
            self._ready.notify()

    def get(self) -> _Job | None:
        """The next company's next link's oldest job (None once closed)."""
        with self._ready:
            while not self._companies and not self._closed:
                self._ready.wait()
            if self._closed:
                return None
            company = min(self._companies, key=lambda name: self._running[name])  # first of the least busy
            links = self._companies.pop(company)
            self._running[company] += 1
            link, jobs = links.popitem(last=False)
            job = jobs.popleft()
            if jobs:
                links[link] = jobs  # this link goes to the back of its company's turn
            if links:
                self._companies[company] = links  # and the company to the back of the queue
            return job

    def done(self, job: _Job) -> None:
        """A job handed out has finished: its company has one job fewer running."""
        with self._ready:
            self._running[job.company] -= 1
            if self._running[job.company] <= 0:
                del self._running[job.company]

    def close(self) -> list[_Job]:
        """Stop handing out jobs; the ones still queued are returned."""
        with self._ready:
            self._closed = True
            left = [job for links in self._companies.values() for jobs in links.values() for job in jobs]
            self._companies.clear()
            self._ready.notify_all()
            return left


class _Worker:
    """One worker process and the server's end of its pipe."""

    def __init__(self, context, memory_bytes: int) -> None:
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, memory_bytes, os.getpid()),
                                       daemon=True, name="ewt-image-worker")
        self.process.start()
        child.close()
        self.calls = 0

    def stop(self, kill: bool = False) -> None:
        """End the process (at once when `kill`), and close the pipe."""
        if kill and self.process.is_alive():
            self.process.kill()
        self.connection.close()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)


class _Pool:
    """The fair queue and one dispatching thread per worker process."""

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self.queue = _FairQueue()
        self.context = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload(["services.files.photos"])
        self.threads = [threading.Thread(target=self._dispatch, daemon=True, name=f"image-pool-{n}")
                        for n in range(max(1, settings[0]))]
        for thread in self.threads:
            thread.start()

    def _dispatch(self) -> None:
        """Hand jobs to this thread's worker, one at a time; replace the worker when it fails."""
        worker: _Worker | None = None
        try:
            while (job := self.queue.get()) is not None:
                if time.monotonic() >= job.deadline or not job.future.set_running_or_notify_cancel():
                    if not job.future.done() and not job.future.cancelled():
                        job.future.set_result(BUSY)
                    self.queue.done(job)
                    continue
                try:
                    if worker is None or worker.calls >= CALLS_PER_POOL or not worker.process.is_alive():
                        if worker is not None:
                            worker.stop()
                        worker = _Worker(self.context, self.settings[2])
                    worker.calls += 1
                    outcome, worker_ok = self._run(worker, job)
                finally:
                    self.queue.done(job)
                if not worker_ok:
                    worker.stop(kill=True)
                    worker = None
                if isinstance(outcome, BaseException) and not isinstance(outcome, ImageRejected):
                    job.future.set_exception(outcome)
                else:
                    job.future.set_result(outcome)
        finally:
            if worker is not None:
                worker.stop()

    @staticmethod
    def _run(worker: _Worker, job: _Job) -> tuple[Any, bool]:
        """Send one job to a worker and wait for it until its deadline: (outcome, worker still fit)."""
        try:
            worker.connection.send((job.cpu, *job.call))
            if not worker.connection.poll(max(0.0, job.deadline - time.monotonic())):
                return BUSY, False  # past its deadline within its CPU limit: the host is busy
            kind, value = worker.connection.recv()
        except (EOFError, OSError):  # the kernel ended it (CPU limit) or it died: this image only
            return ImageRejected(TOO_SLOW), False
        return value, True

    def close(self) -> None:
        """Stop the pool: queued jobs are refused, running ones finish, workers end."""
        for job in self.queue.close():
            if job.future.set_running_or_notify_cancel():
                job.future.set_result(BUSY)


_lock = threading.Lock()
_pool: _Pool | None = None


def _get_pool(settings: PoolSettings) -> _Pool:
    """The shared pool for these settings: started on first use, and again when they change."""
    global _pool
    with _lock:
        if _pool is None or _pool.settings != settings:
            if _pool is not None:
                _pool.close()
            _pool = _Pool(settings)
        return _pool


_waiting_lock = threading.Lock()
_waiting: collections.Counter = collections.Counter()


@contextlib.contextmanager
def _company_share(company: str, most: int | None):
    """Count a request of `company` waiting on the pool; ImagesBusy past `most` at once."""
    with _waiting_lock:
        if most is not None and _waiting[company] >= most:
            raise ImagesBusy()
        _waiting[company] += 1
    try:
        yield
    finally:
        with _waiting_lock:
            _waiting[company] -= 1
            if _waiting[company] <= 0:
                del _waiting[company]


def run_all(calls: list[tuple[Callable[..., Any], tuple, dict]], settings: PoolSettings,
            budget_s: float, cpu_seconds: int | None = None, owner: Owner = ANONYMOUS,
            company_requests: int | None = None) -> list[Any]:
    """Run each (function, args, kwargs) in the pool; each result, or the ImageRejected it met.

    The whole list shares one time budget; when any call is not done by then (the pool was
    saturated, not the image at fault) ImagesBusy is raised, as it is when `company_requests`
    requests of the owner's company already wait. Each call gets the settings' CPU seconds,
    or `cpu_seconds` (a document takes longer than one image). `owner` is (company, link):
    the queue the calls wait in, taken in turn with the others.
    """
    if not calls:
        return []
    with _company_share(owner[0], company_requests):
        cpu = int(cpu_seconds or settings[1])
        deadline = time.monotonic() + max(0.0, budget_s)
        pool = _get_pool(settings)
        jobs = [_Job(call, cpu, deadline) for call in calls]
        for job in jobs:
            pool.queue.put(owner, job)
        cf.wait([job.future for job in jobs], timeout=max(0.0, deadline - time.monotonic()) + 0.5)
        results: list[Any] = []
        busy = False
        for job in jobs:
            unfinished = not job.future.done() and (job.future.cancel() or not job.future.done())
            if unfinished or job.future.cancelled():
                busy = True
                continue
            result = job.future.result()  # re-raises what the work raised, as a call would
            busy = busy or result is BUSY
            results.append(result)
    if busy:
        raise ImagesBusy()
    return results
