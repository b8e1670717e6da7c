"""Turn one run's figures into bench/RESULTS.md: machine, figures, ceilings, ratios, targets.

Sizes are in KB of 1,000 bytes. Every ratio is the figure divided by its ceiling. The file
holds the latest run only (earlier ones are in git's history); bench/fixes.md says which
decisions the figures rest on.
"""
from __future__ import annotations

import statistics
from pathlib import Path

from bench import sections, soak, trickle
from bench.servers import TIMEOUT_S

# Every request the paced runs send, in the order they run: reads first, creates last.
LABELS = {"me": "GET /v1/me", "list": "GET /v1/tickets?limit=50",
          "list_filtered": "GET /v1/tickets?limit=50&status=submitted&project_id={project_id}",
          "get": "GET /v1/tickets/{id}",
          "queue": "Queue page: GET /queue (signed in)",
          "queue_filtered": "Queue page: GET /queue?status=all&project_id={project_id} (signed in)",
          "create": "POST /v1/tickets"}
ROUTES = tuple(LABELS)
PAGES = ("queue", "queue_filtered")  # pages a reviewer's browser loads; the rest are API routes
# The most a p99 at the paced rate may be: a page a person waits for, and every API route.
PAGE_P99_MS, API_P99_MS, RSS_TARGET_MB = 300, 25, 120
SIZES = ("small", "big")


def _fig(key: str, section: str, name: str, value: float, unit: str, ceiling: float | None,
         target: str, ok: bool | None, ratio: float | None = None) -> dict:
    """One row of the summary table."""
    if ratio is None and ceiling:
        ratio = value / ceiling
    return {"key": key, "section": section, "name": name, "value": value, "unit": unit,
            "ceiling": ceiling, "ratio": ratio, "target": target, "ok": ok}


def p99_bar(name: str) -> float:
    """The p99 a request must stay within at the paced rate, in ms."""
    return PAGE_P99_MS if name in PAGES else API_P99_MS


def latency_figures(r: dict) -> list[dict]:
    """p99 of every request at the paced rate, at both ticket counts, each against its bar."""
    rows: list[dict] = []
    lat, rate = r["latency"], r["settings"]["rate"]
    for number, size in enumerate(SIZES, start=1):
        phase = lat[size]
        section = (f"{number}. Paced at {rate:g} req/s, {phase['tickets']:,} tickets "
                   "(ceiling = the bare route)")
        for name in ROUTES:
            run, bar = phase["paced"][name], p99_bar(name)
            row = _fig(f"latency.{size}.paced.{name}.p99", section, f"{LABELS[name]} p99",
                       run["p99_ms"], "ms", lat["ceiling_paced"][name]["p99_ms"], f"≤ {bar} ms",
                       run["p99_ms"] <= bar and not run["errors"]["timeout"])
            if run["errors"]["timeout"]:
                row["note"] = (f"{run['errors']['timeout']} of {run['requests']} timed out "
                               f"at {TIMEOUT_S:g} s")
            rows.append(row)
    return rows


