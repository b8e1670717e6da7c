"""Web-page plumbing shared by the blueprints: security headers, sessions, fragments."""
from __future__ import annotations

import hashlib
from typing import Any

from flask import Flask, Request, Response, current_app, g, has_request_context, render_template, request
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from flask_login import current_user
from werkzeug.exceptions import NotFound

from services.platform.errors import ValidationFailed, field_problem

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


# What the capture page's plain form (no JavaScript) posts; its script sends JSON or image bytes.
FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})


def is_capture_script_request() -> bool:
    """Whether a capture link's script sent this (a body under /c/ that is no form post)."""
    return request.path.startswith("/c/") and request.method not in ("GET", "HEAD") \
        and request.mimetype not in FORM_TYPES


class SessionCookies(SecureCookieSessionInterface):
    """Session cookies that are Secure whenever the request came in over HTTPS.

    /v1 authenticates by API key alone, so its requests get no session: a browser's
    cookie is never read there, and no answer sets one. Static files get none either, so
    their answers do not vary with the cookie and one kept copy serves every visitor.
    """

    def open_session(self, app: Flask, request: Request) -> SecureCookieSession | None:
        """The signed cookie session for pages; an empty, unsaved one for /v1 and static files."""
        if is_api_path(request.path) or request.path.startswith(f"{app.static_url_path}/"):
            return self.make_null_session(app)
        return super().open_session(app, request)

    def get_cookie_secure(self, app: Flask) -> bool:
        """Mark the cookie Secure when configured to, or when this request is HTTPS."""
        return bool(app.config["SESSION_COOKIE_SECURE"]) or request.is_secure


def refuse_nul() -> None:
    """Refuse a NUL character in the path (404), the query or a form field (400): no text
    the service stores may hold one, and a database would refuse it mid-request."""
    if "\x00" in request.path:
        raise NotFound()
    fields = list(request.args.items(multi=True))
    # Pages read forms; /v1 reads JSON only (read_json_object refuses NUL there) and refuses forms.
    if not is_api_path(request.path) and request.mimetype in FORM_TYPES:
        fields += request.form.items(multi=True)
        fields += [(name, upload.filename or "") for name, upload in request.files.items(multi=True)]
    held = sorted({name for name, value in fields if "\x00" in name or "\x00" in value})
    if held:
        raise ValidationFailed("a NUL character is not allowed in text", details=[
            field_problem(name.replace("\x00", ""), "must not contain a NUL character")
            for name in held])


def is_htmx() -> bool:
    """Whether htmx made this request (htmx 2 and 4 both send HX-Request)."""
    return request.headers.get("HX-Request") == "true"


def render_page(full_template: str, fragment_template: str, **context: Any) -> Response:
    """The fragment alone for htmx, else the full page that includes that very fragment."""
    body = render_template(fragment_template if is_htmx() else full_template, **context)
    response = Response(body, mimetype="text/html")
    response.vary.add("HX-Request")
    return response


def csv_download(text: str, filename: str) -> Response:
    """A CSV file to download under `filename`, kept by no cache (it holds a company's data)."""
    response = Response(text, mimetype="text/csv")
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    response.headers["Cache-Control"] = "private, no-store"
    return response


# The answers of a page whose URL carries its credential (capture, signing, share and digest stop
# links): never kept by a cache, the URL never sent on to another site.
CREDENTIAL_HEADERS = {"Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
CREDENTIAL_PATHS = ("/c/", "/s/", "/l/", "/digest/stop/")


def add_security_headers(response: Response) -> Response:
    """Headers every answer gets; pages also get the Content-Security-Policy."""
    response.headers["X-Content-Type-Options"] = "nosniff"
    if request.path.startswith(CREDENTIAL_PATHS):
        # their error pages too: never send the credential on to another site
        response.headers["Referrer-Policy"] = "no-referrer"
    if response.mimetype == "text/html":
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "same-origin")
    return response


def work_owner() -> tuple[str, str]:
    """Whose image or PDF work this request is: (company, link or key) for the pool's turns."""
    if not has_request_context():
        return "", ""
    link = g.get("capture_link")
    if link is not None:
        return f"company:{link.company_id}", f"link:{link.id}"
    if g.get("company_id") is not None:
        key = g.get("api_key")
        return f"company:{g.company_id}", f"key:{getattr(key, 'key_id', '')}"
    if current_user and current_user.is_authenticated:
        return f"company:{current_user.company_id}", f"reviewer:{current_user.id}"
    return f"address:{request.remote_addr}", request.path.split("/")[1] if "/" in request.path else ""


def token_digest(token: str, size: int = 24) -> str:
    """The SHA-256 of a link token in hex, its first `size` characters: short, it names the link
    in limits and counts without revealing it; whole (64), it is what the database finds a
    link by whose token it never holds."""
    return hashlib.sha256(str(token)[:64].encode("utf-8", "replace")).hexdigest()[:size]


def public_base_url() -> str:
    """The address crews reach the service at: configured, else the current request's host."""
    configured = current_app.config.get("PUBLIC_BASE_URL")
    if configured:
        return configured.rstrip("/")
    if has_request_context():
        return request.host_url.rstrip("/")
    return "http://127.0.0.1:5000"
