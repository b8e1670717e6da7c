"""Pydantic shapes of every /v1 request and response: one model per shape.

These models validate input and generate the OpenAPI document, so the
document is never a second, hand-kept copy.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Shape(BaseModel):
    """Base of every API shape: unknown input fields are ignored, output is plain JSON."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class ErrorDetail(Shape):
    """The inside of every error body."""

    code: str = Field(description="Stable, machine-readable error code.")
    message: str = Field(description="Human-readable explanation.")
    details: Any = Field(default=None, description=(
        "Optional. For validation errors: a list of {field, message}, one per problem."))


class ErrorBody(Shape):
    """Every error under /v1 has this shape."""

    error: ErrorDetail


class CompanyRef(Shape):
    """A company as shown to its own callers."""

    id: int
    name: str


class KeyRef(Shape):
    """The calling API key, without its secret."""

    name: str
    prefix: str = Field(description="The first characters of the key, enough to recognise it.")


class Me(Shape):
    """Who is calling: the company the key belongs to, and the key itself."""

    company: CompanyRef
    key: KeyRef
