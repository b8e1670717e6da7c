"""Turn one run's figures into bench/RESULTS.md: machine, figures, ceilings, ratios, floors.

Sizes are in KB of 1,000 bytes. Every ratio is the figure divided by its ceiling.
When bench/baseline.json (a run saved with --save-baseline before the fixes) exists,
a before/after table compares it with this run; bench/fixes.md, when present, is
copied in after it to say what was changed and why.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench import soak

HERE = Path(__file__).resolve().parent
LABELS = {"me": "GET /v1/me", "list": "GET /v1/tickets?limit=50", "get": "GET /v1/tickets/{id}",
          "create": "POST /v1/tickets"}


def _fig(key: str, section: str, name: str, value: float, unit: str, ceiling: float | None,
         target: str, ok: bool | None, ratio: float | None = None) -> dict:
    """One row of the summary table."""
    if ratio is None and ceiling:
        ratio = value / ceiling
    return {"key": key, "section": section, "name": name, "value": value, "unit": unit,
            "ceiling": ceiling, "ratio": ratio, "target": target, "ok": ok}


READ_FLOOR, CREATE_FLOOR, P99_FLOOR_MS, SCALE_FLOOR, RSS_FLOOR_MB = 0.2, 0.1, 100, 1.5, 120
SIZES = ("small", "big")


def latency_figures(r: dict) -> list[dict]:
    """The API rows: paced p50/p99, wrk req/s, p50, p99 at both ticket counts; the scale floor."""
    rows: list[dict] = []
    lat, settings = r["latency"], r["settings"]
    rate, connections = settings["rate"], settings["connections"]
    ceiling_paced = lat["ceiling_paced"]
    number = 1
    for size in SIZES:
        phase = lat[size]
        section = f"{number}. API paced at {rate:g} req/s, {phase['tickets']:,} tickets"
        for name in ("me", "list", "get", "create"):
            s, c = phase["paced"][name], ceiling_paced[name]
            for pct in ("p50", "p99"):
                rows.append(_fig(f"latency.{size}.paced.{name}.{pct}", section,
                                 f"{LABELS[name]} {pct}", s[f"{pct}_ms"], "ms",
                                 c[f"{pct}_ms"], "—", None))
        section = f"{number + 1}. API at {connections} connections, {phase['tickets']:,} tickets"
        for name in ("me", "list", "get", "create"):
            pair = phase["closed"][name]
            s, c = pair["service"], pair["ceiling"]
            need = CREATE_FLOOR if name == "create" else READ_FLOOR
            rows.append(_fig(f"latency.{size}.closed.{name}.rps", section,
                             f"{LABELS[name]} req/s", s["rps"], "req/s", c["rps"],
                             f"ratio ≥ {need}", s["rps"] / c["rps"] >= need))
            rows.append(_fig(f"latency.{size}.closed.{name}.p50", section,
                             f"{LABELS[name]} p50", s["p50_ms"], "ms", c["p50_ms"], "—", None))
            rows.append(_fig(f"latency.{size}.closed.{name}.p99", section,
                             f"{LABELS[name]} p99", s["p99_ms"], "ms", c["p99_ms"],
                             f"< {P99_FLOOR_MS} ms", s["p99_ms"] < P99_FLOOR_MS))
        number += 2
    small, big = lat["small"], lat["big"]
    section = (f"{number}. Scale, {big['tickets']:,} vs {small['tickets']:,} tickets "
               f"(ceiling = the {small['tickets']:,} figure)")
    s, c = big["paced"]["list"]["p50_ms"], small["paced"]["list"]["p50_ms"]
    rows.append(_fig("latency.scale.list.paced.p50", section,
                     f"{LABELS['list']} p50 at {rate:g} req/s", s, "ms", c,
                     f"ratio ≤ {SCALE_FLOOR}", s / c <= SCALE_FLOOR))
    s, c = big["closed"]["list"]["service"]["p50_ms"], small["closed"]["list"]["service"]["p50_ms"]
    rows.append(_fig("latency.scale.list.closed.p50", section,
                     f"{LABELS['list']} p50 at {connections} connections", s, "ms", c, "—", None))
    return rows


def figures(r: dict) -> list[dict]:
    """Every reported figure of a run, with its ceiling, ratio, target and verdict."""
    rows: list[dict] = latency_figures(r) if "latency" in r else []
    number = 6 if "latency" in r else 3  # a run saved before the latency section had 2 API sections
    page, minimal = r["page"]["capture"], r["page"]["minimal"]
    section = f"{number}. Capture page, first load, mobile throttling (ceiling = minimal page)"
    rows.append(_fig("page.bytes", section, "Transferred", page["transfer_bytes"] / 1000, "KB",
                     minimal["transfer_bytes"] / 1000, "≤ 60 KB",
                     page["transfer_bytes"] <= 60_000))
    rows.append(_fig("page.js", section, "JavaScript transferred", page["js_bytes"] / 1000, "KB",
                     minimal["js_bytes"] / 1000, "≤ 30 KB", page["js_bytes"] <= 30_000))
    rows.append(_fig("page.usable", section, "Form usable after", page["usable_ms"], "ms",
                     minimal["usable_ms"], "≤ 2500 ms", page["usable_ms"] <= 2500))
    pb, ps = r["photo_browser"], r["photo_server"]
    section = f"{number + 1}. Photos, 12-megapixel camera JPEG"
    rows.append(_fig("photo.browser.bytes", section, "Page's compression: output", len_kb(pb),
                     "KB", pb["ceiling_bytes"] / 1000, "≤ 350 KB", len_kb(pb) <= 350))
    rows.append(_fig("photo.browser.ms", section, "Page's compression: time (CPU 4x slower)",
                     pb["ms"], "ms", pb["ceiling_ms"], "≤ 1500 ms", pb["ms"] <= 1500))
    rows.append(_fig("photo.server.ms", section, "Server: process_photo", ps["ms"], "ms",
                     ps["ceiling_ms"], "≤ 150 ms", ps["ms"] <= 150))
    ns = r.get("north_star")  # runs from before it was measured have none
    if ns:
        section = "4b. Capture on one bar (Lighthouse mobile profile, two drops)"
        rows.append(_fig("capture.north_star.s", section,
                         f"Open link to Sent: 3 lines, {ns['photos']} photos, a signature",
                         ns["seconds"], "s", None, "—", None))
        ratio = ns["uploaded_bytes"] / ns["ticket_bytes"] if ns["ticket_bytes"] else 0.0
        rows.append(_fig("capture.north_star.bytes", section,
                         "Bytes uploaded against the ticket's own bytes", ratio, "×", None,
                         "≤ 1.1×", ratio <= 1.1))
    ap = r["approve"]
    warm = ap["warm"]
    calls = max(len(a["calls"]) for a in warm)
    attachments = warm[0]["attachments"]
    # Procore's direct-upload flow takes three calls a file: the upload, the file, the PATCH.
    allowed = 3 + 3 * attachments
    section = (f"{number + 2}. Approve ({attachments} attachments: photo, signature and the "
               "signed ticket document)")
    rows.append(_fig("approve.calls", section, "Project-system calls per approval", calls,
                     "calls", allowed, f"≤ 3 + 3 × {attachments} = {allowed}", calls <= allowed))
    ms = statistics.median(a["ms"] for a in warm)
    waited = statistics.median(a["project_system_ms"] for a in warm)
    rows.append(_fig("approve.ms", section, "Approval time", ms, "ms", waited, "—", None))
    mem = r["memory"]
    section = f"{number + 3}. Memory"
    rows.append(_fig("memory.mb", section, "Gunicorn worker RSS after the load runs",
                     mem["service_mb"], "MB", mem["ceiling_mb"], f"≤ {RSS_FLOOR_MB} MB",
                     mem["service_mb"] <= RSS_FLOOR_MB))
    if "service_end_mb" in mem:
        rows.append(_fig("memory.end_mb", section, "Gunicorn worker RSS at the end (after photos "
                         "and approvals)", mem["service_end_mb"], "MB", mem["ceiling_mb"], "—",
                         None))
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
    out = ["| Section | Figure | Measured | Ceiling | Ratio | Floor / target | Result |",
           "|---|---|---:|---:|---:|---|---|"]
    last = None
    for row in rows:
        section = row["section"] if row["section"] != last else ""
        last = row["section"]
        ratio = "—" if row["ratio"] is None else f"{row['ratio']:.2f}"
        out.append(f"| {section} | {row['name']} | {_num(row['value'], row['unit'])} {row['unit']} "
                   f"| {_num(row['ceiling'], row['unit'])} | {ratio} | {row['target']} "
                   f"| {_verdict(row['ok'])} |")
    return out


def _run_line(label: str, server: str, res: dict) -> str:
    """One load run as a table row."""
    cpu = res["worker_cpu_s"] * 1000 / res["requests"] if res.get("worker_cpu_s") else None
    return (f"| {label} | {server} | {res['rps']:,.1f} | {res['p50_ms']:.1f} | "
            f"{res['p90_ms']:.1f} | {res['p99_ms']:.1f} | {res['max_ms']:.0f} | {_num(cpu)} |")


def load_runs(r: dict) -> list[str]:
    """The table of every paced and wrk run behind the API rows."""
    lat, settings = r["latency"], r["settings"]
    rate, connections, seconds = settings["rate"], settings["connections"], settings["seconds"]
    out = ["", "## Load runs", "",
           f"Paced: {rate:g} requests a second for {seconds} s after a 1 s warm-up, sent on "
           "schedule whatever the answers do (open loop), each timed from its scheduled start "
           "(bench/servers.py `paced`, keep-alive connections). wrk: 1 thread, "
           f"{connections} connections, {seconds} s after a 2 s warm-up (closed loop), the "
           "ceiling then the service back to back. All on loopback. CPU is the gunicorn "
           "worker's user+system time per request.", "",
           "| Run | Server | req/s | p50 ms | p90 ms | p99 ms | max ms | CPU ms/req |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name in ("me", "list", "get", "create"):
        out.append(_run_line(f"{LABELS[name]} at {rate:g} req/s", "ceiling",
                             lat["ceiling_paced"][name]))
    for size in SIZES:
        phase = lat[size]
        for name in ("me", "list", "get", "create"):
            out.append(_run_line(f"{LABELS[name]} at {rate:g} req/s, {phase['tickets']:,} tickets",
                                 "service", phase["paced"][name]))
        for name in ("me", "list", "get", "create"):
            for server in ("ceiling", "service"):
                out.append(_run_line(f"{LABELS[name]} at {connections} connections, "
                                     f"{phase['tickets']:,} tickets", server,
                                     phase["closed"][name][server]))
    out += ["", "Answer sizes the ceiling copies (bytes): " +
            ", ".join(f"{LABELS[k]} {v:,}" for k, v in r["sizes"].items()) + ".",
            f"Seeding {lat['seed']['added']:,} tickets through the ORM (copies of one made by "
            f"POST /v1/tickets) to reach {lat['big']['tickets']:,} took "
            f"{lat['seed']['seconds']:.1f} s."]
    if settings["rounds"] > 1:
        each = "; ".join(
            f"{LABELS[name]} at {lat[size]['tickets']:,} tickets " +
            ", ".join(f"{ratio:.2f}" for ratio in lat[size]["closed"][name]["ratios"])
            for size in SIZES for name in ("me", "list", "get", "create"))
        out += ["", f"Each wrk figure ran as {settings['rounds']} ceiling-then-service pairs; "
                f"the pair with the median ratio is reported. Every pair's ratio: {each}."]
    return out


def detail_sections(r: dict) -> list[str]:
    """Everything behind the summary: load runs, page resources, photos, approvals."""
    out = load_runs(r) if "latency" in r else []
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
            f"Server: services.photos.process_photo on the page's output "
            f"({ps['input_size'][0]}×{ps['input_size'][1]}, {ps['input_bytes'] / 1000:.0f} KB) → "
            f"{ps['output_size'][0]}×{ps['output_size'][1]}, {ps['output_bytes'] / 1000:.0f} KB "
            f"plus thumbnail; runs {', '.join(f'{t:.0f}' for t in ps['runs_ms'])} ms. Ceiling: "
            f"Pillow decode and re-encode (quality 82) of the same bytes, runs "
            f"{', '.join(f'{t:.0f}' for t in ps['ceiling_runs_ms'])} ms."]

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
            f"Gunicorn worker RSS (VmRSS): {r['memory']['service_mb']:.0f} MB after the load runs "
            f"(ceiling app's worker {r['memory']['ceiling_mb']:.0f} MB), "
            f"{r['memory']['service_end_mb']:.0f} MB at the end (after photos and approvals)."]
    steps = [("after the capture-page loads", "service_after_pages_mb"),
             ("after the photo pages", "service_after_photo_pages_mb")]
    seen = [f"{r['memory'][key]:.0f} MB {label}" for label, key in steps if key in r["memory"]]
    if seen:
        out[-1] = out[-1][:-1] + "; on the way: " + ", ".join(seen) + "."
    return out


def before_after(before: dict, after: dict) -> list[str]:
    """Compare this run with the saved baseline, figure by figure."""
    old = {row["key"]: row for row in figures(before)}
    out = ["", "## Before and after", "",
           f"Before: {before['machine']['date']}, commit {before['machine']['commit']}. "
           f"After: this run.", "",
           "| Figure | Before | Before ratio | After | After ratio | Target | Before → after |",
           "|---|---:|---:|---:|---:|---|---|"]
    for row in figures(after):
        was = old.get(row["key"])
        if was is None:
            continue
        ratio = lambda f: "—" if f["ratio"] is None else f"{f['ratio']:.2f}"  # noqa: E731
        out.append(f"| {row['section'].split(',')[0]}: {row['name']} | "
                   f"{_num(was['value'], was['unit'])} {was['unit']} | {ratio(was)} | "
                   f"{_num(row['value'], row['unit'])} {row['unit']} | {ratio(row)} | "
                   f"{row['target']} | {_verdict(was['ok'])} → {_verdict(row['ok'])} |")
    return out


def write(r: dict, path: Path) -> None:
    """Write RESULTS.md for one run."""
    m = r["machine"]
    rows = figures(r)
    misses = [row for row in rows if row["ok"] is False]
    out = ["# Benchmark results", "",
           "Written by `make bench` (bench/run.py); do not edit by hand — the before/after notes "
           "live in bench/fixes.md.", "",
           f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB memory "
           "(shared and noisy: figures move by 10–20 % between runs)",
           f"- Date: {m['date']}; commit {m['commit']}",
           f"- Python {m['python']}; {m['chromium']}; {m['wrk']}",
           "- Service as `make run` serves it: bin/serve, gunicorn 1 worker × 8 threads, SQLite "
           "under a temporary instance, sandbox process running, API rate limit lifted "
           "(EWT_API_RATE_LIMIT=1000000 per second) for the bench only",
           "- API: each request paced at a steady rate (open loop: what a person waits for at a "
           "realistic load) and under wrk's closed loop of many connections (how far it stretches)"
           ", at two ticket counts; see Load runs",
           "- Ceilings: bench/ceiling_app.py (bare Flask, same gunicorn settings, answers of the "
           "same size) measured in the same run for the API; a minimal page with one textarea "
           "for the capture page; see each section",
           "",
           f"**{len(misses)} of {sum(row['ok'] is not None for row in rows)} floors and targets "
           "missed**"
           + (": " + "; ".join(f"{row['section'].split(' (')[0]}: {row['name']}" for row in misses)
              if misses else "."), "",
           "Ratio = measured ÷ ceiling. KB = 1,000 bytes.", ""]
    out += summary_table(rows)
    baseline = HERE / "baseline.json"
    if baseline.exists():
        out += before_after(json.loads(baseline.read_text()), r)
    fixes = HERE / "fixes.md"
    if fixes.exists():
        out += ["", fixes.read_text().strip()]
    out += detail_sections(r)
    out += ["", *soak.section()]
    path.write_text("\n".join(out) + "\n")
