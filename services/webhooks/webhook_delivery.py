"""The webhook worker: claims endpoints with due deliveries, sends each signed event to an
address checked at send time, keeps every attempt, retries on a schedule for three days, and
disables an endpoint that failed that long (its company's admins are told by e-mail).

Several workers may run against one PostgreSQL database: an endpoint is claimed (a claim id
with an expiry, taken under `FOR UPDATE SKIP LOCKED`) by one worker at a time, which sends its
deliveries one after another; a worker that dies loses its claim when it expires and another
sends what it left. Endpoints are sent to in parallel by a small thread pool, at most
WEBHOOK_PER_COMPANY of one company's at once, so one company's slow endpoint never holds up
another's.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import certifi
import urllib3
from flask import Flask, current_app
from sqlalchemy import delete, func, or_, select, update

from models import WebhookAttempt, WebhookDelivery, WebhookEndpoint, db, utcnow
from services.platform import mail
from services.platform.database import write_transaction
from services.webhooks import webhooks

log = logging.getLogger(__name__)

USER_AGENT = "extra-work-tickets-webhooks/1"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one attempt came to."""

    ok: bool
    status_code: int | None
    duration_ms: int
    error: str | None


class Refused(Exception):
    """The address may not be sent to (private, unresolvable, or not https)."""


# ------------------------------------------------------------------ one send

def resolve_checked(host: str, port: int) -> str:
    """Resolve the host now and check every address it has; the first one, to connect to."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise Refused("the address's host name could not be found") from None
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    if not addresses:
        raise Refused("the host name has no address")
    for address in addresses:
        if not webhooks.allowed_address(host, address):
            log.warning("webhook host %s resolves to a private address %s", host, address)
            raise Refused("the host resolves to a private address")
    return addresses[0]


def post(url: str, body: bytes, headers: dict[str, str]) -> Outcome:
    """POST the body to the url, connecting to an address checked just before (so a name that
    changes its answer between the check and the connection cannot win), following no
    redirect, within WEBHOOK_TIMEOUT_S, reading at most WEBHOOK_MAX_RESPONSE_BYTES of the answer."""
    config = current_app.config
    started = time.monotonic()

    def took() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        https = parts.scheme == "https"
        if not https and not webhooks.host_allowed_privately(host):
            raise Refused("events are sent only over https")
        port = parts.port or (443 if https else 80)
        pool = _pool(host, resolve_checked(host, port), port, https)
        netloc_host = f"[{host}]" if ":" in host else host
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        with pool:
            response = pool.urlopen(
                "POST", path, body=body, redirect=False, retries=False, preload_content=False,
                assert_same_host=False,
                headers={**headers, "Host": netloc_host + (f":{parts.port}" if parts.port else ""),
                         "Content-Type": "application/json", "User-Agent": USER_AGENT})
            try:
                response.read(int(config["WEBHOOK_MAX_RESPONSE_BYTES"]))
            except urllib3.exceptions.HTTPError:
                pass  # the status is what counts; a broken body is the endpoint's own business
            finally:
                response.close()
            status = response.status
    except Refused as error:
        return Outcome(False, None, took(), str(error)[:300])
    except urllib3.exceptions.TimeoutError:
        return Outcome(False, None, took(), "no answer in time")
    except urllib3.exceptions.SSLError:
        return Outcome(False, None, took(), "its certificate could not be trusted")
    except urllib3.exceptions.NewConnectionError:
        return Outcome(False, None, took(), "could not connect")
    except (urllib3.exceptions.HTTPError, OSError, ValueError):
        return Outcome(False, None, took(), "the connection broke off")
    ok = 200 <= status < 300
    return Outcome(ok, status, took(), None if ok else f"answered with status {status}")


def _pool(host: str, address: str, port: int, https: bool) -> urllib3.HTTPConnectionPool:
    """A one-connection pool to the checked address, verifying the host's certificate over
    https, giving up after WEBHOOK_TIMEOUT_S."""
    timeout = urllib3.Timeout(total=float(current_app.config["WEBHOOK_TIMEOUT_S"]))
    options = dict(host=address, port=port, timeout=timeout, retries=False, maxsize=1)
    if https:
        return urllib3.HTTPSConnectionPool(**options, server_hostname=host,
                                           assert_hostname=host, cert_reqs="CERT_REQUIRED",
                                           ca_certs=certifi.where())
    return urllib3.HTTPConnectionPool(**options)


# ------------------------------------------------------------------ schedule and records

def retry_delay(attempts: int) -> dt.timedelta:
    """How long to wait after this many failed attempts: WEBHOOK_RETRY_SCHEDULE_S, then its
    last step again and again."""
    schedule = [float(s) for s in current_app.config["WEBHOOK_RETRY_SCHEDULE_S"]]
    return dt.timedelta(seconds=schedule[min(attempts, len(schedule)) - 1])


def record(delivery_id: str, outcome: Outcome, at: dt.datetime) -> None:
    """Keep the attempt and move the delivery on: delivered, retried later, or given up after
    WEBHOOK_GIVE_UP_S; an endpoint failing that long is disabled and its admins told."""
    give_up = dt.timedelta(seconds=float(current_app.config["WEBHOOK_GIVE_UP_S"]))
    disabled: tuple[int, str, list[str]] | None = None
    with write_transaction() as session:
        delivery = session.get(WebhookDelivery, delivery_id, with_for_update=True)
        if delivery is None:  # the endpoint was removed meanwhile
            return
        endpoint = session.get(WebhookEndpoint, delivery.endpoint_id, with_for_update=True)
        session.add(WebhookAttempt(delivery_id=delivery.id, attempted_at=at,
                                   status_code=outcome.status_code,
                                   duration_ms=outcome.duration_ms, ok=outcome.ok,
                                   error=outcome.error))
        delivery.attempt_count += 1
        delivery.first_tried_at = delivery.first_tried_at or at
        if outcome.ok:
            delivery.status, delivery.next_attempt_at = "delivered", None
            endpoint.failing_since = None
            return
        endpoint.failing_since = endpoint.failing_since or at
        later = at + retry_delay(delivery.attempt_count)
        if later - delivery.first_tried_at > give_up:
            delivery.status, delivery.next_attempt_at = "failed", None
        else:
            delivery.next_attempt_at = later
        # Failing for three days: a delivery was given up with nothing answered since it was
        # first tried, or nothing at all was answered for that long.
        given_up = delivery.status == "failed" and endpoint.failing_since <= delivery.first_tried_at
        if endpoint.enabled and (given_up or at - endpoint.failing_since >= give_up):
            endpoint.enabled = False
            endpoint.disabled_reason = "its deliveries failed for three days"
            disabled = (endpoint.id, endpoint.url, webhooks.company_admins(session,
                                                                           endpoint.company_id))
    if disabled is not None:
        _tell_admins(*disabled)


def _tell_admins(endpoint_id: int, url: str, admins: list[str]) -> None:
    """E-mail the company's admins that an endpoint was disabled."""
    for address in admins:
        mail.send(address, "A webhook endpoint was disabled",
                  f"Events to {url} (endpoint {endpoint_id}) failed for three days, so they are "
                  "no longer sent. Fix the receiving program, then have it turn the endpoint "
                  "back on, as it registered it; the keys page lists its deliveries, and each "
                  "can be sent again.")


