"""A real SMTP server (aiosmtpd) on a free loopback port, keeping every message it receives."""
from __future__ import annotations

import asyncio
import contextlib
import email
import email.policy
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage

from aiosmtpd.smtp import SMTP


@dataclass
class Mailbox:
    """The server's port and the messages it received, in order."""

    port: int = 0
    messages: list[EmailMessage] = field(default_factory=list)
    hold: threading.Event | None = None  # while set to an unset event, a message is not taken
    received: threading.Event = field(default_factory=threading.Event)

    async def handle_DATA(self, server, session, envelope) -> str:  # aiosmtpd's name
        """Keep a received message (once `hold`, if any, is released)."""
        if self.hold is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.hold.wait, 30)
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        self.received.set()
        return "250 OK"

    def settings(self) -> dict:
        """The app's MAIL_* settings that send through this server."""
        return {"MAIL_SERVER": "127.0.0.1", "MAIL_PORT": self.port,
                "MAIL_FROM": "tickets@acme.example", "MAIL_TIMEOUT_S": 5}


@contextlib.contextmanager
def smtp_server() -> Iterator[Mailbox]:
    """Serve SMTP on 127.0.0.1 at a port the system picks, in a thread of its own."""
    mailbox = Mailbox()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict = {}

    def run() -> None:
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(loop.create_server(
            lambda: SMTP(mailbox, hostname="127.0.0.1"), "127.0.0.1", 0))
        holder["server"] = server
        mailbox.port = server.sockets[0].getsockname()[1]
        started.set()
        loop.run_forever()
        server.close()
        # A client still in its session (a message sent after a page's answer) finishes it.
        sessions = asyncio.all_tasks(loop)
        if sessions:
            _done, unfinished = loop.run_until_complete(asyncio.wait(sessions, timeout=5))
            for task in unfinished:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*unfinished, return_exceptions=True))
        loop.run_until_complete(server.wait_closed())
        loop.close()

    thread = threading.Thread(target=run, name="smtp-server", daemon=True)
    thread.start()
    assert started.wait(10), "the SMTP server did not start"
    try:
        yield mailbox
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
