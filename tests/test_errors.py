"""Error shapes under /v1 and HTML error pages elsewhere."""
from __future__ import annotations

import pytest
from flask import Blueprint
from pydantic import Field

from blueprints import api as api_module
from blueprints.api import api_route
from models.schemas import Shape


def _assert_error(response, status, code):
    assert response.status_code == status
    assert response.mimetype == "application/json"
    body = response.json
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def test_unknown_v1_path_is_404_in_shape(client, tenant):
    _assert_error(client.get("/v1/does-not-exist"), 404, "not_found")
    _assert_error(client.post("/v1/does-not-exist", headers=tenant.headers), 404, "not_found")


def test_wrong_method_is_405_in_shape(client, tenant):
    response = client.delete("/v1/me", headers=tenant.headers)
    _assert_error(response, 405, "method_not_allowed")
    assert "GET" in response.headers["Allow"]


def test_pages_get_html_errors(client):
    response = client.get("/no-such-page")
    assert response.status_code == 404
    assert response.mimetype == "text/html"
    assert b"404" in response.data


class EchoInput(Shape):
    """A body used only to exercise body parsing."""

    name: str = Field(min_length=1, max_length=10)
    count: int = Field(ge=0, le=5)


@pytest.fixture
def echo_app(app):
    """The app with one extra POST route that echoes a validated body."""
    blueprint = Blueprint("echo_for_tests", __name__)
    before = len(api_module.OPERATIONS)

    @api_route(blueprint, "/echo", method="POST", tag="tests", body=EchoInput, response=EchoInput)
    def echo(body: EchoInput) -> EchoInput:
        """Echo the body."""
        return body

    del api_module.OPERATIONS[before:]
    app.register_blueprint(blueprint)
    app.config["MAX_CONTENT_LENGTH"] = 2048
    return app


def test_body_errors_have_the_shape(echo_app, tenant):
    client = echo_app.test_client()
    headers = dict(tenant.headers)

    def post(data, content_type="application/json"):
        return client.post("/v1/echo", data=data, headers=headers, content_type=content_type)

    assert post('{"name": "ok", "count": 1}').json == {"name": "ok", "count": 1}
    _assert_error(post('{"name": '), 400, "invalid_json")
    _assert_error(post('[1, 2]'), 400, "invalid_body")
    _assert_error(post('"text"'), 400, "invalid_body")
    _assert_error(post('{"name": "a", "count": NaN}'), 400, "invalid_json")
    _assert_error(post('{"name": "a", "count": Infinity}'), 400, "invalid_json")
    _assert_error(post(b'\xff\xfe{'), 400, "invalid_json")
    _assert_error(post("[" * 1020 + "]" * 1020), 400, "invalid_json")
    _assert_error(post(""), 400, "body_required")
    _assert_error(post("name=a", "application/x-www-form-urlencoded"), 415, "unsupported_media_type")
    _assert_error(post('{"name": "' + "x" * 4000 + '"}'), 413, "payload_too_large")
    error = _assert_error(post('{"name": "", "count": 9}'), 400, "validation_failed")
    assert {d["field"] for d in error["details"]} == {"name", "count"}


def test_authentication_comes_before_body_parsing(echo_app):
    response = echo_app.test_client().post("/v1/echo", data="{", content_type="application/json")
    _assert_error(response, 401, "api_key_missing")


def test_unexpected_exception_is_a_500_in_shape(app, tenant):
    blueprint = Blueprint("boom_for_tests", __name__)
    before = len(api_module.OPERATIONS)

    @api_route(blueprint, "/boom", tag="tests")
    def boom():
        """Fail on purpose."""
        raise RuntimeError("secret internals")

    del api_module.OPERATIONS[before:]
    app.register_blueprint(blueprint)
    response = app.test_client().get("/v1/boom", headers=tenant.headers)
    error = _assert_error(response, 500, "internal_error")
    assert "secret internals" not in error["message"]
