"""Serve the app with waitress under the service's limits: `python -m server HOST PORT THREADS`.

The one entry point both `make run` (bin/serve) and the systemd unit (deploy/) start; it serves
webapp.py's app, without the `flask` commands app.py adds.
"""
from __future__ import annotations

import sys

from services.platform.serving import make_server, serve


def main(argv: list[str]) -> None:
    """Serve the app on HOST PORT with THREADS threads until SIGTERM, finishing requests in flight."""
    host, port, threads = argv[0], int(argv[1]), int(argv[2])
    app = create_web_app()
    serve(make_server(app, host, port, threads), float(app.config["SHUTDOWN_GRACE_S"]))


if __name__ == "__main__":
    # Only when run: each image worker process imports this module again (as __mp_main__),
    # and would load the whole app with it (1 s and some 70 MB a worker).
    from webapp import create_web_app

    main(sys.argv[1:])