# ------------------------------------------------------------------ claims

def claim_endpoints(limit: int, now: dt.datetime | None = None) -> list[tuple[int, str]]:
    """Claim up to `limit` enabled endpoints that have a due delivery and no live claim, the
    longest-waiting first and at most WEBHOOK_PER_COMPANY live ones per company."""
    if limit <= 0:
        return []
    now = now or utcnow()
    config = current_app.config
    per_company = int(config["WEBHOOK_PER_COMPANY"])
    until = now + dt.timedelta(seconds=float(config["WEBHOOK_CLAIM_TTL_S"]))
    due = select(WebhookDelivery.endpoint_id).where(WebhookDelivery.status == "pending",
                                                    WebhookDelivery.next_attempt_at <= now)
    with write_transaction() as session:
        busy = dict(session.execute(
            select(WebhookEndpoint.company_id, func.count()).where(
                WebhookEndpoint.claimed_until > now).group_by(WebhookEndpoint.company_id)).all())
        candidates = session.scalars(
            select(WebhookEndpoint).where(
                WebhookEndpoint.enabled.is_(True), WebhookEndpoint.id.in_(due),
                or_(WebhookEndpoint.claimed_until.is_(None), WebhookEndpoint.claimed_until <= now))
            .order_by(WebhookEndpoint.claimed_until.asc().nulls_first(), WebhookEndpoint.id)
            .limit(limit * 4).with_for_update(skip_locked=True)).all()
        claimed = []
        for endpoint in candidates:
            if len(claimed) == limit or busy.get(endpoint.company_id, 0) >= per_company:
                continue
            busy[endpoint.company_id] = busy.get(endpoint.company_id, 0) + 1
            endpoint.claim_id, endpoint.claimed_until = str(uuid.uuid4()), until
            claimed.append((endpoint.id, endpoint.claim_id))
    return claimed


def _next_due(endpoint_id: int, claim_id: str) -> tuple[WebhookEndpoint, WebhookDelivery] | None:
    """Renew the claim and take the endpoint's oldest due delivery; None when there is none
    or the claim is no longer ours."""
    now = utcnow()
    until = now + dt.timedelta(seconds=float(current_app.config["WEBHOOK_CLAIM_TTL_S"]))
    with write_transaction() as session:
        renewed = session.execute(update(WebhookEndpoint).where(
            WebhookEndpoint.id == endpoint_id, WebhookEndpoint.claim_id == claim_id,
            WebhookEndpoint.enabled.is_(True)).values(claimed_until=until))
        if renewed.rowcount != 1:
            return None
        delivery = session.scalar(select(WebhookDelivery).where(
            WebhookDelivery.endpoint_id == endpoint_id, WebhookDelivery.status == "pending",
            WebhookDelivery.next_attempt_at <= now)
            .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.created_at).limit(1))
        if delivery is None:
            return None
        return session.get(WebhookEndpoint, endpoint_id), delivery