def figures(r: dict) -> list[dict]:
    """Every reported figure of a run, with its ceiling, ratio, target and verdict."""
    rows: list[dict] = latency_figures(r) if "latency" in r else []
    number = 1 + (len(SIZES) if "latency" in r else 0)
    page, minimal = r["page"]["capture"], r["page"]["minimal"]
    section = f"{number}. Capture page, first load, mobile throttling (ceiling = minimal page)"
    rows.append(_fig("page.bytes", section, "Transferred", page["transfer_bytes"] / 1000, "KB",
                     minimal["transfer_bytes"] / 1000, "≤ 60 KB",
                     page["transfer_bytes"] <= 60_000))
    rows.append(_fig("page.js", section, "JavaScript transferred", page["js_bytes"] / 1000, "KB",
                     minimal["js_bytes"] / 1000, "≤ 30 KB", page["js_bytes"] <= 30_000))
    rows.append(_fig("page.usable", section, "Form usable after", page["usable_ms"], "ms",
                     minimal["usable_ms"], "≤ 2500 ms", page["usable_ms"] <= 2500))
    if r.get("north_star"):  # runs from before it was measured have none
        number += 1
        rows += signal_rows(r, number)
    pb, ps = r["photo_browser"], r["photo_server"]
    number += 1
    section = f"{number}. Photos, 12-megapixel camera JPEG"
    rows.append(_fig("photo.browser.bytes", section, "Page's compression: output", len_kb(pb),
                     "KB", pb["ceiling_bytes"] / 1000, "≤ 350 KB", len_kb(pb) <= 350))
    rows.append(_fig("photo.browser.ms", section, "Page's compression: time (CPU 4x slower)",
                     pb["ms"], "ms", pb["ceiling_ms"], "≤ 1500 ms", pb["ms"] <= 1500))
    rows.append(_fig("photo.server.ms", section, "Server: process_photo", ps["ms"], "ms",
                     ps["ceiling_ms"], "≤ 150 ms", ps["ms"] <= 150))
    pk = r.get("photo_bucket")  # runs from before the bucket backend have none
    if pk:
        added = pk["bucket_ms"] - pk["folder_ms"]
        rows.append(_fig("photo.bucket.added_ms", section,
                         "Bucket on loopback: storing photo and thumbnail adds to a create",
                         added, "ms", pk["ceiling_ms"], "≤ 20 ms", added <= 20))
        rows.append(_fig("photo.bucket.stream_kb", section,
                         "Bucket: peak memory sending a 2 MiB photo", pk["stream_peak_kb"], "KB",
                         pk["stream_bytes"] / 1024, "≤ 256 KB", pk["stream_peak_kb"] <= 256))
    ap = r["approve"]
    warm = ap["warm"]
    calls = max(len(a["calls"]) for a in warm)
    attachments = warm[0]["attachments"]
    # Procore's direct-upload flow takes two calls a file (the upload, the file); one PATCH
    # puts them all on the change event and one read confirms they are there.
    allowed = 5 + 2 * attachments
    number += 1
    section = (f"{number}. Approve ({attachments} attachments: photo, signature and the "
               "signed ticket document)")
    rows.append(_fig("approve.calls", section, "Project-system calls per approval", calls,
                     "calls", allowed, f"≤ 5 + 2 × {attachments} = {allowed}", calls <= allowed))
    ms = statistics.median(a["ms"] for a in warm)
    waited = statistics.median(a["project_system_ms"] for a in warm)
    rows.append(_fig("approve.ms", section, "Approval time", ms, "ms", waited, "—", None))
    far = r.get("approve_distant")  # runs from before uploads went side by side have none
    if far:
        rows.append(_fig("approve.distant.ms", section,
                         f"Approval with {far['attachments']} files, {far['latency_ms']:.0f} ms "
                         "per Procore call (ceiling: the files one at a time)", far["ms"], "ms",
                         far["sequential_ms"], "≤ 2000 ms", far["ms"] <= 2000))
    lr = r.get("learning")  # runs from before routing learned have none
    if lr:
        from bench import learning

        number += 1
        rows += learning.rows(lr, number)
    pm = r.get("pm")  # runs from before the PM's week was measured have none
    if pm:
        number += 1
        section = (f"{number}. A PM's week on a tablet at 1024x768 ({pm['tickets']} tickets, "
                   "routing with history; bench/pm_session.py)")
        per = pm["taps"] / pm["tickets"]
        rows.append(_fig("pm.taps", section, f"Taps per ticket ({pm['taps']} in all, "
                         f"{pm['bulk_taps']} of them for the bulk approval)", per, "taps", None,
                         "≤ 2.5", per <= 2.5))
        rows.append(_fig("pm.waited_s", section, "Seconds waiting on the page per ticket",
                         pm["waited_s"] / pm["tickets"], "s", None, "—", None))
        rows.append(_fig("pm.written", section, "Tickets written to Procore", pm["written"],
                         "tickets", None, f"= {pm['tickets']}", pm["written"] == pm["tickets"]))
        rows.append(_fig("pm.hung_s", section, "Approve while Procore holds every call 30 s "
                         "(ceiling: Procore refusing connections)", pm["hung_s"], "s",
                         pm["refused_s"], "≤ 6 s", pm["hung_s"] <= 6))
    mem = r["memory"]
    number += 1
    section = f"{number}. Memory"
    rows.append(_fig("memory.mb", section, "Worker RSS after the load runs",
                     mem["service_mb"], "MB", mem["ceiling_mb"], f"≤ {RSS_TARGET_MB} MB",
                     mem["service_mb"] <= RSS_TARGET_MB))
    if "service_end_mb" in mem:
        rows.append(_fig("memory.end_mb", section, "Worker RSS at the end (after photos "
                         "and approvals)", mem["service_end_mb"], "MB", mem["ceiling_mb"], "—",
                         None))
    return rows


