"""The capture page and photo compression as a phone sees them, in Debian's headless Chromium.

Throttling is Lighthouse's mobile profile applied through the DevTools protocol:
150 ms round trip, 1.6 Mbit/s down, 750 kbit/s up, and the CPU slowed 4x.
"""
from __future__ import annotations

import base64
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from support.capture_page import fill_ticket, sign
from support.network import ThrottlingProxy, photo_key, ticket_upload

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
NETWORK = {"offline": False, "latency": 150, "downloadThroughput": 1.6e6 / 8,
           "uploadThroughput": 750e3 / 8}
CPU_SLOWDOWN = 4
PHONE = {"viewport": {"width": 360, "height": 740}, "device_scale_factor": 2,
         "is_mobile": True, "has_touch": True}

# Records when the form becomes usable: the page's script has marked <html class="js">
# and the description textarea takes typing. Times are ms since navigation start.
USABLE_PROBE = """
(() => {
  const check = () => {
    if (window.__usableAt !== undefined) return;
    const box = document.querySelector('textarea[name=description]');
    if (document.documentElement && document.documentElement.classList.contains('js')
        && box && !box.disabled && !box.readOnly) {
      window.__usableAt = performance.now();
    }
  };
  new MutationObserver(check).observe(document, {subtree: true, childList: true,
                                                 attributes: true, attributeFilter: ['class']});
})();
"""

# Records when a photo is chosen (capturing listener, so before the page's own) and
# when its compressed preview appears in #photo-list.
PHOTO_PROBE = """
(() => {
  document.addEventListener('change', (event) => {
    if (event.target && event.target.name === 'photo_files') window.__photoStart = performance.now();
  }, true);
  new MutationObserver(() => {
    const img = document.querySelector('#photo-list img');
    if (img && window.__photoDone === undefined) {
      window.__photoDone = performance.now();
      window.__photoDataUrl = img.src;
    }
  }).observe(document, {subtree: true, childList: true});
})();
"""

# The ceiling for compression: decode once, draw once at 2048 px, encode once at
# quality 0.8 — the least any page must do — without the page's retries and data URL.
MINIMAL_COMPRESS = """
async (input) => {
  const file = input.files[0];
  const start = performance.now();
  const bitmap = await createImageBitmap(file);
  const scale = Math.min(1, 2048 / Math.max(bitmap.width, bitmap.height));
  const canvas = document.createElement('canvas');
  canvas.width = Math.round(bitmap.width * scale);
  canvas.height = Math.round(bitmap.height * scale);
  canvas.getContext('2d').drawImage(bitmap, 0, 0, canvas.width, canvas.height);
  bitmap.close();
  const blob = await new Promise((resolve) => canvas.toBlob(resolve, 'image/jpeg', 0.8));
  return {ms: performance.now() - start, bytes: blob.size, width: canvas.width, height: canvas.height};
}
"""


@dataclass
class PageLoad:
    """One first load of a page under throttling."""

    url: str
    transfer_bytes: int
    js_bytes: int
    css_bytes: int
    html_bytes: int
    usable_ms: float
    dom_content_loaded_ms: float
    load_ms: float
    resources: list[dict] = field(default_factory=list)


@dataclass
class PageFigures:
    """Several first loads of one page: bytes from the first, times as medians."""

    url: str
    transfer_bytes: int
    js_bytes: int
    usable_ms: float
    usable_runs: list[float]
    resources: list[dict]


def _wait(page, expression: str, timeout_s: float = 120.0) -> None:
    """Poll an expression from outside the page until it is true.

    The capture page's CSP forbids eval, which Playwright's wait_for_function relies on; a
    plain evaluate through the DevTools protocol is not subject to it. The figures come from
    the page's own clock, so the polling interval does not affect them.
    """
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise TimeoutError(f"still false after {timeout_s:.0f} s: {expression}")
        time.sleep(0.05)


