"""Static files under addresses that change with their content.

Every `url_for('static', ...)` carries `v`, a digest of the file's bytes. A page then never
runs an older copy of its own script (the capture pages' service worker keeps copies by
address), and an answer for an address with the file's current digest may be kept for a
year without asking again, which spares a crew on one bar a round trip per file on every
visit. An address without `v`, or with an old one, is answered as before: revalidated.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any

from flask import Flask, Response, current_app, request, url_for
from werkzeug.security import safe_join

YEAR_S = 365 * 24 * 3600


def init_app(app: Flask) -> None:
    """Add `v` to static URLs, and let answers for the current `v` be kept for a year."""
    app.url_defaults(_add_version)
    app.after_request(_keep_current_version)


def file_digest(filename: str) -> str | None:
    """The first 16 hex digits of the SHA-256 of a static file, or None when there is no such file."""
    path = safe_join(current_app.static_folder, filename)
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()[:16]
    except OSError:
        return None


def _add_version(endpoint: str, values: dict[str, Any]) -> None:
    """Give a static file's URL the digest of the file as it is now."""
    if endpoint == "static" and "filename" in values and "v" not in values:
        digest = file_digest(values["filename"])
        if digest is not None:
            values["v"] = digest


def _keep_current_version(response: Response) -> Response:
    """Let a static answer be kept for a year when its address names the file as it is now,
    without the headers such an answer never uses (a file name, a date to check it by)."""
    if (request.endpoint == "static" and response.status_code in (200, 304)
            and request.args.get("v")
            and request.args["v"] == file_digest((request.view_args or {}).get("filename", ""))):
        response.cache_control.no_cache = None
        response.cache_control.public = True
        response.cache_control.max_age = YEAR_S
        response.cache_control.immutable = True
        # (some 100 bytes a file that a phone on one bar would otherwise pay for each)
        response.headers.pop("Content-Disposition", None)
        response.headers.pop("Last-Modified", None)
    return response


_IMPORTS = re.compile(r"importScripts\(([^)]*)\)")
_STATIC_ADDRESS = re.compile(r"([\"'])/static/([^\"'?]+)\1")


def with_versioned_imports(script: str) -> str:
    """A worker's script with each static file it imports at its versioned address."""
    def versioned(imports: re.Match) -> str:
        """One importScripts call, each address given its digest."""
        return _STATIC_ADDRESS.sub(
            lambda address: address.group(1) + url_for("static", filename=address.group(2))
            + address.group(1), imports.group(0))
    return _IMPORTS.sub(versioned, script)
