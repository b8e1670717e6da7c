"""Turn one run's figures into bench/RESULTS.md: machine, figures, ceilings, ratios, targets.

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


def figures(r: dict) -> list[dict]:
    """Every reported figure of a run, with its ceiling, ratio, target and verdict."""
    rows: list[dict] = []
    api = r["api"]
    for name in ("me", "list", "get", "create"):
        pair = api["create"] if name == "create" else api["reads"][name]
        s, c = pair["service"], pair["ceiling"]
        need = 0.4 if name == "create" else 0.6
        section = f"1. API, {api['tickets']:,} tickets"
        rows.append(_fig(f"api.{name}.rps", section, f"{LABELS[name]} req/s", s["rps"], "req/s",
                         c["rps"], f"ratio ≥ {need}", s["rps"] / c["rps"] >= need))
        rows.append(_fig(f"api.{name}.p50", section, f"{LABELS[name]} p50", s["p50_ms"], "ms",
                         c["p50_ms"], "—", None))
        rows.append(_fig(f"api.{name}.p99", section, f"{LABELS[name]} p99", s["p99_ms"], "ms",
                         c["p99_ms"], "< 100 ms", s["p99_ms"] < 100))
        if name == "create" and "durable" in pair:
            d = pair["durable"]
            rows.append(_fig("api.create.durable", section,
                             "Durable-write ceiling req/s (bare route + INSERT + COMMIT; informative)",
                             d["rps"], "req/s", c["rps"], "—", None))
            rows.append(_fig("api.create.vs_durable", section,
                             f"{LABELS[name]} req/s against the durable-write ceiling",
                             s["rps"], "req/s", d["rps"], "—", None))
    scale = r["scale"]
    section = f"2. Scale, {scale['big']:,} vs {scale['small']:,} tickets (ceiling = the smaller run)"
    for name in ("list", "get", "me"):
        small, big = scale["reads"][name]["small"], scale["reads"][name]["big"]
        rows.append(_fig(f"scale.{name}.rps", section, f"{LABELS[name]} req/s", big["rps"],
                         "req/s", small["rps"], "ratio ≥ 1/1.5 (0.67)",
                         big["rps"] / small["rps"] >= 1 / 1.5))
        rows.append(_fig(f"scale.{name}.p50", section, f"{LABELS[name]} p50", big["p50_ms"], "ms",
                         small["p50_ms"], "ratio ≤ 1.5", big["p50_ms"] / small["p50_ms"] <= 1.5))
        rows.append(_fig(f"scale.{name}.p99", section, f"{LABELS[name]} p99", big["p99_ms"], "ms",
                         small["p99_ms"], "< 100 ms", big["p99_ms"] < 100))
    page, minimal = r["page"]["capture"], r["page"]["minimal"]
    section = "3. Capture page, first load, mobile throttling (ceiling = minimal page)"
    rows.append(_fig("page.bytes", section, "Transferred", page["transfer_bytes"] / 1000, "KB",
                     minimal["transfer_bytes"] / 1000, "≤ 60 KB",
                     page["transfer_bytes"] <= 60_000))
    rows.append(_fig("page.js", section, "JavaScript transferred", page["js_bytes"] / 1000, "KB",
                     minimal["js_bytes"] / 1000, "≤ 30 KB", page["js_bytes"] <= 30_000))
    rows.append(_fig("page.usable", section, "Form usable after", page["usable_ms"], "ms",
                     minimal["usable_ms"], "≤ 2500 ms", page["usable_ms"] <= 2500))
    pb, ps = r["photo_browser"], r["photo_server"]
    section = "4. Photos, 12-megapixel camera JPEG"
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
    allowed = 3 + attachments
    section = f"5. Approve ({attachments} attachments: photo and signature)"
    rows.append(_fig("approve.calls", section, "Project-system calls per approval", calls,
                     "calls", allowed, f"≤ 3 + {attachments} = {allowed}", calls <= allowed))
    ms = statistics.median(a["ms"] for a in warm)
    waited = statistics.median(a["project_system_ms"] for a in warm)
    rows.append(_fig("approve.ms", section, "Approval time", ms, "ms", waited, "—", None))
    mem = r["memory"]
    rows.append(_fig("memory.mb", "6. Memory", "Gunicorn worker RSS after the load runs",
                     mem["service_mb"], "MB", mem["ceiling_mb"], "≤ 150 MB",
                     mem["service_mb"] <= 150))
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
        out.append(f"| {section} | {row['name']} | {_num(row['value'], row['unit'])} {row['unit']} "
                   f"| {_num(row['ceiling'], row['unit'])} | {ratio} | {row['target']} "
                   f"| {_verdict(row['ok'])} |")
    return out


def detail_sections(r: dict) -> list[str]:
    """Everything behind the summary: wrk runs, page resources, photos, approvals."""
    out = ["", "## Load runs", "",
           f"wrk 1 thread, 16 connections, {r['settings']['seconds']} s after a 2 s warm-up, "
           "on loopback. CPU is the gunicorn worker's user+system time per request.", "",
           "| Run | Server | req/s | p50 ms | p90 ms | p99 ms | max ms | CPU ms/req |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]

    def line(label: str, server: str, res: dict) -> str:
        """One wrk run."""
        cpu = res["worker_cpu_s"] * 1000 / res["requests"] if res.get("worker_cpu_s") else None
        return (f"| {label} | {server} | {res['rps']:,.0f} | {res['p50_ms']:.1f} | "
                f"{res['p90_ms']:.1f} | {res['p99_ms']:.1f} | {res['max_ms']:.0f} | {_num(cpu)} |")

    api, scale = r["api"], r["scale"]
    for name in ("me", "list", "get"):
        for server in ("ceiling", "service"):
            out.append(line(f"{LABELS[name]}, {api['tickets']:,} tickets", server,
                            api["reads"][name][server]))
    for server in ("ceiling", "durable", "service"):
        if server in api["create"]:
            label = "ceiling + durable write" if server == "durable" else server
            out.append(line(LABELS["create"], label, api["create"][server]))
    for name in ("list", "get", "me"):
        out.append(line(f"{LABELS[name]}, {scale['big']:,} tickets", "service",
                        scale["reads"][name]["big"]))
    sizes = r["sizes"]
    out += ["", "Answer sizes the ceiling copies (bytes): " +
            ", ".join(f"{LABELS[k]} {v:,}" for k, v in sizes.items()) + ".",
            f"Seeding {scale.get('seeded', scale['big'] - scale['small']):,} tickets by direct "
            f"inserts (to reach {scale['big']:,}) took {scale['seed_s']:.1f} s."]

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


def _rounds_note(ratios: dict[str, list[float]] | None) -> list[str]:
    """Say how section 1's figures were chosen, with the ratio of every pair run."""
    if not ratios:
        return []
    count = len(next(iter(ratios.values())))
    each = "; ".join(f"{LABELS[name]} " + ", ".join(f"{ratio:.2f}" for ratio in values)
                     for name, values in ratios.items())
    note = (f"Section 1 ran each API figure as {count} pairs, the ceiling then the service "
            "back to back, and reports the pair with the median ratio. Every pair's ratio, in "
            f"the order run: {each}.")
    return [note, ""]


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
           "under a temporary instance, sandbox process running, API rate limit lifted to "
           "1,000,000 per second (same moving-window check) for the bench only",
           "- Ceilings: bench/ceiling_app.py (bare Flask, same gunicorn settings, answers of the "
           "same size) for the API, and for POST /v1/tickets also that route plus one durable "
           "write (INSERT of the body, COMMIT, WAL with synchronous=FULL) to show what the write "
           "alone costs; a minimal page with one textarea for the capture page; see each section",
           "",
           f"**{len(misses)} of {sum(row['ok'] is not None for row in rows)} targets missed**"
           + (": " + "; ".join(f"{row['section'].split(',')[0]} {row['name']}" for row in misses)
              if misses else "."), "",
           "Ratio = measured ÷ ceiling. KB = 1,000 bytes.", ""]
    out += _rounds_note(r["api"].get("ratios"))
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
