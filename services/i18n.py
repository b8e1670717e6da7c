"""Crew pages in the crew's language: Spanish or English, from the phone's language or the switch.

Flask-Babel translates the templates and the server's messages; the capture page's script
gets its own words from the same catalog (translations/<lang>/LC_MESSAGES/messages.po), sent
with the page so they work with no signal.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from flask import Flask, Response, request
from flask_babel import Babel, get_locale, gettext

LANGUAGES = ("en", "es")
COOKIE = "crew_lang"
_SCRIPT_WORDS = re.compile(r'\bt\("((?:[^"\\]|\\.)*)"')


def select_locale() -> str:
    """?lang= (the page's switch), then the remembered choice, then the phone's language."""
    asked = request.args.get("lang")
    if asked in LANGUAGES:
        return asked
    kept = request.cookies.get(COOKIE)
    if kept in LANGUAGES:
        return kept
    return request.accept_languages.best_match(LANGUAGES) or "en"


def current_language() -> str:
    """The language of the page being rendered."""
    locale = get_locale()
    return locale.language if locale is not None else "en"


def remember_choice(response: Response) -> Response:
    """Keep a language chosen with the switch for the crew's next pages."""
    asked = request.args.get("lang")
    if asked in LANGUAGES and request.cookies.get(COOKIE) != asked:
        path = "/s/" if request.path.startswith("/s/") else "/c/"
        response.set_cookie(COOKIE, asked, max_age=365 * 24 * 3600, path=path, samesite="Lax",
                            secure=request.is_secure, httponly=True)
    return response


@functools.lru_cache(maxsize=4)
def script_words(script: str) -> tuple[str, ...]:
    """The words a crew script shows, as written in it: every t("...") call."""
    text = (Path(__file__).resolve().parent.parent / "static" / script).read_text(encoding="utf-8")
    return tuple(dict.fromkeys(match.replace("\\\"", "\"")
                               for match in _SCRIPT_WORDS.findall(text)))


def script_messages(script: str) -> dict[str, str]:
    """A script's words in the page's language (empty in English: the script has them)."""
    if current_language() == "en":
        return {}
    return {words: gettext(words) for words in script_words(script)}


def init_app(app: Flask) -> None:
    """Set up Flask-Babel with the locale chosen per request."""
    app.config.setdefault("BABEL_DEFAULT_LOCALE", "en")
    app.config.setdefault("BABEL_TRANSLATION_DIRECTORIES",
                          str(Path(app.root_path) / "translations"))
    Babel(app, locale_selector=select_locale)
    app.jinja_env.globals.update(crew_language=current_language, languages=LANGUAGES)
