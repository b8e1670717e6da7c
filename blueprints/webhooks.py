"""/v1/webhooks: endpoints a company's programs are sent signed ticket events at, their
secrets, deliveries and replays."""
from __future__ import annotations

from flask import Blueprint, Response, g

from blueprints.api import api_route, to_json
from models.schemas import (
    WebhookDelivery,
    WebhookDeliveryList,
    WebhookEndpoint,
    WebhookEndpointCreated,
    WebhookEndpointInput,
    WebhookEndpointList,
    WebhookEndpointPatch,
)
from services.webhooks import webhooks

bp = Blueprint("webhooks", __name__)

NOT_FOUND = {404: ("webhook_not_found",)}
URL_REFUSED = {400: ("webhook_url_refused",)}
URL_REFUSED_TEXT = ("`webhook_url_refused`: the address is not https, or names a loopback, "
                    "private, link-local or metadata address (unless the server's "
                    "WEBHOOK_ALLOW_PRIVATE allows its host); `details` names the field.")


def _unstored(answer: WebhookEndpointCreated) -> Response:
    """An answer holding a secret, which no cache may keep."""
    response = to_json(answer)
    response.headers["Cache-Control"] = "no-store"
    return response


@api_route(bp, "/webhooks", tag="webhooks", response=WebhookEndpointList)
def list_webhooks() -> WebhookEndpointList:
    """List the company's webhook endpoints, oldest first.

    Their secrets are not shown again; `disabled_reason` and `failing_since` say why one is off
    or failing.
    """
    return webhooks.list_endpoints(g.company_id)


@api_route(bp, "/webhooks", method="POST", tag="webhooks", body=WebhookEndpointInput,
           response=WebhookEndpointCreated, errors=URL_REFUSED,
           extra_responses={400: URL_REFUSED_TEXT})
def create_webhook(body: WebhookEndpointInput) -> Response:
    """Register an endpoint to be sent the company's ticket events; answers its secret once.

    Each event is a POST signed per Standard Webhooks (`webhook-id`, `webhook-timestamp`,
    `webhook-signature`) with the `secret` answered here, which is not shown again (see
    `rotate-secret`). The events and their bodies are in this document's `webhooks` section.
    """
    return _unstored(webhooks.create_endpoint(g.company_id, body))


@api_route(bp, "/webhooks/<int:endpoint_id>", tag="webhooks", response=WebhookEndpoint,
           errors=NOT_FOUND)
def get_webhook(endpoint_id: int) -> WebhookEndpoint:
    """Read one webhook endpoint.

    Its secret is not shown again; rotate it to get a new one.
    """
    return webhooks.get_endpoint(g.company_id, endpoint_id)


@api_route(bp, "/webhooks/<int:endpoint_id>", method="PATCH", tag="webhooks",
           body=WebhookEndpointPatch, response=WebhookEndpoint,
           errors={**URL_REFUSED, **NOT_FOUND}, extra_responses={400: URL_REFUSED_TEXT})
def update_webhook(endpoint_id: int, body: WebhookEndpointPatch) -> WebhookEndpoint:
    """Change an endpoint's address, events, description, or whether it is sent to.

    `enabled: true` also clears a disabling after three days of failures; its deliveries that
    were waiting are then sent again.
    """
    return webhooks.update_endpoint(g.company_id, endpoint_id, body)


@api_route(bp, "/webhooks/<int:endpoint_id>", method="DELETE", tag="webhooks",
           response=WebhookEndpoint, errors=NOT_FOUND)
def delete_webhook(endpoint_id: int) -> WebhookEndpoint:
    """Remove an endpoint with its deliveries; answers the endpoint removed.

    Events not yet sent to it are dropped with it.
    """
    return webhooks.delete_endpoint(g.company_id, endpoint_id)


@api_route(bp, "/webhooks/<int:endpoint_id>/rotate-secret", method="POST", tag="webhooks",
           response=WebhookEndpointCreated, errors=NOT_FOUND)
def rotate_webhook_secret(endpoint_id: int) -> Response:
    """Give an endpoint a new secret, answered once; the old one keeps signing for 24 hours.

    Meanwhile `webhook-signature` carries a signature by each secret, so a receiver verifies
    with either while it changes over.
    """
    return _unstored(webhooks.rotate_secret(g.company_id, endpoint_id))


@api_route(bp, "/webhooks/<int:endpoint_id>/deliveries", tag="webhooks",
           response=WebhookDeliveryList, errors=NOT_FOUND)
def list_webhook_deliveries(endpoint_id: int) -> WebhookDeliveryList:
    """List an endpoint's 50 most recent deliveries, newest first, with their attempts.

    Each attempt gives its time, the answer's status (null when none came), how long it took
    and why it failed; attempts are kept 30 days.
    """
    return webhooks.list_deliveries(g.company_id, endpoint_id)


@api_route(bp, "/webhooks/<int:endpoint_id>/deliveries/<delivery_id>/replay", method="POST",
           tag="webhooks", response=WebhookDelivery,
           errors={404: ("webhook_not_found", "webhook_delivery_not_found"),
                   409: ("webhook_disabled",)},
           extra_responses={409: "`webhook_disabled`: enable the endpoint first."})
def replay_webhook_delivery(endpoint_id: int, delivery_id: str) -> WebhookDelivery:
    """Send one delivery again, with the same `webhook-id`, as soon as the worker can.

    It is then retried on the usual schedule if the endpoint fails.
    """
    return webhooks.replay(g.company_id, endpoint_id, delivery_id)
