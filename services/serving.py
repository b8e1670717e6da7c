"""`make run`'s server: waitress, which reads each request whole before a thread runs the app.

waitress reads headers and bodies in its one I/O loop (bodies past 512 KiB go to a temporary
file), and hands a request to one of its threads only once it has arrived whole, so a client
that sends slowly holds a connection, never a thread. On top of waitress's idle timeout this
adds deadlines for a request's headers and for its body, checked each second, after which
the connection is closed; and it raises the open-file limit so the connection limit can be
reached. Run as `python -m services.serving HOST PORT THREADS`.
"""
from __future__ import annotations

import resource
import sys
import weakref

from waitress.adjustments import Adjustments
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

from app import create_app

MAX_HEADER_BYTES = 64 * 1024


class DeadlineServer(TcpWSGIServer):
    """waitress's TCP server, closing a connection whose request is not in by its deadline."""

    header_deadline_s = 10.0
    body_deadline_s = 300.0

    def __init__(self, *args, **kwargs) -> None:
        self._started: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        super().__init__(*args, **kwargs)

    def maintenance(self, now: float) -> None:
        """waitress's idle sweep, then: close each connection whose request is overdue."""
        super().maintenance(now)
        for channel in list(self.active_channels.values()):
            parser = channel.request  # the request being read; None between requests
            if parser is None or channel.requests:
                continue
            started = self._started.setdefault(parser, now)
            limit = self.body_deadline_s if parser.headers_finished else self.header_deadline_s
            if now - started > limit:
                channel.will_close = True


def raise_open_file_limit(wanted: int) -> int:
    """Raise this process's open-file soft limit towards `wanted` (within the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


def make_server(app, host: str, port: int, threads: int) -> DeadlineServer:
    """A waitress server for the app on host:port, with the app's deadlines and limits."""
    config = app.config
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
    server = DeadlineServer(app, {}, True, None, dispatcher=dispatcher, adj=adjustments,
                            sockinfo=adjustments.listen[0])
    server.header_deadline_s = float(config["REQUEST_HEADER_DEADLINE_S"])
    server.body_deadline_s = float(config["REQUEST_BODY_DEADLINE_S"])
    return server


def main(argv: list[str]) -> None:
    """Serve the app on HOST PORT with THREADS threads until stopped."""
    host, port, threads = argv[0], int(argv[1]), int(argv[2])
    server = make_server(create_app(), host, port, threads)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main(sys.argv[1:])
