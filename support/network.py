"""A phone's signal between the browser and the app: a TCP proxy that throttles, delays, cuts
and counts every byte, the page's and the service worker's alike.

The browser opens the app at the proxy's address (the app's PUBLIC_BASE_URL is set to it), so
every request of the page and of its service worker passes through it. Each direction is one
shared link of `up_bps` / `down_bps` bytes a second with `latency_s` one way; `cut()` drops
every open connection and refuses new ones (the phone has lost its signal, though it may not
know it) until `restore()`. The browser-to-app stream is read as HTTP/1.1 requests, so each
request's header and body bytes, as delivered to the app, are known (`requests`).
"""
from __future__ import annotations

import asyncio
import re
import threading
import time
from dataclasses import dataclass


@dataclass
class SeenRequest:
    """One request as the proxy delivered it: its line, and how much of it went through."""

    method: str
    path: str
    header_bytes: int
    body_length: int
    body_sent: int = 0
    started: float = 0.0
    finished: float = 0.0  # when its last body byte was delivered (0 until then)
    range_first: int = 0  # where a piece goes in its photo, from its Content-Range
    range_total: int | None = None  # a piece's photo size

    @property
    def completes(self) -> bool:
        """Whether it delivered the last byte of a photo (a whole body, or its last piece)."""
        return self.whole and self.range_first + self.body_length >= (self.range_total or 0)

    @property
    def whole(self) -> bool:
        """Whether all of its body reached the app."""
        return self.body_sent >= self.body_length


def ticket_upload(request: SeenRequest) -> bool:
    """Whether a request carries part of a capture ticket: its text, a photo (or a piece of
    one, sent with its ticket or ahead of it) or its signature."""
    return request.method in ("POST", "PUT") and ("/tickets" in request.path
                                                  or "/drafts/" in request.path)


def photo_key(request: SeenRequest) -> str | None:
    """The phone's key of the photo a request carries, if it carries one."""
    if "/photos/" not in request.path:
        return None
    return request.path.split("/photos/", 1)[1].split("?", 1)[0]


