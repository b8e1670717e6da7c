"""Every word a crew or a signer can be shown has its Spanish in the catalog."""
from __future__ import annotations

from pathlib import Path

from babel.messages.extract import extract_from_file
from babel.messages.pofile import read_po

from services.i18n import script_words

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "translations" / "es" / "LC_MESSAGES" / "messages.po"
# The pages crews and signers see, and the code that gives them words.
TEMPLATES = ("templates/capture/*.html", "templates/signing/*.html")
CODE = ("services/*.py", "blueprints/*.py")
SCRIPTS = ("capture.js", "capture-gone.js", "signing.js")


def translated() -> set[str]:
    """The English messages the Spanish catalog has a translation for."""
    with CATALOG.open("rb") as handle:
        return {message.id for message in read_po(handle) if message.id and message.string}


def words_in(patterns: tuple[str, ...], method: str) -> dict[str, str]:
    """Each message found in the files, with the first file that uses it."""
    found: dict[str, str] = {}
    for pattern in patterns:
        for path in sorted(ROOT.glob(pattern)):
            for _line, message, _comments, _context in extract_from_file(
                    method, str(path), keywords={"_": None, "gettext": None, "lazy_gettext": None}):
                found.setdefault(message, str(path.relative_to(ROOT)))
    return found


def test_every_crew_and_signer_message_has_its_spanish():
    words = {**words_in(TEMPLATES, "jinja2.ext.babel_extract"), **words_in(CODE, "python")}
    for script in SCRIPTS:
        words.update({message: f"static/{script}" for message in script_words(script)})
    missing = sorted(f"{where}: {message!r}" for message, where in words.items()
                     if message not in translated())
    assert not missing, "\n".join(missing)