def slowest_waited_for(r: dict) -> str:
    """The slowest p99 at the larger ticket count, against the bar for what people wait for."""
    big = r["latency"]["big"]
    name = max(ROUTES, key=lambda n: big["paced"][n]["p99_ms"])
    value = big["paced"][name]["p99_ms"]
    return (f"Slowest p99 of a page or request a person waits for, at {big['tickets']:,} tickets "
            f"and {r['settings']['rate']:g} req/s: {LABELS[name]}, {_num(value, 'ms')} ms "
            f"(bar {PAGE_P99_MS} ms: {_verdict(value <= PAGE_P99_MS)}).")


SIGNAL_TARGET = 1.3  # open link to Sent against its floor, at most


def signal_rows(r: dict, number: int) -> list[dict]:
    """Open link to Sent on one bar (150 ms, and 300 ms round trip when measured) against the
    floor: the ticket's own bytes at the upload rate plus the time without signal."""
    rows: list[dict] = []
    runs = [r["north_star"]] + ([r["north_star_far"]] if r.get("north_star_far") else [])
    for ns in runs:
        where = ns.get("where")
        trip = ns.get("round_trip_ms", 150)
        section = (f"{number}. Capture on one bar (200 kbit/s up; two cuts: {where})"
                   if where else f"{number}. Capture on one bar (Lighthouse mobile profile, two drops)")
        floor = (ns["floor_seconds"] + ns["outage_seconds"]) if ns.get("floor_seconds") else None
        rows.append(_fig(f"capture.north_star.{trip:g}.s", section,
                         f"Open link to Sent at {trip:g} ms round trip: 3 lines, {ns['photos']} "
                         "photos, a signature"
                         + (f" (ceiling: the ticket's bytes at the upload rate, "
                            f"{ns['floor_seconds']:.1f} s, and the {ns['outage_seconds']:g} s "
                            "without signal)" if floor else ""),
                         ns["seconds"], "s", floor, f"≤ {SIGNAL_TARGET:g}× ceiling" if floor else "—",
                         ns["seconds"] <= SIGNAL_TARGET * floor if floor else None))
        ratio = ns["uploaded_bytes"] / ns["ticket_bytes"] if ns["ticket_bytes"] else 0.0
        target = 1.05 if where else 1.1
        rows.append(_fig(f"capture.north_star.{trip:g}.bytes", section,
                         f"Bytes uploaded against the ticket's own bytes at {trip:g} ms", ratio,
                         "×", None, f"≤ {target:g}×", ratio <= target))
        if ns.get("link_use"):  # runs from before it was measured have none
            use = 100 * ns["link_use"]
            rows.append(_fig(f"capture.north_star.{trip:g}.use", section,
                             f"Link used by the upload at {trip:g} ms, with signal (from its "
                             "first request to its last byte, less each cut and the wait to the "
                             "next try once the signal is back)", use, "%", 100.0, "≥ 85 %",
                             use >= 85))
    return rows


def len_kb(photo: dict) -> float:
    """The compressed photo's size in KB, from the '<n bytes>' placeholder stored for it."""
    return int(str(photo["output"]).strip("<>").split()[0]) / 1000


