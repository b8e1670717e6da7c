"""The one server the service runs under (`make run` and deploy/): waitress, with per-address and
pace limits on connections and a graceful stop.

waitress reads headers and bodies in its one I/O loop (bodies past 512 KiB go to a temporary
file), and hands a request to one of its threads only once it has arrived whole, so a client
that sends slowly holds a connection, never a thread. On top of waitress's own connection
limit and idle timeout this adds, in waitress's accept path and channel hooks rather than a
pool of its own:

- at most `SERVER_CONNECTIONS_PER_ADDRESS` open connections per client address (behind a
  trusted proxy, the address its `X-Forwarded-For` names), so no address can take the
  connection limit for itself;
- deadlines for a request's headers and its whole body, and a least pace for a body
  (`REQUEST_BODY_MIN_BYTES_S` averaged over `REQUEST_BODY_RATE_WINDOW_S`), checked each second;
- on SIGTERM: no new connection is taken, requests in flight are finished (within
  `SHUTDOWN_GRACE_S`), then the server stops; systemd hears READY and STOPPING.

The entry point that builds the app and runs this is `server.py` at the top of the code.
"""
from __future__ import annotations

import ctypes
import ipaddress
import os
import resource
import signal
import socket
import struct
import threading
import time

from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

MAX_HEADER_BYTES = 64 * 1024
M_ARENA_MAX = -8  # glibc's mallopt parameter for the most arenas malloc keeps (malloc.h)


def forwarded_client(header: str, proxies: int) -> str | None:
    """The client address the trusted proxies put in X-Forwarded-For (the `proxies`-th from the right)."""
    hops = [hop.strip() for hop in header.split(",") if hop.strip()]
    if len(hops) < proxies:
        return None
    try:
        return str(ipaddress.ip_address(hops[-proxies]))
    except ValueError:
        return None


class LimitedChannel(HTTPChannel):
    """waitress's HTTP channel, counted against its client's address and timed while a body arrives."""

    client = ""
    counted = False

    def __init__(self, server, sock, addr, adj, map=None) -> None:
        self.client = addr[0] if isinstance(addr, tuple) else str(addr)
        self.from_proxy = server.is_proxy(self.client)
        self.bytes_in = 0
        self.body_mark: tuple[float, int] | None = None  # (when, bytes_in) at the window's start
        self.request_started: float | None = None
        super().__init__(server, sock, addr, adj, map=map)

    def add_channel(self, map=None) -> None:
        """Register the channel, counting it for its address."""
        super().add_channel(map)
        if not self.counted:
            self.counted = True
            self.server.count(self.client, +1)

    def del_channel(self, map=None) -> None:
        """Unregister the channel, no longer counting it for its address."""
        super().del_channel(map)
        if self.counted:
            self.counted = False
            self.server.count(self.client, -1)

    def received(self, data) -> bool:
        """Parse what arrived; behind the proxy, count the connection for the forwarded client."""
        self.bytes_in += len(data)
        parser = self.request
        done = super().received(data)
        if self.from_proxy and self.server.proxies:
            parsed = self.request if self.request is not None else (
                self.requests[-1] if self.requests else parser)
            if parsed is not None and parsed.headers_finished:
                self.rekey(forwarded_client(parsed.headers.get("X_FORWARDED_FOR", ""),
                                            self.server.proxies) or self.client)
        return done

    def rekey(self, client: str) -> None:
        """Count this connection for `client` from now on; close it if that address has its fill."""
        if client == self.client:
            return
        if self.counted:
            self.server.count(self.client, -1)
            self.server.count(client, +1)
        self.client = client
        if self.server.connections_of(client) > self.server.per_address:
            self.will_close = True


