"""Compressed answers for what a phone downloads: pages, styles and scripts.

The server sends bodies as they are, and a crew opens the capture page on one bar of
signal, so text answers are compressed here when the browser accepts it: Brotli when
the `brotli` package is installed and asked for, else gzip. Static files (and scripts
with an ETag, such as the service worker) are compressed once at the highest level and
kept in memory, keyed by their ETag (which changes with the file); a script is minified
first, with `rjsmin` (comments and spacing only; licence comments kept). Pages are
compressed per answer at a fast level. JSON API answers are left alone.
"""
from __future__ import annotations

import gzip
import threading

import rjsmin
from flask import Flask, Response, request

try:
    import brotli
except ImportError:  # gzip alone still does most of the work
    brotli = None

COMPRESSIBLE = frozenset({"text/html", "text/css", "text/javascript", "application/javascript",
                          "image/svg+xml"})
SCRIPTS = frozenset({"text/javascript", "application/javascript"})
MIN_BYTES = 512
MAX_CACHED = 256  # static files, per encoding; far more than the app ships
_static_cache: dict[tuple[str, str], bytes] = {}
_static_lock = threading.Lock()


def init_app(app: Flask) -> None:
    """Compress page answers after every other after-request hook has run (register it first)."""
    app.after_request(compress_response)


def _encoding() -> str | None:
    """The best encoding this request accepts: br, then gzip, else None."""
    accepted = request.accept_encodings
    if brotli is not None and accepted["br"] > 0:
        return "br"
    if accepted["gzip"] > 0:
        return "gzip"
    return None


def window_bits(size: int) -> int:
    """Brotli's window for `size` bytes: the least that holds them whole (16 to 22 bits).

    Its default, 22 bits, has every page answer allocate buffers of several MB, which each
    server thread's malloc arena then keeps: 15-20 MB of a worker's memory after the queue's
    load runs; a window just over the page compresses it as small.
    """
    return max(16, min(22, (size + 15).bit_length()))


def _compress(data: bytes, encoding: str, *, best: bool) -> bytes:
    """Compress with the chosen encoding; `best` spends more time for a smaller result."""
    if encoding == "br":
        return brotli.compress(data, quality=11 if best else 5, lgwin=window_bits(len(data)))
    return gzip.compress(data, compresslevel=9 if best else 6, mtime=0)


def _minified(data: bytes) -> bytes:
    """A script without its comments and spare whitespace; licence (/*!) comments kept."""
    return rjsmin.jsmin(data.decode("utf-8"), keep_bang_comments=True).encode("utf-8")


def compress_response(response: Response) -> Response:
    """Compress a successful text answer the client can decode; static files from memory."""
    if (response.status_code != 200 or request.method not in ("GET", "POST")
            or response.mimetype not in COMPRESSIBLE or "Content-Encoding" in response.headers):
        return response
    response.vary.add("Accept-Encoding")
    encoding = _encoding()
    if encoding is None:
        return response
    etag, weak = response.get_etag()
    script = response.mimetype in SCRIPTS
    static = etag is not None and (response.direct_passthrough or script)
    key = (etag or "", encoding)
    body = _static_cache.get(key) if static else None
    source = response.response
    response.direct_passthrough = False
    if body is None:
        data = response.get_data()
        if len(data) < MIN_BYTES:
            return response
        if script and static:
            data = _minified(data)
        body = _compress(data, encoding, best=static)
        if static:
            with _static_lock:
                if len(_static_cache) >= MAX_CACHED:
                    _static_cache.clear()  # files changed many times over: start afresh
                _static_cache[key] = body
    if static and hasattr(source, "close"):
        source.close()  # the file send_file opened: read above, or not needed at all
    response.set_data(body)
    response.headers["Content-Encoding"] = encoding
    response.headers.pop("Accept-Ranges", None)
    if etag is not None:
        # Another representation, another validator; a repeat visit still gets its 304.
        response.set_etag(f"{etag}-{encoding}", weak=weak)
        if request.method == "GET":
            response.make_conditional(request)
    return response
