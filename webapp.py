"""The served app: configuration layers, extensions, hooks, blueprints (no `flask` commands)."""
from __future__ import annotations

import os
import secrets
import urllib.parse
from pathlib import Path
from typing import Any

from flask import Flask, Response, jsonify, request
from flask_wtf.csrf import CSRFProtect
from sqlalchemy.engine import make_url
from werkzeug.exceptions import SecurityError
from werkzeug.middleware.proxy_fix import ProxyFix

from blueprints import (
    auth,
    backup_packages,
    board,
    health,
    home,
    keys,
    links,
    me,
    openapi,
    projects,
    rates,
    reviewers,
    share_links,
    signatures,
    ticket_pages,
    webhooks,
)
from blueprints.errors import register_error_handlers
from models import db
from services.accounts import ratelimit
from services.accounts.auth import login_manager
from services.files.storage import parse_bucket_url
from services.platform import assets, bodies, compression, i18n
from services.platform.database import configure_engine, normalise_database_url
from services.platform.errors import UntrustedHost
from services.platform.logs import configure_logging
from services.platform.web import SessionCookies, add_security_headers, is_api_path, refuse_nul

csrf = CSRFProtect()

MiB = 1024 * 1024


def default_config(instance_path: str) -> dict[str, Any]:
    """Embedded defaults: a SQLite file and photos under instance/, the built-in sandbox."""
    return {
        "SQLALCHEMY_DATABASE_URI": "sqlite:///" + os.path.join(instance_path, "tickets.sqlite3"),
        "SQLITE_BUSY_TIMEOUT_MS": 30_000,
        "SQLITE_SYNCHRONOUS": "FULL",
        # What SQLite keeps in memory (page caches, sorts) in the whole process, past which it
        # reuses its cache; the operating system's file cache still holds the file. Unbounded,
        # each pooled connection keeps 2 MB of pages and more from its sorts.
        "SQLITE_HEAP_LIMIT_BYTES": 8 * MiB,
        # 12 photos of up to 2 MiB each, base64-encoded, plus the signature and text: the routes
        # that take photos; every other route takes SMALL_BODY_BYTES (services/platform/bodies.py).
        "MAX_CONTENT_LENGTH": 34 * MiB,
        "SMALL_BODY_BYTES": 256 * 1024,
        # The server (services/platform/serving.py, waitress; make run and deploy/) reads each
        # request whole before a thread runs the app: its headers within
        # REQUEST_HEADER_DEADLINE_S, its body within REQUEST_BODY_DEADLINE_S (photos on one bar),
        # never REQUEST_IDLE_S without a byte;
        # it keeps at most SERVER_CONNECTION_LIMIT connections open, SERVER_CONNECTIONS_PER_ADDRESS
        # of them per client address, and closes a body slower than REQUEST_BODY_MIN_BYTES_S
        # over REQUEST_BODY_RATE_WINDOW_S (one bar of signal sends about 25 kB a second).
        # On SIGTERM it finishes the requests in flight within SHUTDOWN_GRACE_S. Behind
        # TRUSTED_PROXIES proxies connecting from PROXY_ADDRESSES, the client is the address
        # their X-Forwarded-For names.
        "REQUEST_HEADER_DEADLINE_S": 10,
        "REQUEST_BODY_DEADLINE_S": 300,
        "REQUEST_BODY_MIN_BYTES_S": 1024,
        "REQUEST_BODY_RATE_WINDOW_S": 20,
        "REQUEST_IDLE_S": 30,
        "SERVER_CONNECTION_LIMIT": 2000,
        "SERVER_CONNECTIONS_PER_ADDRESS": 64,
        "SHUTDOWN_GRACE_S": 30,
        # The server's threads share this many malloc arenas (glibc; 0: glibc's eight a core),
        # so memory one thread freed serves the next request on another.
        "SERVER_MALLOC_ARENAS": 2,
        "PROXY_ADDRESSES": ["127.0.0.1", "::1"],
        "API_RATE_LIMIT": "120 per minute",
        "API_KEY_TOUCH_INTERVAL_S": 60,
        "RATELIMIT_STORAGE_URI": "memory://",
        "RATELIMIT_STRATEGY": "moving-window",
        "RATELIMIT_ENABLED": True,
        # Retry-After is set by our 429 handler only; the limiter's own headers would put it
        # on every answer.
        "RATELIMIT_HEADERS_ENABLED": False,
        "RATELIMIT_KEY_PREFIX": "ewt",
        "PASSWORD_HASH_PROFILE": "default",
        "JSON_SORT_KEYS": False,
        # The embedded Procore-compatible sandbox, run beside the service by `make run`.
        "SANDBOX_URL": "http://127.0.0.1:5001",
        "SANDBOX_PUBLIC_URL": None,
        "SANDBOX_DB_PATH": os.path.join(instance_path, "sandbox.sqlite3"),
        # Per call: reads are short enough for a page; writes (approvals, with photos) longer.
        "PROJECT_SYSTEM_CONNECT_TIMEOUT_S": 3,
        "PROJECT_SYSTEM_READ_TIMEOUT_S": 8,
        "PROJECT_SYSTEM_WRITE_TIMEOUT_S": 60,
        # An approval's reads and writes: a project system that sends nothing for this long
        # counts as hung, so the PM hears within seconds (a write that went unanswered is found
        # again by its origin id on the next approval, never written twice).
        "PROJECT_SYSTEM_APPROVAL_WAIT_S": 2,
        "PROJECT_SYSTEM_APPROVAL_WRITE_WAIT_S": 4,
        # Calls one company may have under way at once (approvals count as one write each);
        # a call waits this long for a slot, then is refused with 503 project_system_busy.
        "PROJECT_SYSTEM_READS_PER_COMPANY": 2,
        "PROJECT_SYSTEM_WRITES_PER_COMPANY": 1,
        "PROJECT_SYSTEM_SLOT_WAIT_S": 1.0,
        # An approval may wait out the one before it (its writes and attachments take a
        # few hundred milliseconds), not a hung project system.
        "PROJECT_SYSTEM_WRITE_SLOT_WAIT_S": 5.0,
        # Reads only: writes are never retried blindly (approval looks records up first).
        "PROJECT_SYSTEM_READ_RETRIES": 1,
        # The longest pause a project system's 429 may ask for and be waited out in the call;
        # a longer one answers 503 project_system_busy with its Retry-After at once.
        "PROJECT_SYSTEM_RATE_LIMIT_WAIT_S": 10,
        # Each call of an approval waits for Procore's rate limit (a 10 s or 60 s window) up
        # to this long, else it answers 503 project_system_busy with Retry-After; meanwhile the
        # approvals behind it wait their turn (programs approving side by side share the
        # company's budget).
        "PROJECT_SYSTEM_APPROVAL_BUDGET_WAIT_S": 60,
        "PROJECT_CACHE_S": 60,
        "CATALOG_CACHE_S": 30,
        "CAPABILITY_CACHE_S": 60,
        "PHOTO_DIR": os.path.join(instance_path, "photos"),
        # Stored files in an S3-compatible bucket, "s3://BUCKET/PREFIX" (unset: PHOTO_DIR), at
        # S3_ENDPOINT_URL (unset: AWS), with the standard AWS credential variables.
        "STORAGE_URL": None,
        "S3_ENDPOINT_URL": None,
        # The firm's key that backups to a bucket are encrypted with (`flask backup new-key`).
        "BACKUP_KEY_FILE": None,
        # Photos a phone sent ahead of its ticket's text are dropped by the sweep after this.
        "STAGED_PHOTO_DAYS": 7,
        # Photos sent in pieces wait as files of the store: at most this many begun and
        # unfinished per link (per company through the API), each dropped after this many
        # hours without a new piece, swept by the running service this often.
        "PHOTO_UPLOADS_OPEN_PER_LINK": 36,
        "PHOTO_PIECE_HOURS": 6,
        "PHOTO_PIECE_SWEEP_S": 600,
        "MAX_PHOTO_BYTES": 2 * MiB,
        # Images are decoded in this many worker processes at most (0: in the request's own
        # thread, for tests only), each image with this much CPU and address space, and a
        # request's images together within this many seconds.
        "IMAGE_WORKERS": 2,
        "IMAGE_CPU_SECONDS": 5,
        "IMAGE_MEMORY_BYTES": 768 * MiB,
        "IMAGE_REQUEST_BUDGET_S": 30,
        # At most this many requests of one company wait on the image workers at once (each
        # holds a server thread); more are answered 503 with Retry-After, as is a request
        # whose images are not done within the budget: the phone sends them again.
        "IMAGE_COMPANY_REQUESTS": 3,
        # The signed ticket document is made in the same pool: with this much CPU, within
        # this many seconds; at most DOCUMENT_SLOTS requests of a process wait for it at once,
        # a download at most DOCUMENT_WAIT_S for its turn (an approval waits the whole budget).
        "DOCUMENT_CPU_SECONDS": 20,
        "DOCUMENT_BUDGET_S": 15,
        "DOCUMENT_SLOTS": 2,
        "DOCUMENT_WAIT_S": 2,
        # An approval holds its ticket this long at most; a crashed one frees it after that.
        "APPROVAL_CLAIM_TTL_S": 120,
        # Where crews reach the service: links, QR codes and photo URLs are built on it, never
        # on the request's Host (bin/serve sets it from HOST and PORT). Unset, only loopback
        # names are served and links use them (a development box).
        "PUBLIC_BASE_URL": None,
        # Host names the service answers to; None: PUBLIC_BASE_URL's host plus loopback.
        "TRUSTED_HOSTS": None,
        # Per link, in the limiter's storage; the daily count of tickets per link is kept in
        # the database (storage_usage), so it survives a restart.
        "CAPTURE_RATE_LIMIT": "30 per minute",
        "CAPTURE_TICKETS_PER_DAY": 60,
        # Per link, its phones' look-ups of the tickets they sent (each page load and send).
        "CAPTURE_STATUS_RATE_LIMIT": "60 per minute",
        # Per share link, its pages, CSV and documents (a sub's office reading its log).
        "SHARE_LINK_RATE_LIMIT": "60 per minute",
        # Signing links a capture link may make (each may be e-mailed, with reminders): per
        # hour in the limiter's storage, and open at once for one ticket (in the database).
        "CAPTURE_SIGNATURE_REQUEST_RATE_LIMIT": "20 per hour",
        "CAPTURE_OPEN_SIGNATURE_REQUESTS": 3,
        # Bytes of images stored per UTC day (counted in the database), and free disk: a link's
        # and a company's caps apply first; the server's total and the shared disk reserve
        # refuse only a company past its share of the day; DISK_RESERVE_BYTES refuses everyone.
        # A crew's busiest day is about 30 tickets of 6 photos at under 1 MiB each (the
        # capture page sends 2048 px JPEGs): 192 MiB and 60 tickets a link hold that, twice.
        "QUOTA_LINK_BYTES_PER_DAY": 192 * MiB,
        "QUOTA_COMPANY_BYTES_PER_DAY": 2048 * MiB,
        "QUOTA_COMPANY_SHARE_BYTES_PER_DAY": 512 * MiB,
        "QUOTA_TOTAL_BYTES_PER_DAY": 8192 * MiB,
        "DISK_RESERVE_BYTES": 512 * MiB,
        "DISK_SHARED_RESERVE_BYTES": 2048 * MiB,
        # Reviewer sessions: HttpOnly, SameSite=Lax, and Secure whenever the request is HTTPS.
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_SECURE": False,
        "PERMANENT_SESSION_LIFETIME": 12 * 3600,
        # Sign-in: wrong passwords per address (a right one never counts), and every attempt
        # per address (counted before the body, bounding concurrent tries); per account from
        # browsers that never signed in to it, and per browser that did (its device cookie,
        # OWASP's lockout that spares the owner), both counted before the password check.
        "LOGIN_RATE_LIMIT": "5 per minute",
        "LOGIN_ADDRESS_ATTEMPTS_LIMIT": "30 per minute",
        "LOGIN_ACCOUNT_RATE_LIMIT": "5 per minute;30 per hour",
        "LOGIN_DEVICE_RATE_LIMIT": "5 per minute;30 per hour",
        "DEVICE_COOKIE_DAYS": 180,
        # A reviewer may ask for a one-time sign-in link by e-mail (valid this many minutes),
        # this often per account; the links already sent keep working past the limit.
        "SIGN_IN_LINK_MINUTES": 15,
        "SIGN_IN_LINK_RATE_LIMIT": "5 per 15 minutes",
        "WTF_CSRF_CHECK_DEFAULT": False,
        "WTF_CSRF_TIME_LIMIT": None,
        # How many reverse proxies stand in front (deploy/Caddyfile: one). 0 ignores every
        # X-Forwarded-* header, which any client can send.
        "TRUSTED_PROXIES": 0,
        # Signing links for the general contractor's person: how long one works, how often its
        # page may be opened or sent per minute (its photos have their own, larger, limit),
        # and the e-mail reminders (the jobsite's hour, or hours after the request when set).
        "SIGNATURE_LINK_DAYS": 7,
        "SIGNING_RATE_LIMIT": "30 per minute",
        "SIGNING_PHOTO_RATE_LIMIT": "240 per minute",
        "SIGNATURE_REMINDER_HOUR": 7,
        "SIGNATURE_REMINDER_AFTER_H": None,
        "SIGNATURE_REMINDERS_MAX": 3,
        # The morning digest goes from this hour on the company's clock (services/reports/digest.py).
        "DIGEST_HOUR": 7,
        # Outgoing e-mail (signing links and reminders); none is sent while MAIL_SERVER is unset.
        "MAIL_SERVER": None,
        "MAIL_PORT": 25,
        "MAIL_USE_TLS": False,
        "MAIL_USE_SSL": False,
        "MAIL_USERNAME": None,
        "MAIL_PASSWORD": None,
        "MAIL_FROM": "tickets@localhost",
        "MAIL_TIMEOUT_S": 10,
        # /healthz shows its checks to loopback callers, and to others sending this key in
        # X-Health-Key; everyone else sees only "ok" or "degraded".
        "HEALTHZ_KEY": None,
        # Webhooks (services/webhooks/webhook_delivery.py): events go only over https to public
        # addresses, unless WEBHOOK_ALLOW_PRIVATE names the host or a network holding its
        # address ("127.0.0.1", "10.0.0.0/8 erp.internal"), where plain http is taken too.
        # Each attempt waits WEBHOOK_TIMEOUT_S at most and reads at most
        # WEBHOOK_MAX_RESPONSE_BYTES of the answer; failures are retried after each step of
        # WEBHOOK_RETRY_SCHEDULE_S (then its last step again) for WEBHOOK_GIVE_UP_S, and an
        # endpoint failing that long is disabled. The worker sends to WEBHOOK_WORKER_THREADS
        # endpoints at once, at most WEBHOOK_PER_COMPANY of one company's, looking for due
        # deliveries every WEBHOOK_POLL_S; a dead worker's endpoints are taken over after
        # WEBHOOK_CLAIM_TTL_S. Attempts are kept WEBHOOK_KEEP_DAYS.
        "WEBHOOK_ALLOW_PRIVATE": "",
        "WEBHOOK_TIMEOUT_S": 10,
        "WEBHOOK_MAX_RESPONSE_BYTES": 64 * 1024,
        "WEBHOOK_RETRY_SCHEDULE_S": [5, 300, 1800, 7200, 18000, 36000],
        "WEBHOOK_GIVE_UP_S": 3 * 24 * 3600,
        "WEBHOOK_WORKER_THREADS": 8,
        "WEBHOOK_PER_COMPANY": 2,
        "WEBHOOK_POLL_S": 1,
        "WEBHOOK_CLAIM_TTL_S": 60,
        "WEBHOOK_BATCH": 20,
        "WEBHOOK_KEEP_DAYS": 30,
    }


