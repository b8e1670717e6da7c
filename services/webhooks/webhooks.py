"""Webhook endpoints: register, change, rotate secrets, list deliveries, replay; the addresses
they may name; and the outbox: each ticket event stored in the transaction of its change.

Events are signed per Standard Webhooks (its `standardwebhooks` library); the worker in
services/webhooks/webhook_delivery.py sends them.
"""
from __future__ import annotations

import base64
import contextlib
import datetime as dt
import ipaddress
import secrets
import urllib.parse
import uuid
from collections.abc import Iterator
from contextvars import ContextVar

from flask import current_app
from sqlalchemy import delete, select
from sqlalchemy.orm import Session
from standardwebhooks.webhooks import Webhook

from models import Reviewer, WebhookAttempt, WebhookDelivery, WebhookEndpoint, db, utcnow
from models import Ticket as TicketRecord
from models.schemas import (
    Ticket,
    WebhookDeliveryList,
    WebhookEndpointCreated,
    WebhookEndpointInput,
    WebhookEndpointList,
    WebhookEndpointPatch,
    WebhookEvent,
    WebhookEventType,
)
from models.schemas import WebhookAttempt as AttemptShape
from models.schemas import WebhookDelivery as DeliveryShape
from models.schemas import WebhookEndpoint as EndpointShape
from services.platform.database import write_transaction
from services.platform.errors import AdminOnly, Conflict, NotFound, ServiceError, field_problem
from services.tickets.ticket_shapes import Wait, shape_ticket

SECRET_PREFIX = "whsec_"
ROTATED_SECRET_HOURS = 24
RECENT_DELIVERIES = 50

_silenced: ContextVar[bool] = ContextVar("webhooks_silenced", default=False)


class WebhookUrlRefused(ServiceError):
    """A webhook address the service will not send to (not https, or a private address)."""

    status = 400
    code = "webhook_url_refused"


# ------------------------------------------------------------------ addresses

