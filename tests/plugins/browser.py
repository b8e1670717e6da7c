"""Fixtures for real-browser tests: the app served over loopback and Debian's headless Chromium."""
from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from flask import Flask
from werkzeug.serving import ThreadedWSGIServer

CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]

SHUTDOWN_POLL_S = 0.01  # how often a served test app checks whether it was told to stop
REQUEST_DRAIN_S = 30  # how long closing a served test app waits for requests still running


@dataclass(frozen=True)
class LiveServer:
    """The app being served: its base URL and the app object."""

    url: str
    app: Flask


class DrainingServer(ThreadedWSGIServer):
    """A threaded werkzeug server whose close ends open connections and waits for their requests.

    A browser's request still running when a test ends would otherwise hand its database
    connection back after the app's engine was let go, and the connection would never be closed.
    """

    def __init__(self, app: Flask) -> None:
        super().__init__("127.0.0.1", 0, app)
        self._open: dict[socket.socket, threading.Thread] = {}
        self._open_lock = threading.Lock()

    def process_request_thread(self, request, client_address) -> None:
        """Serve one connection, remembering it until it ends."""
        with self._open_lock:
            self._open[request] = threading.current_thread()
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open.pop(request, None)

    def server_close(self) -> None:
        """Stop listening, end the open connections and wait (bounded) for their threads."""
        super().server_close()
        with self._open_lock:
            still_open = dict(self._open)
        for connection in still_open:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already gone
        deadline = time.monotonic() + REQUEST_DRAIN_S
        for thread in still_open.values():
            thread.join(timeout=max(0.0, deadline - time.monotonic()))


@pytest.fixture
def live_server(app) -> Iterator[LiveServer]:
    """The test's app on a free loopback port, served by a threaded werkzeug server."""
    server = DrainingServer(app)
    app.config["PUBLIC_BASE_URL"] = f"http://127.0.0.1:{server.server_port}"
    # A short poll lets shutdown() return at once rather than after up to half a second.
    thread = threading.Thread(target=server.serve_forever, args=(SHUTDOWN_POLL_S,),
                              name="app-under-test", daemon=True)
    thread.start()
    try:
        yield LiveServer(url=app.config["PUBLIC_BASE_URL"], app=app)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def chromium():
    """Debian's Chromium driven by Playwright (browser downloads are not available here)."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail("chromium is not installed; `make test` installs it with apt-get")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def phone(chromium):
    """A phone-sized browser context (360 px wide, touch)."""
    context = chromium.new_context(viewport={"width": 360, "height": 740}, device_scale_factor=2,
                                   is_mobile=True, has_touch=True)
    yield context
    context.close()


@pytest.fixture
def phone_without_worker(chromium):
    """A phone whose page does all the sending (no service worker)."""
    context = chromium.new_context(viewport={"width": 360, "height": 740}, device_scale_factor=2,
                                   is_mobile=True, has_touch=True, service_workers="block")
    yield context
    context.close()


@pytest.fixture
def tablet(chromium):
    """A tablet-sized browser context for the review queue."""
    context = chromium.new_context(viewport={"width": 1024, "height": 768}, has_touch=True)
    yield context
    context.close()


# axe-core, installed by `make axe`; injected into pages to check their accessibility.
AXE = Path(__file__).parents[1] / "a11y" / "node_modules" / "axe-core" / "axe.min.js"


@pytest.fixture
def axe_tablet(chromium):
    """A touch tablet that takes downloads and lets axe in past the pages' Content-Security-Policy."""
    assert AXE.exists(), "axe-core is not installed; `make axe` installs it"
    context = chromium.new_context(viewport={"width": 1024, "height": 768}, has_touch=True,
                                   bypass_csp=True, accept_downloads=True)
    yield context
    context.close()


@pytest.fixture
def portrait_tablet(chromium):
    """A tablet held upright (768 x 1024, touch), the size a PM clears the queue on."""
    context = chromium.new_context(viewport={"width": 768, "height": 1024}, has_touch=True)
    yield context
    context.close()