def _num(value: float | None, unit: str = "") -> str:
    """A figure with sensible precision."""
    if value is None:
        return "—"
    if unit == "calls":
        return f"{value:.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _verdict(ok: bool | None) -> str:
    """pass, MISS, or nothing for figures without a target."""
    return "—" if ok is None else ("pass" if ok else "**MISS**")


def summary_table(rows: list[dict]) -> list[str]:
    """The main table."""
    out = ["| Section | Figure | Measured | Ceiling | Ratio | Target | Result |",
           "|---|---|---:|---:|---:|---|---|"]
    last = None
    for row in rows:
        section = row["section"] if row["section"] != last else ""
        last = row["section"]
        ratio = "—" if row["ratio"] is None else f"{row['ratio']:.2f}"
        verdict = _verdict(row["ok"]) + (f" ({row['note']})" if row.get("note") else "")
        out.append(f"| {section} | {row['name']} | {_num(row['value'], row['unit'])} {row['unit']} "
                   f"| {_num(row['ceiling'], row['unit'])} | {ratio} | {row['target']} "
                   f"| {verdict} |")
    return out


def _run_line(label: str, server: str, res: dict) -> str:
    """One load run as a table row."""
    cpu = res["worker_cpu_s"] * 1000 / res["requests"] if res.get("worker_cpu_s") else None
    return (f"| {label} | {server} | {res['rps']:,.1f} | {res['p50_ms']:.1f} | "
            f"{res['p90_ms']:.1f} | {res['p99_ms']:.1f} | {res['max_ms']:.0f} | "
            f"{res['errors']['timeout']} | {_num(cpu)} |")


