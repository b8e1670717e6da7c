"""`make run`'s launcher end to end: migrations, first-start demo, gunicorn, the printed key."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from support.servers import free_port
from tests.receiver import Receiver

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.live
def test_serve_prints_a_key_that_answers_me(tmp_path):
    receiver = Receiver()
    port, sandbox_port = free_port(), free_port()
    env = dict(os.environ, HOST="127.0.0.1", PORT=str(port), THREADS="4",
               SANDBOX_PORT=str(sandbox_port),
               EWT_INSTANCE_PATH=str(tmp_path / "instance"), EWT_WEBHOOK_ALLOW_PRIVATE="127.0.0.1",
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    env.pop("DATABASE_URL", None)
    process = subprocess.Popen([str(ROOT / "bin" / "serve")], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    lines: list[str] = []
    try:
        key = capture = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "API key" in line:
                key = line.split(":", 1)[1].strip()
            if "Capture link" in line:
                capture = line.split(":", 1)[1].strip()
            if "Serving on" in line:
                break
        assert key, "".join(lines)
        base = f"http://127.0.0.1:{port}"
        response = None
        for _ in range(200):  # gunicorn needs a moment to bind; poll, bounded
            try:
                response = requests.get(f"{base}/v1/me", headers={"Authorization": f"Bearer {key}"},
                                        timeout=30)
                break
            except requests.ConnectionError:
                time.sleep(0.05)
        assert response is not None and response.status_code == 200, "".join(lines)
        assert response.json()["key"]["name"] == "demo"
        # The sandbox project system runs beside the service.
        projects = requests.get(f"{base}/v1/projects", headers={"Authorization": f"Bearer {key}"},
                                timeout=10)
        assert projects.status_code == 200, projects.text
        assert len(projects.json()["data"]) >= 2
        assert capture.startswith(f"http://127.0.0.1:{port}/c/")
        page = requests.get(capture, timeout=10)
        assert page.status_code == 200 and "ticket-form" in page.text
        assert (tmp_path / "instance" / "tickets.sqlite3").exists()

        # The demo command works while the server runs on the same database.
        demo = subprocess.run([sys.executable, "-m", "flask", "--app", "app", "demo", "--json"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert demo.returncode == 0, demo.stderr
        new_key = json.loads(demo.stdout)["api_key"]
        me = requests.get(f"{base}/v1/me", headers={"X-API-Key": new_key}, timeout=5)
        assert me.status_code == 200
        assert me.json()["company"]["id"] == json.loads(demo.stdout)["company_id"]

        # The webhook worker runs beside them: a new ticket reaches a registered endpoint.
        hooks = {"Authorization": f"Bearer {key}"}
        assert requests.post(f"{base}/v1/webhooks", headers=hooks, timeout=10,
                             json={"url": receiver.url}).status_code == 200
        ticket = requests.post(f"{base}/v1/tickets", headers=hooks, timeout=30, json={
            "project_id": projects.json()["data"][0]["id"], "description": "Moved a trench",
            "reason": "Gas line", "directed_by": "The super",
            "labor": [{"trade": "Laborer", "hours": 1, "rate": 50}]})
        assert ticket.status_code == 200, ticket.text
        deadline = time.monotonic() + 30
        while not receiver.requests and time.monotonic() < deadline:  # bounded
            time.sleep(0.05)
        assert json.loads(receiver.requests[0][1])["data"]["id"] == ticket.json()["id"]
        # A kept-alive connection, open while its answer lives, holds a stopping worker 2 s.
        del response, projects, page, me
    finally:
        process.send_signal(signal.SIGTERM)  # the launcher stops the sandbox and the service
        process.wait(timeout=30)
        lines.extend(process.stdout.read().splitlines())
        process.stdout.close()
        receiver.close()
        for leftover in (port, sandbox_port):
            with socket.socket() as probe:
                assert probe.connect_ex(("127.0.0.1", leftover)) != 0, f"port {leftover} still served"
    # One JSON line per request reached stdout, batched or not, by the time the service stopped.
    requests_logged = [entry for entry in map(_json_or_none, lines)
                       if entry and entry.get("logger") == "ewt.requests"]
    routes = [(entry["route"], entry["status"]) for entry in requests_logged]
    assert routes.count(("/v1/me", 200)) == 2, routes
    assert ("/v1/projects", 200) in routes and ("/c/<token>", 200) in routes


def _json_or_none(line: str) -> dict | None:
    """A log line's JSON object, or None for the launcher's plain lines."""
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


# What only the `flask` commands use: Alembic and Flask-Migrate (`flask db`), the commands
# themselves, and the embedded sandbox's demo seeding (`flask demo`). Together about 15 MB a
# serving process does not hold.
COMMANDS_ONLY = ("alembic", "flask_migrate", "blueprints.cli", "services.demo", "sandbox",
                 "sqlite_utils")


def test_the_serving_process_loads_nothing_only_the_commands_use(tmp_path):
    script = ("import sys\nimport server\nimport webapp\nwebapp.create_web_app()\n"
              "print('MODULES', *sorted(sys.modules))\n"
              "import app\napp.create_app()\nprint('MODULES', *sorted(sys.modules))\n")
    env = dict(os.environ, EWT_INSTANCE_PATH=str(tmp_path / "instance"))
    env.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    serving, commands = (set(line.split()[1:]) for line in done.stdout.splitlines()
                         if line.startswith("MODULES "))

    def commands_only(loaded: set[str]) -> list[str]:
        return sorted(name for name in COMMANDS_ONLY
                      if name in loaded or any(m.startswith(name + ".") for m in loaded))

    assert {"webapp", "flask", "services.health"} <= serving
    assert commands_only(serving) == []
    assert not {m for m in serving if m.split(".")[0] == "redis"}  # its limits are in memory
    assert commands_only(commands) == sorted(COMMANDS_ONLY)  # `flask --app app` still has them