def launch(playwright):
    """Debian's Chromium through Playwright with the agreed flags."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def _throttle(context, page, *, network: bool) -> object:
    """Apply the CPU (and optionally network) throttling to a page through CDP."""
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    if network:
        cdp.send("Network.setCacheDisabled", {"cacheDisabled": False})
        cdp.send("Network.emulateNetworkConditions", NETWORK)
    cdp.send("Emulation.setCPUThrottlingRate", {"rate": CPU_SLOWDOWN})
    return cdp


def first_load(browser, url: str) -> PageLoad:
    """Open url in a fresh phone context (empty cache) and measure bytes and time to usable."""
    context = browser.new_context(**PHONE)
    try:
        page = context.new_page()
        page.add_init_script(USABLE_PROBE)
        cdp = _throttle(context, page, network=True)
        kinds: dict[str, tuple[str, str]] = {}
        sizes: dict[str, int] = {}
        cdp.on("Network.responseReceived",
               lambda e: kinds.__setitem__(e["requestId"], (e.get("type", ""), e["response"]["url"])))
        cdp.on("Network.loadingFinished",
               lambda e: sizes.__setitem__(e["requestId"], int(e["encodedDataLength"])))
        # The service worker fetches its script (and what it imports) outside the page.
        worker: list[dict] = []
        context.on("requestfinished", lambda r: worker.append(_worker_request(r))
                   if r.service_worker is not None or r.url.endswith("/c/sw.js") else None)
        page.goto(url, wait_until="load", timeout=60_000)
        _wait(page, "window.__usableAt !== undefined", 60)
        page.wait_for_load_state("networkidle", timeout=60_000)
        page.wait_for_timeout(500)
        assert page.locator("textarea[name=description]").is_editable()
        timing = page.evaluate("""() => { const n = performance.getEntriesByType('navigation')[0];
            return {usable: window.__usableAt, dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd}; }""")
        resources = []
        for request_id, size in sizes.items():
            kind, resource_url = kinds.get(request_id, ("Other", "?"))
            resources.append({"url": resource_url, "type": kind, "bytes": size})
        # The worker's requests are its own trips over the network (a page it keeps for
        # offline use is fetched a second time), so all of them count; those answered from
        # the HTTP cache weigh nothing.
        resources += [r for r in worker if r["bytes"]]

        def total(kind: str) -> int:
            """Bytes of one resource type."""
            return sum(r["bytes"] for r in resources if r["type"] == kind)

        return PageLoad(url=url, transfer_bytes=sum(r["bytes"] for r in resources),
                        js_bytes=total("Script"), css_bytes=total("Stylesheet"),
                        html_bytes=total("Document"), usable_ms=timing["usable"],
                        dom_content_loaded_ms=timing["dcl"], load_ms=timing["load"],
                        resources=sorted(resources, key=lambda r: -r["bytes"]))
    finally:
        context.close()


def _worker_request(request) -> dict:
    """A service-worker request's transfer size (headers and encoded body) as Playwright saw it."""
    sizes = request.sizes()
    body = sizes["responseBodySize"]
    response = request.response()
    if not body and response is not None:  # not always reported for a worker's own script
        length = response.headers.get("content-length")
        body = int(length) if length else len(response.body())
    content_type = response.headers.get("content-type", "") if response is not None else ""
    return {"url": request.url, "type": _resource_type(content_type),
            "bytes": body + sizes["responseHeadersSize"], "service_worker": True}


def _resource_type(content_type: str) -> str:
    """The DevTools resource type for a worker's request, from its content type: the worker
    fetches its own script, and also the page, styles and row fragments it keeps offline."""
    if "javascript" in content_type:
        return "Script"
    if "text/css" in content_type:
        return "Stylesheet"
    if "text/html" in content_type:
        return "Document"
    return "Other"


def measure_page(browser, url: str, runs: int = 3) -> PageFigures:
    """First-load figures over several fresh contexts: bytes of the first, median usable time."""
    loads = [first_load(browser, url) for _ in range(runs)]
    times = [load.usable_ms for load in loads]
    first = loads[0]
    return PageFigures(url=url, transfer_bytes=first.transfer_bytes, js_bytes=first.js_bytes,
                       usable_ms=statistics.median(times), usable_runs=times,
                       resources=first.resources)


@dataclass
class PhotoFigures:
    """The page's own photo compression of one camera JPEG, and the minimal pipeline's."""

    input_bytes: int
    output: bytes
    output_size: tuple[int, int]
    ms: float
    runs_ms: list[float]
    ceiling_ms: float
    ceiling_runs_ms: list[float]
    ceiling_bytes: int


