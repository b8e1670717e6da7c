"""A program's webhook endpoint on loopback for tests: keeps each request, answers as told."""
from __future__ import annotations

import datetime as dt
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import time_machine
from standardwebhooks.webhooks import Webhook


class Receiver:
    """A program's endpoint on loopback: keeps every request, answers the statuses it is given
    in turn (then 200), and holds a request while `hold` is set."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.arrivals: list[dt.datetime] = []
        self.statuses: list[int] = []
        self.hold = threading.Event()
        self.location: str | None = None  # sent with each answer, as a redirect would be
        self.answer_bytes = 2
        self.written = 0  # bytes of answers the sender took in
        self.held = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if receiver.hold.is_set():
                    receiver.held.set()
                    while receiver.hold.is_set():
                        time.sleep(0.02)
                    return  # the sender is gone: no answer
                receiver.arrivals.append(dt.datetime.now(dt.timezone.utc))
                receiver.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                if receiver.location:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Length", str(receiver.answer_bytes))
                self.end_headers()
                try:
                    for _ in range(0, receiver.answer_bytes, 65536):
                        self.wfile.write(b"x" * min(65536, receiver.answer_bytes))
                        receiver.written += min(65536, receiver.answer_bytes)
                except OSError:
                    pass  # the sender stopped reading

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks?from=ewt"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self, secret: str) -> list[dict]:
        """Each request's body, verified with the Standard Webhooks library as it arrived."""
        verified = []
        for (headers, body), arrival in zip(self.requests, self.arrivals, strict=True):
            with time_machine.travel(arrival):
                verified.append(Webhook(secret).verify(body, headers))
        return verified

    def ids(self) -> list[str]:
        """The webhook-id of each request, in order."""
        return [headers["webhook-id"] for headers, _ in self.requests]

    def close(self) -> None:
        """Stop serving."""
        self.hold.clear()
        self.server.shutdown()
        self.server.server_close()
