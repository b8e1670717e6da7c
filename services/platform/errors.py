"""Errors that services raise; the /v1 error handler turns each into the error body."""
from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """A refusal with an HTTP status, a stable machine-readable code and a message."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None,
                 status: int | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.details = details
        self.headers = headers or {}


class ValidationFailed(ServiceError):
    """The input is incomplete or wrong; details lists every problem at once."""

    status = 400
    code = "validation_failed"


class NotFound(ServiceError):
    """No such resource on the caller's company (also for another company's resources)."""

    status = 404
    code = "not_found"


class Conflict(ServiceError):
    """The resource is in a state that forbids the request."""

    status = 409
    code = "conflict"


class Unauthorized(ServiceError):
    """The request carries no usable credential."""

    status = 401
    code = "unauthorized"


class AdminOnly(ServiceError):
    """A reviewer who is not a company admin asked for what acts for the whole company."""

    status = 403
    code = "admin_only"


class UntrustedHost(ServiceError):
    """The request names a host this service does not answer to (TRUSTED_HOSTS)."""

    status = 400
    code = "host_not_served"


class ProjectSystemRefused(ServiceError):
    """The project system refused or could not take a call; its own message is passed on."""

    status = 502
    code = "project_system_error"


def field_problem(field: str, message: str) -> dict[str, str]:
    """One entry of a validation error's details list."""
    return {"field": field, "message": message}