def load_configuration(app: Flask, test_config: dict[str, Any] | None) -> None:
    """Layer configuration: defaults, instance/config.py, EWT_* environment, test mapping."""
    app.config.from_mapping(default_config(app.instance_path))
    app.config.from_pyfile("config.py", silent=True)
    app.config.from_prefixed_env("EWT")
    for name in ("DATABASE_URL", "STORAGE_URL", "S3_ENDPOINT_URL"):
        if os.environ.get(name):
            app.config[name] = os.environ[name]
    if test_config is not None:
        app.config.from_mapping(test_config)
    if app.config.get("DATABASE_URL"):
        app.config["SQLALCHEMY_DATABASE_URI"] = normalise_database_url(app.config["DATABASE_URL"])
    if app.config.get("STORAGE_URL"):
        parse_bucket_url(app.config["STORAGE_URL"])  # a wrong address stops the start, not a request
    # The pool hands out the connection put back last: at a steady load one or two serve every
    # request with their caches warm, rather than each pooled connection filling a cache of its
    # own (SQLite's page cache is up to 2 MB a connection).
    engine_options = app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", {})
    database = make_url(app.config["SQLALCHEMY_DATABASE_URI"])
    if database.database not in (None, "", ":memory:"):  # one in memory has no pool to order
        engine_options.setdefault("pool_use_lifo", True)
    if database.get_backend_name() != "sqlite":
        # A server can drop idle connections; a SQLite file cannot, so it skips the ping.
        engine_options.setdefault("pool_pre_ping", True)
    app.json.sort_keys = bool(app.config["JSON_SORT_KEYS"])
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = instance_secret(Path(app.instance_path) / "secret_key")
    if app.config.get("TRUSTED_HOSTS") is None:
        app.config["TRUSTED_HOSTS"] = trusted_hosts(app.config.get("PUBLIC_BASE_URL"))