def compress_photo(browser, capture_url: str, jpeg: bytes, runs: int = 3) -> PhotoFigures:
    """Pick the photo on the capture page (CPU 4x slower) and time the page's compression."""
    times, ceiling_times, output, ceiling_bytes = [], [], b"", 0
    for _ in range(runs):
        context = browser.new_context(**PHONE)
        try:
            page = context.new_page()
            page.add_init_script(PHOTO_PROBE)
            page.goto(capture_url, wait_until="load", timeout=60_000)
            _wait(page, "document.documentElement.classList.contains('js')", 60)
            _throttle(context, page, network=False)
            page.set_input_files("#photo-gallery", files=[
                {"name": "site.jpg", "mimeType": "image/jpeg", "buffer": jpeg}])
            _wait(page, "window.__photoDone !== undefined", 120)
            done = page.evaluate("() => ({ms: window.__photoDone - window.__photoStart,"
                                 " url: window.__photoDataUrl})")
            times.append(done["ms"])
            output = base64.b64decode(done["url"].split(",", 1)[1])
            # The ceiling on the same throttled page: a file input of its own.
            page.evaluate("() => { const i = document.createElement('input'); i.type = 'file';"
                          " i.id = 'bench-file'; document.body.appendChild(i); }")
            page.set_input_files("#bench-file", files=[
                {"name": "site.jpg", "mimeType": "image/jpeg", "buffer": jpeg}])
            minimal = page.eval_on_selector("#bench-file", MINIMAL_COMPRESS)
            ceiling_times.append(minimal["ms"])
            ceiling_bytes = minimal["bytes"]
        finally:
            context.close()
    from io import BytesIO

    from PIL import Image
    with Image.open(BytesIO(output)) as image:
        size = image.size
    return PhotoFigures(input_bytes=len(jpeg), output=output, output_size=size,
                        ms=statistics.median(times), runs_ms=times,
                        ceiling_ms=statistics.median(ceiling_times),
                        ceiling_runs_ms=ceiling_times, ceiling_bytes=ceiling_bytes)


# The north star's signal: 200 kbit/s up (one bar), 1.6 Mbit/s down, 150 ms round trip; the
# far one the same with a 300 ms round trip.
ONE_BAR = {"up_bps": 200e3 / 8, "down_bps": 1.6e6 / 8, "latency_s": 0.075}
FAR_BAR = {**ONE_BAR, "latency_s": 0.150}
OUTAGE_S = 3.0


@dataclass
class NorthStar:
    """Open link to "Sent" for a full ticket on one bar of signal, with two cuts on the way
    (one between photos, one in the middle of a photo)."""

    seconds: float
    photos: int
    drops: int
    uploaded_bytes: int
    ticket_bytes: int
    floor_seconds: float = 0.0
    outage_seconds: float = 0.0
    header_bytes: int = 0
    where: str = "between photos, mid-photo"
    round_trip_ms: float = 150.0
    pieces: int = 0  # photo requests the app saw, resent ones included
    link_use: float = 0.0  # share of the link the upload used with signal (see north_star)

    @property
    def ratio(self) -> float:
        """Bytes uploaded against the ticket's own bytes (target at most 1.05)."""
        return self.uploaded_bytes / self.ticket_bytes if self.ticket_bytes else 0.0


def link_use(uploads: list, cuts: list[tuple[float, float]], rate: float) -> float:
    """The share of the link the ticket's upload used while the phone had signal: its body bytes
    against the rate over the time from its first request to its last byte, less each cut and
    the wait from the signal's return to the phone's next request (the phone cannot see a
    signal come back; it tries again a second apart)."""
    if not uploads:
        return 0.0
    first = min(r.started for r in uploads)
    last = max(r.finished or r.started for r in uploads)
    lost = 0.0
    for cut, back in cuts:
        again = min((r.started for r in uploads if r.started >= back), default=back)
        lost += again - cut
    return sum(r.body_sent for r in uploads) / (rate * max(last - first - lost, 1e-9))


