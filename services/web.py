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


def keep_hooks_off_api_paths(app: Flask, extension: object) -> None:
    """Wrap the request hooks an extension registered on the app so they skip /v1 paths.

    Flask-Limiter's hooks look up the route's limits and headers (/v1 is counted once by
    services.ratelimit.check_api_limit instead), and Flask-Login's refreshes a remember-me
    cookie (/v1 has no cookie session). Neither extension has a setting for the paths its
    hooks run on, and under load every hook a small /v1 answer runs shows (bench/fixes.md).
    """
    def owned(hook: Callable) -> bool:
        if isinstance(hook, functools.partial):  # Flask-Limiter binds one hook this way
            return hook.args[:1] == (extension,)
        return getattr(hook, "__self__", None) is extension

    for hooks, wrap in ((app.before_request_funcs, _before_off_api_paths),
                        (app.after_request_funcs, _after_off_api_paths),
                        (app.teardown_request_funcs, _teardown_off_api_paths)):
        registered = hooks.get(None, [])
        for index, hook in enumerate(registered):
            if owned(hook):
                registered[index] = wrap(hook)


def _before_off_api_paths(hook: Callable[[], Any]) -> Callable[[], Any]:
    """A before-request hook that does not run for /v1 paths."""
    @functools.wraps(hook)
    def before_off_api_paths() -> Any:
        return None if is_api_path(request.path) else hook()
    return before_off_api_paths


def _after_off_api_paths(hook: Callable[[Response], Response]) -> Callable[[Response], Response]:
    """An after-request hook that does not run for /v1 paths."""
    @functools.wraps(hook)
    def after_off_api_paths(response: Response) -> Response:
        return response if is_api_path(request.path) else hook(response)
    return after_off_api_paths


def _teardown_off_api_paths(hook: Callable[[BaseException | None], None]
                            ) -> Callable[[BaseException | None], None]:
    """A teardown hook that does not run for /v1 paths."""
    @functools.wraps(hook)
    def teardown_off_api_paths(error: BaseException | None) -> None:
        if not is_api_path(request.path):
            hook(error)
    return teardown_off_api_paths


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
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    if request.path.startswith("/c/"):
        # Capture URLs carry their credential: never send them on to another site.
        response.headers["Referrer-Policy"] = "no-referrer"
    if response.mimetype == "text/html":
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "same-origin")
    return response
