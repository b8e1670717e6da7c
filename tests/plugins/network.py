"""The `signal` fixture: a phone's signal (support/network.py's throttling proxy) in front of
the served app."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.network import ThrottlingProxy


@pytest.fixture
def signal(app, live_server) -> Iterator[ThrottlingProxy]:
    """The phone's signal to the served app: open links at `signal.url`; cut and restore it."""
    proxy = ThrottlingProxy(int(live_server.url.rsplit(":", 1)[1]))
    app.config["PUBLIC_BASE_URL"] = proxy.url
    try:
        yield proxy
    finally:
        proxy.close()