def load_runs(r: dict) -> list[str]:
    """The table of every paced run behind the latency rows."""
    lat, settings = r["latency"], r["settings"]
    rate, seconds = settings["rate"], settings["seconds"]
    out = ["", "## Load runs", "",
           f"Paced: {rate:g} requests a second for {seconds} s after a 1 s warm-up, sent on "
           "schedule whatever the answers do (open loop), each timed from its scheduled start "
           "(bench/servers.py `paced`, keep-alive connections), on loopback. API calls carry "
           "the company's key; the queue pages carry a signed-in reviewer's cookies and accept "
           "compressed answers, as a browser does. An answer not back within "
           f"{TIMEOUT_S:g} s is counted as timed out (its wait still counts in the figures), "
           "and the next run waits until the worker has finished what was queued. The ceiling "
           "is measured once, before the service's runs. CPU is the serving process's "
           "user+system time per request.", "",
           "| Run | Server | req/s | p50 ms | p90 ms | p99 ms | max ms | timed out | CPU ms/req |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in ROUTES:
        out.append(_run_line(LABELS[name], "ceiling", lat["ceiling_paced"][name]))
    for size in SIZES:
        phase = lat[size]
        for name in ROUTES:
            out.append(_run_line(f"{LABELS[name]}, {phase['tickets']:,} tickets", "service",
                                 phase["paced"][name]))
    out += ["", "Answer sizes the ceiling copies (bytes, as sent): " +
            ", ".join(f"{LABELS[k]} {v:,}" for k, v in r["sizes"].items()) + ".",
            f"Seeding {lat['seed']['added']:,} tickets through the ORM (copies of one made by "
            f"POST /v1/tickets) to reach {lat['big']['tickets']:,} took "
            f"{lat['seed']['seconds']:.1f} s."]
    return out


def detail_sections(r: dict) -> list[str]:
    """Everything behind the summary: load runs, page resources, photos, approvals."""
    out = load_runs(r) if "latency" in r else []
    return out + _page_section(r) + _photo_section(r) + _approval_section(r)


def _page_section(r: dict) -> list[str]:
    """The capture page's first load: its resources and when it was usable."""
    out: list[str] = []
    page, minimal = r["page"]["capture"], r["page"]["minimal"]
    out += ["", "## Capture page, first load", "",
            "Chromium (headless), phone viewport, empty cache; DevTools throttling: 150 ms RTT, "
            "1.6 Mbit/s down, 750 kbit/s up, CPU 4x slower. Bytes are what crossed the wire "
            "(headers and compressed bodies), service worker included. Times are medians of "
            f"{len(page['usable_runs'])} loads, from navigation start until `html.js` is set and "
            "the description takes typing.", "",
            "| Resource | Type | Bytes |", "|---|---|---:|"]
    for res in page["resources"]:
        url = res["url"].split("/", 3)[-1]
        url = "c/<token>" if url.startswith("c/") and "/" not in url[2:] else url
        out.append(f"| /{url} | {res['type']} | {res['bytes']:,} |")
    out += ["", f"Usable after (ms, each load): capture page "
            f"{', '.join(f'{t:.0f}' for t in page['usable_runs'])}; minimal page "
            f"{', '.join(f'{t:.0f}' for t in minimal['usable_runs'])}."]
    return out


def _photo_section(r: dict) -> list[str]:
    """A photo compressed in the page, processed on the server, and stored in a bucket."""
    out: list[str] = []
    pb, ps = r["photo_browser"], r["photo_server"]
    out += ["", "## Photos", "",
            f"Input: {pb['input_bytes'] / 1e6:.1f} MB, 4000×3000 JPEG (gradients, shapes, grain). "
            f"The page's compression (static/capture.js) gave {pb['output_size'][0]}×"
            f"{pb['output_size'][1]}, {len_kb(pb):.0f} KB; times per run "
            f"{', '.join(f'{t:.0f}' for t in pb['runs_ms'])} ms. Its ceiling is one decode, "
            f"one draw at 2048 px and one JPEG encode at quality 0.8 in the same throttled page: "
            f"{', '.join(f'{t:.0f}' for t in pb['ceiling_runs_ms'])} ms, "
            f"{pb['ceiling_bytes'] / 1000:.0f} KB.",
            "",
            f"Server: services.files.photos.process_photo on the page's output "
            f"({ps['input_size'][0]}×{ps['input_size'][1]}, {ps['input_bytes'] / 1000:.0f} KB) → "
            f"{ps['output_size'][0]}×{ps['output_size'][1]}, {ps['output_bytes'] / 1000:.0f} KB "
            f"plus thumbnail; runs {', '.join(f'{t:.0f}' for t in ps['runs_ms'])} ms. Ceiling: "
            f"Pillow decode and re-encode (quality 82) of the same bytes, runs "
            f"{', '.join(f'{t:.0f}' for t in ps['ceiling_runs_ms'])} ms."]
    pk = r.get("photo_bucket")
    if pk:
        out += ["", f"Bucket (moto's S3 server on loopback, a real process): put_all of a new "
                f"{pk['photo_bytes'] / 1000:.0f} KB photo and its thumbnail, runs "
                f"{', '.join(f'{t:.1f}' for t in pk['bucket_runs_ms'])} ms; the same into a "
                f"folder (fsync), {', '.join(f'{t:.1f}' for t in pk['folder_runs_ms'])} ms; the "
                f"row is the difference of the medians. Ceiling: one bare boto3 put_object of "
                f"the photo, {', '.join(f'{t:.1f}' for t in pk['ceiling_runs_ms'])} ms. Sending "
                f"a {pk['stream_bytes'] >> 20} MiB object from the bucket peaked at "
                f"{pk['stream_peak_kb']:.0f} KB of Python memory (64 KiB chunks)."]
    return out


def _approval_section(r: dict) -> list[str]:
    """Approvals, call by call, and the worker's memory."""
    out: list[str] = []
    ap = r["approve"]
    out += ["", "## Approvals", "",
            "In this process, on an app built from the service's environment (same database "
            "and sandbox), so ProcoreClient.calls can be read. The ceiling of the time is the "
            "time spent waiting on the sandbox's answers.", "",
            "| Approval | ms | waiting on sandbox ms | calls |", "|---|---:|---:|---|"]
    for label, one in [("first (cold caches)", ap["cold"])] + [
            (f"warm {i + 1}", a) for i, a in enumerate(ap["warm"])]:
        calls = "<br>".join(f"{m} {p}" for m, p in one["calls"])
        out.append(f"| {label} | {one['ms']:.0f} | {one['project_system_ms']:.0f} | "
                   f"{len(one['calls'])}: {calls} |")
    out += ["", "Through the live service over HTTP (ms): " +
            ", ".join(f"{t:.0f}" for t in ap["live_ms"]) + ".",
            "", "## Memory", "",
            f"Worker RSS (VmRSS): {r['memory']['service_mb']:.0f} MB after the load runs "
            f"(ceiling app's worker {r['memory']['ceiling_mb']:.0f} MB), "
            f"{r['memory']['service_end_mb']:.0f} MB at the end (after photos and approvals)."]
    steps = [("after the capture-page loads", "service_after_pages_mb"),
             ("after the photo pages", "service_after_photo_pages_mb")]
    seen = [f"{r['memory'][key]:.0f} MB {label}" for label, key in steps if key in r["memory"]]
    if seen:
        out[-1] = out[-1][:-1] + "; on the way: " + ", ".join(seen) + "."
    return out


def write(r: dict, path: Path) -> None:
    """Write RESULTS.md for one run."""
    m = r["machine"]
    rows = figures(r)
    misses = [row for row in rows if row["ok"] is False]
    out = ["# Benchmark results", "",
           "Written by `make bench` (bench/run.py) for its latest run; do not edit by hand. "
           "The decisions these figures rest on are in bench/fixes.md; earlier runs are in "
           "git's history.", "",
           f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB memory "
           "(shared and noisy: figures move by 10–20 % between runs)",
           f"- Date: {m['date']}; commit {m['commit']}",
           f"- Python {m['python']}; {m['chromium']}",
           "- Service as `make run` serves it: bin/serve, waitress 1 process × 8 threads, SQLite "
           "under a temporary instance, sandbox process running, API rate limit lifted "
           "(EWT_API_RATE_LIMIT=1000000 per second) for the bench only",
           f"- Load: each request sent at a steady {r['settings']['rate']:g} requests a second "
           "(open loop: what a person waits for at a realistic load), with "
           f"{r['settings']['small']:,} and with {r['settings']['big']:,} tickets; see Load runs",
           "- Bars, p99 at the paced rate and each ticket count: a page or request a person "
           f"waits for at most {PAGE_P99_MS} ms (the queue pages are held to it); every API "
           f"route at most {API_P99_MS} ms (and so within {PAGE_P99_MS} ms too)",
           "- Ceilings: bench/ceiling_app.py (bare Flask under waitress, 8 threads, answers of the "
           "same size) measured in the same run for the paced requests; a minimal page with one "
           "textarea for the capture page; see each section",
           "",
           f"**{len(misses)} of {sum(row['ok'] is not None for row in rows)} targets missed**"
           + (": " + "; ".join(f"{row['section'].split(' (')[0]}: {row['name']}" for row in misses)
              if misses else "."), ""]
    if "latency" in r:
        out += [slowest_waited_for(r), ""]
    out += ["Ratio = measured ÷ ceiling. KB = 1,000 bytes.", ""]
    out += summary_table(rows)
    out += detail_sections(r)
    out += ["", *soak.section()]
    # Routing at scale, photos on one bar, slow clients and memory are also measured alone
    # (python -m bench.learning, bench.photos, bench.trickle, bench.memory): their latest
    # sections are kept.
    from bench import learning, memory, photos

    kept = path.read_text() if path.exists() else ""
    for start, end in ((learning.START, learning.END), (photos.START, photos.END),
                       (trickle.START, trickle.END), (memory.START, memory.END)):
        section = sections.kept(kept, start, end)
        if section:
            out += ["", *section]
    path.write_text("\n".join(out) + "\n")