def allowance() -> tuple[set[str], list[ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    """The hosts and networks WEBHOOK_ALLOW_PRIVATE lets endpoints use (over plain HTTP too)."""
    setting = current_app.config.get("WEBHOOK_ALLOW_PRIVATE") or ()
    setting = str(setting) if isinstance(setting, (int, float)) else setting
    entries = setting.replace(",", " ").split() if isinstance(setting, str) else list(setting)
    names: set[str] = set()
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            names.add(entry.lower().rstrip("."))
    return names, networks


def is_public(address: str) -> bool:
    """Whether an IP address is a public one: not loopback, private, link-local (the cloud
    metadata address), shared, multicast or reserved, nor an IPv6 form of one of those."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is not None and not is_public(str(embedded)):
            return False
    return ip.is_global and not ip.is_multicast and not ip.is_reserved


def allowed_address(host: str, address: str) -> bool:
    """Whether the service may send to this address of this host: a public one, or one the
    allowance names (by the host's name, or a network holding the address)."""
    names, networks = allowance()
    if host.lower().rstrip(".") in names:
        return True
    ip = ipaddress.ip_address(address)
    return any(ip.version == net.version and ip in net for net in networks) or is_public(address)


def host_allowed_privately(host: str) -> bool:
    """Whether the allowance names this host, or the address it is written as."""
    names, networks = allowance()
    if host.lower().rstrip(".") in names:
        return True
    with contextlib.suppress(ValueError):
        ip = ipaddress.ip_address(host)
        return any(ip.version == net.version and ip in net for net in networks)
    return False


def check_url(url: str, field: str = "url") -> str:
    """The one check of a webhook address when it is registered: http(s), a host, no user or
    password; https unless the allowance names the host; an address written as a number must
    be public (or allowed). Names are resolved and checked again at every send."""
    def refuse(message: str) -> WebhookUrlRefused:
        return WebhookUrlRefused(message, details=[field_problem(field, message)])

    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise refuse("the address is not a valid URL") from None
    host = parts.hostname
    if parts.scheme not in ("https", "http") or not host:
        raise refuse("the address must be an https URL with a host")
    if parts.username is not None or parts.password is not None:
        raise refuse("the address must not carry a user name or password")
    if port == 0:
        raise refuse("the address names port 0")
    allowed = host_allowed_privately(host)
    if not allowed:
        try:
            public = is_public(host)
        except ValueError:  # a name: resolved and checked at send time
            public = not (host.lower() == "localhost" or host.lower().endswith(".localhost"))
        if not public:
            raise refuse("the address is not a public one (loopback, private, link-local or "
                         "metadata addresses are refused)")
    if parts.scheme == "http" and not allowed:
        raise refuse("events are sent only over https")
    return url


# ------------------------------------------------------------------ endpoints

def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _shape(endpoint: WebhookEndpoint, with_secret: bool = False) -> EndpointShape:
    """An endpoint as the API answers it (its secret only when just made or rotated)."""
    values = dict(id=endpoint.id, url=endpoint.url, description=endpoint.description,
                  events=endpoint.events, enabled=endpoint.enabled,
                  disabled_reason=endpoint.disabled_reason, failing_since=endpoint.failing_since,
                  created_at=endpoint.created_at)
    return WebhookEndpointCreated(**values, secret=endpoint.secret) if with_secret \
        else EndpointShape(**values)


def _find(session: Session, company_id: int, endpoint_id: int, *, lock: bool = False
          ) -> WebhookEndpoint:
    """A company's endpoint, or 404 as for a missing one (an id past any row's too)."""
    if not 0 < endpoint_id < 2**31:
        raise NotFound("no webhook endpoint with that id", code="webhook_not_found")
    query = select(WebhookEndpoint).where(WebhookEndpoint.id == endpoint_id,
                                          WebhookEndpoint.company_id == company_id)
    if lock:
        query = query.with_for_update()
    endpoint = session.scalar(query)
    if endpoint is None:
        raise NotFound("no webhook endpoint with that id", code="webhook_not_found")
    return endpoint


def create_endpoint(company_id: int, data: WebhookEndpointInput) -> WebhookEndpointCreated:
    """Register an endpoint and answer it with its secret, shown this once."""
    check_url(data.url)
    with write_transaction() as session:
        endpoint = WebhookEndpoint(company_id=company_id, url=data.url,
                                   description=data.description or None,
                                   events=[str(e) for e in dict.fromkeys(data.events)],
                                   secret=new_secret(), enabled=True)
        session.add(endpoint)
        session.flush()
        return _shape(endpoint, with_secret=True)


def list_endpoints(company_id: int) -> WebhookEndpointList:
    """The company's endpoints, oldest first."""
    rows = db.session.scalars(select(WebhookEndpoint).where(
        WebhookEndpoint.company_id == company_id).order_by(WebhookEndpoint.id))
    return WebhookEndpointList(data=[_shape(row) for row in rows])


def get_endpoint(company_id: int, endpoint_id: int) -> EndpointShape:
    """One of the company's endpoints."""
    return _shape(_find(db.session, company_id, endpoint_id))


def update_endpoint(company_id: int, endpoint_id: int, data: WebhookEndpointPatch) -> EndpointShape:
    """Change an endpoint's address, events, description or whether it is sent to; enabling
    it clears a disabling after failures."""
    if data.url is not None:
        check_url(data.url)
    with write_transaction() as session:
        endpoint = _find(session, company_id, endpoint_id, lock=True)
        if data.url is not None:
            endpoint.url = data.url
        if data.events is not None:
            endpoint.events = [str(e) for e in dict.fromkeys(data.events)]
        if "description" in data.model_fields_set:
            endpoint.description = data.description or None
        if data.enabled is not None:
            endpoint.enabled = data.enabled
            if data.enabled:
                endpoint.disabled_reason = None
                endpoint.failing_since = None
        return _shape(endpoint)


def delete_endpoint(company_id: int, endpoint_id: int) -> EndpointShape:
    """Remove an endpoint with its deliveries and their attempts; answers what was removed."""
    with write_transaction() as session:
        endpoint = _find(session, company_id, endpoint_id, lock=True)
        shaped = _shape(endpoint)
        deliveries = select(WebhookDelivery.id).where(WebhookDelivery.endpoint_id == endpoint.id)
        session.execute(delete(WebhookAttempt).where(WebhookAttempt.delivery_id.in_(deliveries)))
        session.execute(delete(WebhookDelivery).where(WebhookDelivery.endpoint_id == endpoint.id))
        session.delete(endpoint)
    return shaped


def rotate_secret(company_id: int, endpoint_id: int) -> WebhookEndpointCreated:
    """Give an endpoint a new secret; the old one keeps signing beside it for 24 hours."""
    with write_transaction() as session:
        endpoint = _find(session, company_id, endpoint_id, lock=True)
        endpoint.previous_secret = endpoint.secret
        endpoint.previous_secret_expires_at = utcnow() + dt.timedelta(hours=ROTATED_SECRET_HOURS)
        endpoint.secret = new_secret()
        return _shape(endpoint, with_secret=True)


def signing_secrets(endpoint: WebhookEndpoint, now: dt.datetime) -> list[str]:
    """The secrets an event is signed with now: the current one, and a rotated one for a day."""
    kept = endpoint.previous_secret_expires_at is not None and \
        endpoint.previous_secret_expires_at > now
    return [endpoint.secret] + ([endpoint.previous_secret] if kept and endpoint.previous_secret
                                else [])


def sign(secrets_: list[str], message_id: str, at: dt.datetime, body: str) -> str:
    """The `webhook-signature` header: one `v1,` signature per secret, space-separated."""
    return " ".join(Webhook(secret).sign(message_id, at, body) for secret in secrets_)


# ------------------------------------------------------------------ deliveries

def _delivery_shape(row: WebhookDelivery) -> DeliveryShape:
    """A delivery with its attempts, as the API answers it."""
    return DeliveryShape(
        id=row.id, endpoint_id=row.endpoint_id, type=row.event_type, ticket_id=row.ticket_id,
        status=row.status, created_at=row.created_at, next_attempt_at=row.next_attempt_at,
        attempts=[AttemptShape(attempted_at=a.attempted_at, status_code=a.status_code,
                               duration_ms=a.duration_ms, ok=a.ok, error=a.error)
                  for a in row.attempts])


def list_deliveries(company_id: int, endpoint_id: int,
                    limit: int = RECENT_DELIVERIES) -> WebhookDeliveryList:
    """An endpoint's most recent deliveries with their attempts, newest first."""
    _find(db.session, company_id, endpoint_id)
    rows = db.session.scalars(select(WebhookDelivery).where(
        WebhookDelivery.endpoint_id == endpoint_id)
        .order_by(WebhookDelivery.created_at.desc(), WebhookDelivery.id.desc()).limit(limit))
    return WebhookDeliveryList(data=[_delivery_shape(row) for row in rows])


def replay(company_id: int, endpoint_id: int, delivery_id: str) -> DeliveryShape:
    """Send a delivery again, with the same `webhook-id`, now and then on the retry schedule."""
    with write_transaction() as session:
        endpoint = _find(session, company_id, endpoint_id)
        row = session.scalar(select(WebhookDelivery).where(
            WebhookDelivery.id == delivery_id, WebhookDelivery.endpoint_id == endpoint.id)
            .with_for_update())
        if row is None:
            raise NotFound("no delivery with that id on this endpoint",
                           code="webhook_delivery_not_found")
        if not endpoint.enabled:
            raise Conflict("the endpoint is disabled; enable it before replaying",
                           code="webhook_disabled")
        row.status = "pending"
        row.next_attempt_at = utcnow()
        row.first_tried_at = None
        session.flush()
        return _delivery_shape(row)


def require_admin(reviewer) -> None:
    """403 admin_only unless the reviewer is a company admin (webhooks act for the company)."""
    if not getattr(reviewer, "is_admin", False):
        raise AdminOnly("only a company admin can manage webhooks; ask one of them")


def company_admins(session: Session, company_id: int) -> list[str]:
    """The e-mail addresses of the company's admins who can still sign in."""
    return list(session.scalars(select(Reviewer.email).where(
        Reviewer.company_id == company_id, Reviewer.is_admin.is_(True),
        Reviewer.disabled_at.is_(None))))


# ------------------------------------------------------------------ the outbox

@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """Emit no events in the block (the connection test's scratch tickets are nobody's)."""
    token = _silenced.set(True)
    try:
        yield
    finally:
        _silenced.reset(token)


def rejection_event(ticket: TicketRecord) -> str:
    """A rejected ticket from a capture link is sent back to its crew, who may correct it;
    one sent by a program is rejected."""
    return WebhookEventType.SENT_BACK if ticket.link_token else WebhookEventType.REJECTED


def emit(session: Session, ticket: TicketRecord, event_type: str, shaped: Ticket | None = None
         ) -> None:
    """Store the event for each enabled endpoint of the ticket's company that takes it, in the
    caller's transaction, with the ticket as `GET /v1/tickets/{id}` answers it now."""
    if _silenced.get():
        return
    endpoints = [e for e in session.scalars(select(WebhookEndpoint).where(
        WebhookEndpoint.company_id == ticket.company_id, WebhookEndpoint.enabled.is_(True)))
        if str(event_type) in e.events]
    if not endpoints:
        return
    if shaped is None:
        session.flush()
        shaped = shape_ticket(ticket, Wait.NO)
    now = utcnow()
    body = WebhookEvent(type=event_type, timestamp=now, data=shaped).model_dump_json()
    for endpoint in endpoints:
        session.add(WebhookDelivery(
            id="msg_" + uuid.uuid4().hex, company_id=ticket.company_id, endpoint_id=endpoint.id,
            event_type=str(event_type), ticket_id=ticket.id, payload=body, created_at=now,
            status="pending", next_attempt_at=now, attempt_count=0))


def page_listing(company_id: int, deliveries: int = 10) -> list[tuple[EndpointShape, list[DeliveryShape]]]:
    """The keys page's webhooks: each endpoint with its most recent deliveries."""
    return [(endpoint, list_deliveries(company_id, endpoint.id, deliveries).data)
            for endpoint in list_endpoints(company_id).data]


def replay_by_reviewer(reviewer, endpoint_id: int, delivery_id: str) -> DeliveryShape:
    """Replay from the keys page: company admins only."""
    require_admin(reviewer)
    return replay(reviewer.company_id, endpoint_id, delivery_id)
