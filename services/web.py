"""Web-page plumbing shared by the blueprints: security headers, sessions, fragments."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from flask import Flask, Request, Response, render_template, request
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data: blob:",
    "connect-src 'self'",
    "worker-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])


def is_api_path(path: str) -> bool:
    """Whether a request path belongs to the JSON API under /v1."""
    return path == "/v1" or path.startswith("/v1/")


class SessionCookies(SecureCookieSessionInterface):
    """Session cookies that are Secure whenever the request came in over HTTPS.

    /v1 authenticates by API key alone, so its requests get no session: a browser's
    cookie is never read there, and no answer sets one.
    """

    def open_session(self, app: Flask, request: Request) -> SecureCookieSession | None:
        """The signed cookie session for pages; an empty, unsaved one for /v1."""
        if is_api_path(request.path):
            return self.make_null_session(app)
        return super().open_session(app, request)

    def get_cookie_secure(self, app: Flask) -> bool:
        """Mark the cookie Secure when configured to, or when this request is HTTPS."""
        return bool(app.config["SESSION_COOKIE_SECURE"]) or request.is_secure


class PageHooks:
    """Request hooks only pages need, run from one hook of each kind that /v1 answers skip.

    Flask calls every registered hook on every request, and under load each one shows in a
    small /v1 answer (bench/fixes.md). The form limits, the CSRF check, the remember-me
    cookie and compression concern pages alone, so they hang here: /v1 pays one path check
    per kind instead of a call per hook. Hooks run in Flask's own order.
    """

    def __init__(self) -> None:
        self.before: list[Callable[[], Any]] = []
        self.after: list[Callable[[Response], Response]] = []
        self.teardown: list[Callable[[BaseException | None], None]] = []

    def init_app(self, app: Flask) -> None:
        """Register the three dispatching hooks (do it first: its after-hook then runs last)."""
        app.extensions["page_hooks"] = self
        app.before_request(self.run_before)
        app.after_request(self.run_after)
        app.teardown_request(self.run_teardown)

    def adopt(self, app: Flask, extension: object) -> None:
        """Move the request hooks an extension registered on the app into this group.

        Neither Flask-Limiter, Flask-WTF nor Flask-Login has a setting for the paths its
        hooks run on; /v1 has its own rate check and no cookie session or form.
        """
        for registered, kept in ((app.before_request_funcs, self.before),
                                 (app.after_request_funcs, self.after),
                                 (app.teardown_request_funcs, self.teardown)):
            hooks = registered.get(None, [])
            owned = [hook for hook in hooks if registered_by(hook, extension)]
            for hook in owned:
                hooks.remove(hook)
                kept.append(app.ensure_sync(hook))

    def run_before(self) -> Any:
        """Run the before-request hooks for a page; the first answer one returns wins."""
        if is_api_path(request.path):
            return None
        for hook in self.before:
            answer = hook()
            if answer is not None:
                return answer
        return None

    def run_after(self, response: Response) -> Response:
        """Run the after-request hooks for a page, the last registered first."""
        if is_api_path(request.path):
            return response
        for hook in reversed(self.after):
            response = hook(response)
        return response

    def run_teardown(self, error: BaseException | None) -> None:
        """Run the teardown hooks for a page, the last registered first."""
        if is_api_path(request.path):
            return
        for hook in reversed(self.teardown):
            hook(error)


def page_hooks(app: Flask) -> PageHooks:
    """The app's group of page-only request hooks."""
    return app.extensions["page_hooks"]


def registered_by(hook: Callable, extension: object) -> bool:
    """Whether a hook belongs to an extension: its bound method, a partial or a closure over it."""
    if isinstance(hook, functools.partial):  # Flask-Limiter binds one hook this way
        return hook.args[:1] == (extension,)
    if getattr(hook, "__self__", None) is extension:
        return True
    for cell in getattr(hook, "__closure__", None) or ():  # Flask-WTF's closes over itself
        try:
            if cell.cell_contents is extension:
                return True
        except ValueError:  # a cell not yet filled
            continue
    return False


def is_htmx() -> bool:
    """Whether htmx made this request (htmx 2 and 4 both send HX-Request)."""
    return request.headers.get("HX-Request") == "true"


def render_page(full_template: str, fragment_template: str, **context: Any) -> Response:
    """The fragment alone for htmx, else the full page that includes that very fragment."""
    body = render_template(fragment_template if is_htmx() else full_template, **context)
    response = Response(body, mimetype="text/html")
    response.vary.add("HX-Request")
    return response


def add_security_headers(response: Response) -> Response:
    """Headers every answer gets; pages also get the Content-Security-Policy."""
    # Set outright: the value never differs, and a lookup first costs more than the set.
    response.headers["X-Content-Type-Options"] = "nosniff"
    if request.path.startswith("/c/"):
        # Capture URLs carry their credential: never send them on to another site.
        response.headers["Referrer-Policy"] = "no-referrer"
    if response.mimetype == "text/html":
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "same-origin")
    return response