LOOPBACK_HOSTS = ("localhost", "127.0.0.1")  # werkzeug checks no IPv6 literal


def trusted_hosts(public_base_url: str | None) -> list[str]:
    """The Host names to answer: the public base URL's host, and loopback for the box itself."""
    names = list(LOOPBACK_HOSTS)
    host = urllib.parse.urlsplit(public_base_url or "").hostname
    if host and host not in names:
        names.insert(0, host)
    return names


def instance_secret(path: Path) -> str:
    """Read the instance's secret key, creating it once with 256 random bits."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    secret = secrets.token_hex(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()  # another worker created it first
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    return secret


def refuse_untrusted_host() -> Response | None:
    """Refuse a request for a host name this service does not answer to, before anything runs.

    Pages answer in plain text: no URL can be built for a host that is not served.
    """
    if not isinstance(request.routing_exception, SecurityError):
        return None
    refusal = UntrustedHost("this server does not answer to that host name")
    if is_api_path(request.path):
        return jsonify({"error": {"code": refusal.code, "message": refusal.message}}), 400
    return Response(refusal.message + "\n", status=400, mimetype="text/plain")


def protect_session_forms() -> None:
    """Check the CSRF token on every state-changing page request made with a reviewer session.

    /v1 calls carry an API key instead of a cookie, and capture and signing links carry their
    token in the URL, so none can be forged by another site through the browser.
    """
    if request.method in ("GET", "HEAD", "OPTIONS") or is_api_path(request.path):
        return
    if request.path.startswith(("/c/", "/s/")):
        return
    csrf.protect()


def create_web_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the served Flask app: configuration, extensions, hooks, blueprints, errors."""
    instance_path = (test_config or {}).get("INSTANCE_PATH") or os.environ.get("EWT_INSTANCE_PATH")
    app = Flask(__name__, instance_relative_config=True,
                instance_path=os.path.abspath(instance_path) if instance_path else None)
    os.makedirs(app.instance_path, exist_ok=True)
    load_configuration(app, test_config)
    # Behind the proxy, take the client's address, scheme and host from the X-Forwarded-*
    # headers it sets, believing only the hops it added (rate limits count per address;
    # cookies are Secure when the client used HTTPS).
    proxies = int(app.config["TRUSTED_PROXIES"])
    if proxies:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies)

    app.before_request(refuse_untrusted_host)  # before any hook counts, reads or stores
    # Registered first, so compression (an after-hook) runs after every other.
    compression.init_app(app)
    assets.init_app(app)
    db.init_app(app)
    configure_engine(app)
    ratelimit.init_app(app)
    bodies.init_app(app)  # after the limiter's hook, before anything that reads a body
    app.before_request(refuse_nul)  # the body, if any, is checked whole by now
    csrf.init_app(app)
    login_manager.init_app(app)
    i18n.init_app(app)
    app.session_interface = SessionCookies()
    app.before_request(protect_session_forms)
    app.after_request(add_security_headers)
    configure_logging(app)

    for blueprint in (home.bp, health.bp, auth.bp, me.bp, openapi.bp, projects.bp, ticket_pages.bp,
                      links.bp, keys.bp, reviewers.bp, rates.bp, signatures.bp, webhooks.bp,
                      share_links.bp, board.bp, backup_packages.bp):
        app.register_blueprint(blueprint)
    register_error_handlers(app)
    return app