class _Link:
    """One direction's shared line: bytes go through it one after another at `rate` a second."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.free_at = 0.0

    def through_at(self, now: float, size: int) -> float:
        """When `size` bytes handed over `now` have all gone through."""
        if not self.rate:
            return now
        self.free_at = max(now, self.free_at) + size / self.rate
        return self.free_at


class _RequestReader:
    """Follows the HTTP/1.1 requests of one connection as their bytes are delivered."""

    def __init__(self, seen: list[SeenRequest], lock: threading.Lock) -> None:
        self.seen, self.lock = seen, lock
        self.head = b""
        self.current: SeenRequest | None = None

    def feed(self, data: bytes) -> None:
        """Account delivered bytes to the request they belong to."""
        while data:
            if self.current is not None and self.current.body_sent < self.current.body_length:
                take = min(len(data), self.current.body_length - self.current.body_sent)
                with self.lock:
                    self.current.body_sent += take
                    if self.current.body_sent >= self.current.body_length:
                        self.current.finished = time.monotonic()
                data = data[take:]
                continue
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data, self.head = self.head[:end + 4], self.head[end + 4:], b""
            lines = head.decode("latin-1").split("\r\n")
            method, path = (lines[0].split(" ") + ["", ""])[:2]
            fields = {name.strip().lower(): value.strip() for name, _, value in
                      (line.partition(":") for line in lines[1:])}
            length = int(fields.get("content-length") or 0)
            piece = re.fullmatch(r"bytes (\d+)-\d+/(\d+)", fields.get("content-range", ""))
            self.current = SeenRequest(method, path, len(head), length, started=time.monotonic(),
                                       range_first=int(piece.group(1)) if piece else 0,
                                       range_total=int(piece.group(2)) if piece else None)
            with self.lock:
                self.seen.append(self.current)


class ThrottlingProxy:
    """A throttling, cutting, counting TCP proxy in front of 127.0.0.1:`target_port`."""

    def __init__(self, target_port: int, *, up_bps: float | None = None,
                 down_bps: float | None = None, latency_s: float = 0.0) -> None:
        self.target_port = target_port
        self.up, self.down = _Link(up_bps), _Link(down_bps)
        self.latency_s = latency_s
        self.requests: list[SeenRequest] = []
        self.uploaded = 0
        self.downloaded = 0
        self.is_cut = False
        self._lock = threading.Lock()
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="throttling-proxy", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        self.url = f"http://127.0.0.1:{self.port}"

    def set_rates(self, up_bps: float | None, down_bps: float | None) -> None:
        """Change the signal's speed in each direction (None: as fast as loopback)."""
        self.up.rate, self.down.rate = up_bps, down_bps

    def cut(self) -> None:
        """Lose the signal: drop every open connection, refuse new ones until restore()."""
        self.is_cut = True
        done = threading.Event()

        def drop() -> None:
            for writer in list(self._writers):
                writer.transport.abort()
            done.set()
        self._loop.call_soon_threadsafe(drop)
        done.wait(5)

    def restore(self) -> None:
        """The signal is back."""
        self.is_cut = False

    def body_bytes(self, matches=lambda request: True) -> int:
        """Body bytes delivered to the app by the requests `matches` picks."""
        with self._lock:
            return sum(r.body_sent for r in self.requests if matches(r))

    def seen(self, matches=lambda request: True) -> list[SeenRequest]:
        """The requests `matches` picks, in the order they started."""
        with self._lock:
            return [r for r in self.requests if matches(r)]

    def photos(self) -> dict[str, tuple[int, int]]:
        """Each photo's body bytes delivered so far (pieces resent after a cut counted again)
        and its size, by the phone's key, in the order they started."""
        found: dict[str, tuple[int, int]] = {}
        for request in self.seen(lambda r: photo_key(r) is not None):
            sent, _ = found.get(photo_key(request), (0, 0))
            found[photo_key(request)] = (sent + request.body_sent,
                                         request.range_total or request.body_length)
        return found

    def close(self) -> None:
        """Stop serving, end every connection's work, and end the proxy's thread."""
        self.is_cut = True

        async def shut() -> None:
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shut(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def _run(self) -> None:
        """The proxy's event loop, in its own thread."""
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        """One browser connection, joined to one app connection while the signal lasts."""
        if self.is_cut:
            client_out.transport.abort()
            return
        try:
            app_in, app_out = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_out.transport.abort()
            return
        self._writers.update((client_out, app_out))
        reader = _RequestReader(self.requests, self._lock)
        try:
            await asyncio.gather(self._pump(client_in, app_out, self.up, reader.feed, True),
                                 self._pump(app_in, client_out, self.down, None, False))
        except asyncio.CancelledError:  # the proxy is closing
            pass
        finally:
            for writer in (client_out, app_out):
                self._writers.discard(writer)
                writer.transport.abort()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, link: _Link,
                    feed, upward: bool) -> None:
        """Copy one direction: each chunk waits its turn on the line and the latency, then goes."""
        queue: asyncio.Queue = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if data is None:
                    return
                await asyncio.sleep(max(0.0, due - self._loop.time()))
                sink.write(data)
                await sink.drain()
                with self._lock:
                    if upward:
                        self.uploaded += len(data)
                    else:
                        self.downloaded += len(data)
                if feed is not None:
                    feed(data)

        sender = asyncio.ensure_future(deliver())
        try:
            while True:
                size = 65536 if not link.rate else max(256, min(4096, int(link.rate / 50)))
                data = await source.read(size)
                if not data:
                    break
                done = link.through_at(self._loop.time(), len(data))
                # Reading waits for the line, so the sender's buffers fill as on a slow link.
                await asyncio.sleep(max(0.0, done - self._loop.time()))
                queue.put_nowait((done + self.latency_s, data))
        except (ConnectionError, OSError):
            pass
        finally:
            queue.put_nowait((0.0, None))
            try:
                await sender
            except (ConnectionError, OSError):
                pass
            if not sink.transport.is_closing():
                sink.transport.abort()
