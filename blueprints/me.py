"""GET /v1/me: which company and key is calling."""
from __future__ import annotations

from flask import Blueprint, g

from blueprints.api import api_route
from models.schemas import Me
from services.accounts import companies

bp = Blueprint("me", __name__)


@api_route(bp, "/me", tag="account", response=Me)
def get_me() -> Me:
    """Tell which company and key the request is authenticated as.

    Answers from the database alone, never asking the project system: a cheap check that a
    key works.
    """
    return companies.describe_caller(g.api_key)
