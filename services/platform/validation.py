"""One place that turns Pydantic validation into the service's 400 answers."""
from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from services.platform.errors import ValidationFailed, field_problem

M = TypeVar("M", bound=BaseModel)
# The error type of a model's check across fields; its context names the field it is about.
FIELD_PROBLEM = "field_problem"


def error_path(location: tuple[Any, ...]) -> str:
    """Render a Pydantic error location as a path such as 'labor[2].hours'."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path or "body"


def validation_details(error: ValidationError) -> list[dict[str, str]]:
    """Turn a Pydantic ValidationError into the details list of a 400."""
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        message = item["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, "):]
        location = tuple(item["loc"])
        if item["type"] == FIELD_PROBLEM:  # a check across fields, naming the field it is about
            location += (item["ctx"]["field"],)
        problems.append(field_problem(error_path(location), message))
    return problems


def validate(model: type[M], data: Any) -> M:
    """Validate data against a model, raising a 400 that lists every problem."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ValidationFailed("the request has problems; see details",
                               details=validation_details(error)) from error


def form_number(text: str) -> bool:
    """Whether a form's text is a whole number that fits an id (ASCII digits, under 19)."""
    return text.isascii() and text.isdigit() and len(text) < 19
