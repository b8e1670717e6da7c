"""Crew pages in the crew's language: Spanish or English, from the phone's language or the switch.

Flask-Babel translates the templates and the server's messages; the capture page's script
gets its own words from the same catalog (translations/<lang>/LC_MESSAGES/messages.po), sent
with the page so they work with no signal. A text with a count is sent as its catalog forms by
the language's plural categories (CLDR's, as the browser's Intl.PluralRules names them).
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from babel import Locale
from flask import Flask, Response, request
from flask_babel import Babel, get_locale, get_translations, gettext

LANGUAGES = ("en", "es")
COOKIE = "crew_lang"
_SCRIPT_WORDS = re.compile(r'\bt\("((?:[^"\\]|\\.)*)"')
_SCRIPT_PLURALS = re.compile(r'\btn\(\s*"((?:[^"\\]|\\.)*)",\s*"((?:[^"\\]|\\.)*)"')
# Counts tried for a sample of each plural category (a category met only by fractions has none:
# the script then takes the "other" form, as CLDR says).
_SAMPLE_COUNTS = (*range(0, 112), 1_000, 1_000_000)

STATIC = Path(__file__).resolve().parents[2] / "static"  # the project's static/ folder


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
        path = next((prefix for prefix in ("/s/", "/l/") if request.path.startswith(prefix)), "/c/")
        response.set_cookie(COOKIE, asked, max_age=365 * 24 * 3600, path=path, samesite="Lax",
                            secure=request.is_secure, httponly=True)
    return response


def _script_text(script: str) -> str:
    """The source of a crew script in static/."""
    return (STATIC / script).read_text(encoding="utf-8")


def _unescaped(words: str) -> str:
    """A string as written between quotes in a script, without its escapes."""
    return words.replace("\\\"", "\"")


@functools.lru_cache(maxsize=4)
def script_words(script: str) -> tuple[str, ...]:
    """The words a crew script shows, as written in it: every t("...") call."""
    return tuple(dict.fromkeys(_unescaped(words)
                               for words in _SCRIPT_WORDS.findall(_script_text(script))))


@functools.lru_cache(maxsize=4)
def script_plurals(script: str) -> tuple[tuple[str, str], ...]:
    """The texts with a count a crew script shows: every tn("singular", "plural", ...) call."""
    return tuple(dict.fromkeys((_unescaped(one), _unescaped(many))
                               for one, many in _SCRIPT_PLURALS.findall(_script_text(script))))


@functools.lru_cache(maxsize=8)
def plural_samples(language: str) -> dict[str, int]:
    """A count for each plural category of a language that whole numbers reach: {'one': 1, ...}."""
    rule = Locale.parse(language).plural_form
    samples: dict[str, int] = {}
    for count in _SAMPLE_COUNTS:
        samples.setdefault(rule(count), count)
    return samples


def script_messages(script: str) -> dict[str, str | dict[str, str]]:
    """A script's words in the page's language (empty in English: the script has them); a text
    with a count comes under its singular as its forms by plural category, from the catalog."""
    language = current_language()
    if language == "en":
        return {}
    messages: dict[str, str | dict[str, str]] = {words: gettext(words)
                                                 for words in script_words(script)}
    translations = get_translations()
    for one, many in script_plurals(script):
        messages[one] = {category: translations.ngettext(one, many, count)
                         for category, count in plural_samples(language).items()}
    return messages


def init_app(app: Flask) -> None:
    """Set up Flask-Babel with the locale chosen per request."""
    app.config.setdefault("BABEL_DEFAULT_LOCALE", "en")
    app.config.setdefault("BABEL_TRANSLATION_DIRECTORIES",
                          str(Path(app.root_path) / "translations"))
    Babel(app, locale_selector=select_locale)
    app.jinja_env.globals.update(crew_language=current_language, languages=LANGUAGES)