def north_star(browser, url: str, camera: bytes, photos: int = 12, signal: dict = ONE_BAR
               ) -> NorthStar:
    """3 lines, `photos` camera photos and a signature, on one bar through a throttling proxy
    (support/network.py: 200 kbit/s up, 1.6 Mbit/s down, 150 ms or `signal`'s; CPU 4x), which counts
    the page's and the service worker's bytes alike. The signal is cut for OUTAGE_S twice
    while the photos go up: once just after a photo's last byte arrived, once halfway through
    another photo.

    Uploaded bytes are the bodies of every ticket upload the app received (text, photos and
    their pieces, resent ones too, signature); the ticket's own are the compressed photos,
    the signature and the text as the phone keeps them. The floor is the ticket's own bytes
    at the signal's upload rate; the time without signal comes on top of it.
    """
    from urllib.parse import urlsplit

    target = urlsplit(url)
    folder = tempfile.TemporaryDirectory(prefix="ewt-bench-camera-")
    files = [Path(folder.name) / f"photo-{i + 1}.jpg" for i in range(photos)]
    for path in files:
        path.write_bytes(camera)
    proxy = ThrottlingProxy(target.port, **signal)
    context = browser.new_context(**PHONE)
    try:
        page = context.new_page()
        begun = time.perf_counter()
        page.goto(proxy.url + target.path + (f"?{target.query}" if target.query else ""))
        _throttle(context, page, network=False)
        _wait(page, "document.documentElement.classList.contains('js')")
        # The crew takes the photos first and writes while they go up. The photos are handed
        # over as files, as a phone's camera does (as buffers, Playwright spends seconds moving
        # them into the page before it sees any).
        page.set_input_files("#photo-gallery", files=[str(path) for path in files])
        fill_ticket(page)
        page.fill('input[name="equipment[0].description"]', "Core drill")
        page.fill('input[name="equipment[0].hours"]', "2")
        page.fill('input[name="materials[0].description"]', "Non-shrink grout")
        page.fill('input[name="materials[0].quantity"]', "4")

        def completed() -> int:
            """Photos whose last byte reached the app."""
            return len({photo_key(r) for r in proxy.seen(lambda r: r.completes and photo_key(r))})

        cuts: list[tuple[float, float]] = []

        def outage() -> None:
            cut = time.monotonic()
            proxy.cut()
            page.wait_for_timeout(OUTAGE_S * 1000)
            proxy.restore()
            cuts.append((cut, time.monotonic()))

        deadline = time.monotonic() + 600
        while completed() < photos // 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        outage()  # between photos: one just arrived whole, the next not begun
        halfway = None
        while halfway is None and time.monotonic() < deadline:
            done = {photo_key(r) for r in proxy.seen(lambda r: r.completes and photo_key(r))}
            halfway = next((key for key, (sent, total) in proxy.photos().items()
                            if key not in done and sent >= total / 2), None)
            time.sleep(0.01)
        outage()  # in the middle of a photo
        _wait(page, f"document.querySelectorAll('#photo-list img').length === {photos}", 600)
        sign(page)
        own = page.evaluate("""() => {
            const photos = [...document.querySelectorAll('#photo-list img')].map(i => i.src);
            const bytes = url => Math.floor((url.length - url.indexOf(',') - 1) * 3 / 4);
            const signature = document.getElementById('signature-pad').toDataURL('image/png');
            return photos.reduce((sum, url) => sum + bytes(url), 0) + bytes(signature);
        }""")
        with page.expect_request(lambda r: r.method == "POST" and "/tickets" in r.url) as text:
            page.click("button[type=submit]")
        own += len(text.value.post_data_buffer or b"")
        _wait(page, "!document.getElementById('done').hidden", 900)
        seconds = time.perf_counter() - begun
        uploads = proxy.seen(ticket_upload)
        return NorthStar(seconds=seconds, photos=photos, drops=2,
                         uploaded_bytes=sum(r.body_sent for r in uploads), ticket_bytes=int(own),
                         floor_seconds=own / signal["up_bps"], outage_seconds=2 * OUTAGE_S,
                         header_bytes=sum(r.header_bytes for r in uploads),
                         round_trip_ms=2000 * signal["latency_s"],
                         pieces=sum(1 for r in uploads if photo_key(r)),
                         link_use=link_use(uploads, cuts, signal["up_bps"]))
    finally:
        context.close()
        proxy.close()
        folder.cleanup()