def _release(endpoint_id: int, claim_id: str) -> None:
    """End this worker's claim; the endpoint then waits behind those not served since."""
    with write_transaction() as session:
        session.execute(update(WebhookEndpoint).where(
            WebhookEndpoint.id == endpoint_id, WebhookEndpoint.claim_id == claim_id)
            .values(claim_id=None, claimed_until=utcnow()))


def drain(endpoint_id: int, claim_id: str, stop: threading.Event | None = None) -> int:
    """Send a claimed endpoint's due deliveries one at a time (at most WEBHOOK_BATCH), stopping
    at the first failure or when the worker stops; answers how many were attempted."""
    sent = 0
    try:
        while sent < int(current_app.config["WEBHOOK_BATCH"]) and not (stop and stop.is_set()):
            taken = _next_due(endpoint_id, claim_id)
            if taken is None:
                break
            endpoint, delivery = taken
            at = utcnow()
            headers = {"webhook-id": delivery.id,
                       "webhook-timestamp": str(int(at.timestamp())),
                       "webhook-signature": webhooks.sign(webhooks.signing_secrets(endpoint, at),
                                                          delivery.id, at, delivery.payload)}
            outcome = post(endpoint.url, delivery.payload.encode(), headers)
            record(delivery.id, outcome, at)
            sent += 1
            if not outcome.ok:
                break
    finally:
        _release(endpoint_id, claim_id)
    return sent


# ------------------------------------------------------------------ the worker

def sweep(now: dt.datetime | None = None) -> None:
    """Forget attempts, and finished deliveries, older than WEBHOOK_KEEP_DAYS."""
    cutoff = (now or utcnow()) - dt.timedelta(days=float(current_app.config["WEBHOOK_KEEP_DAYS"]))
    with write_transaction() as session:
        session.execute(delete(WebhookAttempt).where(WebhookAttempt.attempted_at < cutoff))
        old = select(WebhookDelivery.id).where(WebhookDelivery.created_at < cutoff,
                                               WebhookDelivery.status != "pending")
        session.execute(delete(WebhookAttempt).where(WebhookAttempt.delivery_id.in_(old)))
        session.execute(delete(WebhookDelivery).where(WebhookDelivery.id.in_(old)))


def _in_app(app: Flask, work: Callable[..., int]) -> Callable[..., int]:
    """Run a piece of work in its own app context (a pool thread has none)."""
    def run(*args) -> int:
        with app.app_context():
            try:
                return work(*args)
            finally:
                db.session.remove()
    return run


def run_once(app: Flask, pool: ThreadPoolExecutor | None = None) -> int:
    """Claim every endpoint that is due and can be claimed now, and send to each; answers how
    many deliveries were attempted (for tests and `flask webhooks send`)."""
    threads = int(app.config["WEBHOOK_WORKER_THREADS"])
    own = pool is None
    pool = pool or ThreadPoolExecutor(threads, thread_name_prefix="webhooks")
    try:
        with app.app_context():
            claimed = claim_endpoints(threads)
            db.session.remove()
        return sum(f.result() for f in [pool.submit(_in_app(app, drain), *c) for c in claimed])
    finally:
        if own:
            pool.shutdown()


def work(app: Flask, stop: threading.Event) -> None:
    """Send deliveries until `stop` is set: claim what is due every WEBHOOK_POLL_S as threads
    free up, and forget old attempts every hour."""
    threads = int(app.config["WEBHOOK_WORKER_THREADS"])
    poll = float(app.config["WEBHOOK_POLL_S"])
    running: dict[int, Future] = {}
    swept = float("-inf")  # forget old attempts at the start, then hourly
    with ThreadPoolExecutor(threads, thread_name_prefix="webhooks") as pool:
        while not stop.is_set():
            for endpoint_id in [e for e, f in running.items() if f.done()]:
                error = running.pop(endpoint_id).exception()
                if error is not None:
                    log.warning("a webhook send failed unexpectedly: %s", type(error).__name__)
            try:
                with app.app_context():
                    if time.monotonic() - swept > 3600:
                        sweep()
                        swept = time.monotonic()
                    for endpoint_id, claim_id in claim_endpoints(threads - len(running)):
                        running[endpoint_id] = pool.submit(_in_app(app, drain), endpoint_id,
                                                           claim_id, stop)
                    db.session.remove()
            except Exception:  # the database away for a moment: try again next round
                log.warning("could not claim webhook deliveries; trying again", exc_info=True)
            stop.wait(poll)
