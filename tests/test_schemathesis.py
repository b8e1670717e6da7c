"""Property-based checks of every /v1 operation against its own OpenAPI document: each operation
alone, then chains of calls along the document's links (the stateful phase)."""
from __future__ import annotations

import tempfile

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from app import create_app
from tests import schemathesis_hooks  # noqa: F401 - the cases' content (registered on import)
from tests.conftest import connect_tenant


class CurrentApp:
    """A WSGI app that hands each request to the app of the running test."""

    def __init__(self) -> None:
        self.app = None

    def __call__(self, environ, start_response):
        """Forward to the current app."""
        return self.app(environ, start_response)


current = CurrentApp()
with tempfile.TemporaryDirectory() as _folder:
    # The document needs no database; a throwaway app serves it for loading.
    current.app = create_app({"TESTING": True, "INSTANCE_PATH": _folder, "SECRET_KEY": "doc",
                              "SQLALCHEMY_DATABASE_URI": "sqlite://"})
    schema = schemathesis.openapi.from_wsgi("/v1/openapi.json", current)

SUITE_SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                                 HealthCheck.function_scoped_fixture])


@pytest.fixture
def api_app(app):
    """The app under test, taking the generated calls; its rate limit is lifted for them."""
    app.config["API_RATE_LIMIT"] = "100000 per minute"
    current.app = app
    return app


@pytest.fixture
def api_tenant(api_app):
    """A connected company on the app under test."""
    return connect_tenant(api_app)


def assert_codes_documented(case, response) -> None:
    """Every error code an operation answers is listed on its documented response (a 405 for a
    method the path does not serve is no response of the operation)."""
    documented = case.operation.definition.raw["responses"].get(str(response.status_code))
    if response.status_code >= 400 and documented is not None:
        assert response.json()["error"]["code"] in documented["x-error-codes"]


@schema.parametrize()
@SUITE_SETTINGS
def test_every_operation_conforms(case, api_tenant):
    """No 5xx; statuses, content types, headers and bodies as documented; what the document
    calls valid is accepted and what it calls invalid refused; no key means 401."""
    response = case.call_and_validate(headers=dict(api_tenant.headers))
    assert_codes_documented(case, response)


def linked_calls(app) -> type:
    """The document's state machine: each chain of calls on a company of its own (so a chain
    replayed meets the same answers), checking error codes too."""

    class LinkedCalls(schema.as_state_machine()):
        """Chains of calls along the document's links."""

        def setup(self):
            """A fresh connected company and key for this chain."""
            self.headers = dict(connect_tenant(app).headers)

        def get_call_kwargs(self, case):
            """Every call carries the chain's key."""
            return {"headers": self.headers}

        def after_call(self, response, case):
            """Error codes as documented, besides what the state machine records."""
            super().after_call(response, case)
            assert_codes_documented(case, response)

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            """Every check, knowing the key is the caller's own (not one generated for the case)."""
            case.validate_response(response, additional_checks=additional_checks, headers=self.headers,
                                   transport_kwargs=kwargs or None, recorder=self.recorder)

    return LinkedCalls


def test_linked_operations_conform(api_app):
    """Create a ticket, then read, price, approve, reject or restore it; make a link and revoke it;
    list projects, then save a rate sheet or an authorization on one and read or delete it: every
    check on every step, and a resource made is there until it is deleted."""
    linked_calls(api_app).run(settings=settings(SUITE_SETTINGS, max_examples=20, stateful_step_count=15))
