"""The served test app's close waits for requests still running, so none outlives its database."""
from __future__ import annotations

import threading

import requests
from flask import Flask

from tests.plugins.browser import DrainingServer


def test_close_waits_for_a_request_still_running():
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()
    app = Flask(__name__)

    @app.get("/slow")
    def slow():
        entered.set()
        release.wait(10)
        finished.set()
        return "done"

    server = DrainingServer(app)
    serving = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    serving.start()

    def call() -> None:
        """Ask for the slow page; closing the server ends the connection before its answer."""
        try:
            requests.get(f"http://127.0.0.1:{server.server_port}/slow", timeout=10)
        except requests.ConnectionError:
            pass

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    assert entered.wait(10)
    server.shutdown()
    closing = threading.Thread(target=server.server_close)
    closing.start()
    closing.join(timeout=0.5)
    assert closing.is_alive() and not finished.is_set()  # still waiting for the request
    release.set()
    closing.join(timeout=10)
    assert not closing.is_alive() and finished.is_set()
    caller.join(timeout=10)
