"""Serve the app with waitress under the service's limits: `python -m server HOST PORT THREADS`.

The one entry point both `make run` (bin/serve) and the systemd unit (deploy/) start; it serves
webapp.py's app, without the `flask` commands app.py adds.
"""
from __future__ import annotations

import sys

from services.platform.serving import make_server, serve
from webapp import create_web_app


def main(argv: list[str]) -> None:
    """Serve the app on HOST PORT with THREADS threads until SIGTERM, finishing requests in flight."""
    host, port, threads = argv[0], int(argv[1]), int(argv[2])
    app = create_web_app()
    serve(make_server(app, host, port, threads), float(app.config["SHUTDOWN_GRACE_S"]))


if __name__ == "__main__":
    main(sys.argv[1:])