class LimitedServer(TcpWSGIServer):
    """waitress's TCP server with per-address connection limits, deadlines and a least body pace."""

    channel_class = LimitedChannel
    header_deadline_s = 10.0
    body_deadline_s = 300.0
    body_min_bytes_s = 1024.0
    body_window_s = 20.0
    per_address = 64
    proxies = 0
    proxy_addresses: frozenset[str] = frozenset({"127.0.0.1", "::1"})

    def __init__(self, *args, **kwargs) -> None:
        self.per_client: dict[str, int] = {}
        self.count_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def is_proxy(self, address: str) -> bool:
        """Whether connections from `address` come through a trusted proxy."""
        return bool(self.proxies) and address in self.proxy_addresses

    def count(self, client: str, step: int) -> None:
        """Add `step` to the open connections counted for `client`."""
        with self.count_lock:
            left = self.per_client.get(client, 0) + step
            if left > 0:
                self.per_client[client] = left
            else:
                self.per_client.pop(client, None)

    def connections_of(self, client: str) -> int:
        """How many open connections are counted for `client`."""
        return self.per_client.get(client, 0)

    def accept(self):
        """waitress's accept, hanging up at once on an address that has its fill of connections."""
        accepted = super().accept()
        if accepted is None:
            return None
        conn, addr = accepted
        client = addr[0] if isinstance(addr, tuple) else str(addr)
        if not self.is_proxy(client) and self.connections_of(client) >= self.per_address:
            try:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset
            except OSError:
                pass
            conn.close()
            return None
        return accepted

    def maintenance(self, now: float) -> None:
        """waitress's idle sweep, then: close each connection whose request is overdue or too slow."""
        super().maintenance(now)
        for channel in list(self.active_channels.values()):
            parser = channel.request  # the request being read; None between requests
            if parser is None or channel.requests:
                channel.request_started = channel.body_mark = None
                continue
            if channel.request_started is None:
                channel.request_started = now
            if not parser.headers_finished:
                if now - channel.request_started > self.header_deadline_s:
                    channel.will_close = True
                continue
            if now - channel.request_started > self.body_deadline_s:
                channel.will_close = True
                continue
            if channel.body_mark is None:
                channel.body_mark = (now, channel.bytes_in)
                continue
            since, mark = channel.body_mark
            if now - since >= self.body_window_s:
                if (channel.bytes_in - mark) / (now - since) < self.body_min_bytes_s:
                    channel.will_close = True
                else:
                    channel.body_mark = (now, channel.bytes_in)

    def stop_accepting(self) -> None:
        """Close the listening socket: no new connection is taken; those open go on."""
        self.accepting = False
        wasyncore.dispatcher.close(self)

    def busy_channels(self) -> list:
        """Connections with a request being read, queued, served or its answer being sent."""
        return [channel for channel in self.active_channels.values()
                if channel.requests or channel.total_outbufs_len
                or (channel.request is not None and not channel.request.empty)]

    def drain(self, grace_s: float) -> None:
        """Finish the requests in flight (at most `grace_s`), closing connections as they idle."""
        give_up = time.monotonic() + grace_s
        while time.monotonic() < give_up:
            busy = self.busy_channels()
            for channel in list(self.active_channels.values()):
                if channel not in busy:
                    channel.will_close = True
            if not busy and not self.active_channels:
                break
            self.maintenance(time.time())
            wasyncore.loop(timeout=0.1, map=self._map, use_poll=self.adj.asyncore_use_poll, count=1)


def raise_open_file_limit(wanted: int) -> int:
    """Raise this process's open-file soft limit towards `wanted` (within the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


def limit_malloc_arenas(arenas: int) -> bool:
    """Have glibc's malloc share at most `arenas` arenas among this process's threads (0: its
    own default); False where the C library has no such setting.

    glibc gives threads arenas of their own, up to eight a core, and an arena keeps what its
    thread freed: after the bench's load runs the eight server threads' arenas held 5-9 MB more
    than two shared ones. Requests hold the GIL while they allocate, so sharing costs no wait.
    """
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    return bool(arenas and mallopt is not None and mallopt(M_ARENA_MAX, arenas) == 1)


def make_server(app, host: str, port: int, threads: int) -> LimitedServer:
    """A waitress server for the app on host:port, with the app's deadlines and limits."""
    config = app.config
    limit_malloc_arenas(int(config["SERVER_MALLOC_ARENAS"]))  # before its threads start
    files = raise_open_file_limit(int(config["SERVER_CONNECTION_LIMIT"]) * 2 + 64)
    adjustments = Adjustments(
        host=host, port=port, threads=threads, ident="",
        # poll(), not select(): more than 1,024 descriptors.
        asyncore_use_poll=True, connection_limit=min(int(config["SERVER_CONNECTION_LIMIT"]),
                                                     max(16, (files - 64) // 2)),
        channel_timeout=int(config["REQUEST_IDLE_S"]), cleanup_interval=1,
        max_request_header_size=MAX_HEADER_BYTES,
        max_request_body_size=int(config["MAX_CONTENT_LENGTH"]),
        # No access log (the app writes its own line, without capture links' paths); a client
        # that hangs up is not an error worth a line.
        log_socket_errors=False, expose_tracebacks=False)
    dispatcher = ThreadedTaskDispatcher()
    dispatcher.set_thread_count(threads)
    server = LimitedServer(app, {}, True, None, dispatcher=dispatcher, adj=adjustments,
                           sockinfo=adjustments.listen[0])
    server.header_deadline_s = float(config["REQUEST_HEADER_DEADLINE_S"])
    server.body_deadline_s = float(config["REQUEST_BODY_DEADLINE_S"])
    server.body_min_bytes_s = float(config["REQUEST_BODY_MIN_BYTES_S"])
    server.body_window_s = float(config["REQUEST_BODY_RATE_WINDOW_S"])
    server.per_address = int(config["SERVER_CONNECTIONS_PER_ADDRESS"])
    server.proxies = int(config["TRUSTED_PROXIES"])
    server.proxy_addresses = frozenset(str(ipaddress.ip_address(a)) for a in config["PROXY_ADDRESSES"])
    return server


def notify_systemd(state: str) -> None:
    """Tell systemd (Type=notify) the server's state, when it runs under systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.sendto(state.encode(), address)
        except OSError:
            pass


def serve(server: LimitedServer, grace_s: float) -> None:
    """Run the server until SIGTERM or SIGINT, then finish the requests in flight and stop."""
    stopping = threading.Event()

    def stop(_signum, _frame) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    notify_systemd("READY=1")
    try:
        while not stopping.is_set():
            wasyncore.loop(timeout=0.5, map=server._map, use_poll=server.adj.asyncore_use_poll, count=1)
        notify_systemd("STOPPING=1")
        server.stop_accepting()
        server.drain(grace_s)
    finally:
        for channel in list(server.active_channels.values()):
            channel.handle_close()
        server.task_dispatcher.shutdown(timeout=1)
        server.trigger.close()
