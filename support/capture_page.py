"""The capture page worked as a crew works it, through Playwright: a ticket filled in, a signature
drawn."""
from __future__ import annotations


def fill_ticket(page) -> None:
    """Fill the ticket's words and its first labor line."""
    page.fill('textarea[name="description"]', "Cut and patched slab for the plumber's sleeve")
    page.fill('textarea[name="reason"]', "Sleeve was missed by the plumbing sub")
    page.fill('input[name="directed_by"]', "Sam Ortiz, GC superintendent")
    page.fill('input[name="captured_by"]', "Lee Park")
    page.fill('input[name="labor[0].trade"]', "Concrete finisher")
    page.fill('input[name="labor[0].workers"]', "2")
    page.fill('input[name="labor[0].hours"]', "3")
    page.fill('input[name="labor[0].rate"]', "72.50")
    page.fill('input[name="labor[0].costCode"]', "03-300")


def sign(page) -> None:
    """Draw a signature on the canvas with the pointer."""
    page.locator("#signature-pad").scroll_into_view_if_needed()
    box = page.locator("#signature-pad").bounding_box()
    page.mouse.move(box["x"] + 20, box["y"] + box["height"] / 2)
    page.mouse.down()
    for step in range(1, 12):
        page.mouse.move(box["x"] + 20 + step * 22, box["y"] + box["height"] / 2 + (-1) ** step * 30)
    page.mouse.up()


# Every change of the tray's words, kept in the page as it happens (no polling to miss one).
_WATCH_TRAY = """() => {
  const box = document.getElementById("queue-status");
  const said = window.trayWords = [], at = window.trayTimes = [];
  let last = box.textContent;
  new MutationObserver(() => {
    if (last !== box.textContent) { said.push(last = box.textContent); at.push(performance.now()); }
  }).observe(box, {childList: true, characterData: true, subtree: true});
}"""


def watch_tray(page) -> None:
    """From now on, keep every change of the tray's words in the page."""
    page.evaluate(_WATCH_TRAY)


def tray_said(page, before: str | None = None) -> list[str]:
    """Each new wording of the tray since watch_tray, in order; with `before` (a script giving a
    moment on the page's clock), only those said before that moment."""
    if before is None:
        return page.evaluate("window.trayWords.slice()")
    return page.evaluate(f"(() => {{ const moment = {before}; return window.trayWords.filter("
                         "(words, i) => window.trayTimes[i] < moment); })()")
