"""Every word a crew or a signer can be shown has its Spanish in the catalog."""
from __future__ import annotations

from pathlib import Path

from babel.messages.extract import extract_from_file
from babel.messages.pofile import read_po

from services.platform.i18n import script_plurals, script_words

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "translations" / "es" / "LC_MESSAGES" / "messages.po"
# The pages crews, signers and subs' offices see, and the code that gives them words (the labels
# of a ticket's optional fields, marked N_, among them).
TEMPLATES = ("templates/capture/*.html", "templates/signing/*.html", "templates/share/*.html")
CODE = ("services/**/*.py", "blueprints/*.py", "models/schemas.py")
SCRIPTS = ("capture.js", "capture-gone.js", "signing.js")
KEYWORDS = {"_": None, "gettext": None, "lazy_gettext": None, "ngettext": (1, 2), "N_": None}


def translated() -> set[str | tuple[str, str]]:
    """The English messages the Spanish catalog has a translation for: a text, or a text with a
    count as (singular, plural) when every one of its forms is there."""
    with CATALOG.open("rb") as handle:
        return {message.id for message in read_po(handle) if message.id and (
            all(message.string) if message.pluralizable else message.string)}


def words_in(patterns: tuple[str, ...], method: str) -> dict[str | tuple[str, str], str]:
    """Each message found in the files, with the first file that uses it."""
    found: dict[str | tuple[str, str], str] = {}
    for pattern in patterns:
        for path in sorted(ROOT.glob(pattern)):
            for _line, message, _comments, _context in extract_from_file(
                    method, str(path), keywords=KEYWORDS):
                found.setdefault(message, str(path.relative_to(ROOT)))
    return found


def test_every_crew_and_signer_message_has_its_spanish():
    words = {**words_in(TEMPLATES, "jinja2.ext.babel_extract"), **words_in(CODE, "python")}
    for script in SCRIPTS:
        words.update(dict.fromkeys(script_words(script), f"static/{script}"))
        words.update(dict.fromkeys(script_plurals(script), f"static/{script}"))
    missing = sorted(f"{where}: {message!r}" for message, where in words.items()
                     if message not in translated())
    assert not missing, "\n".join(missing)


def test_a_script_gets_each_plural_form_of_a_count_from_the_catalog(app):
    from services.platform.i18n import script_messages

    refused = "{count} photo could not be used."
    with app.test_request_context("/c/x?lang=es"):
        forms = script_messages("capture.js")[refused]
        gone = script_messages("capture-gone.js")
    # By the browser's plural categories for Spanish: 1 is "one"; a million is "many".
    assert forms["one"] == "{count} foto no se pudo usar."
    assert forms["other"] == "{count} fotos no se pudieron usar."
    assert forms["many"] == forms["other"]
    assert all("(s)" not in form for form in forms.values())
    kept = gone["{count} ticket written with this link is still on this phone and not lost: {names}."]
    assert kept["one"].startswith("{count} boleta escrita") and kept["other"].startswith("{count} boletas")
    with app.test_request_context("/c/x?lang=en"):
        assert script_messages("capture.js") == {}  # English: the script has its own words
