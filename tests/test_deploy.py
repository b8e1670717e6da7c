"""Self-hosting files in deploy/: the units, the Caddyfile and the install script agree with
each other and with the app, and the parts that can run without root and systemd do run."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from flask import Flask, request
from werkzeug.middleware.proxy_fix import ProxyFix

from app import create_app
from support.servers import free_port
from tests.conftest import app_config
from webapp import default_config

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
INSTALL = DEPLOY / "install.sh"
PREFIX = "/opt/extra-work-tickets"
VENV_BIN = f"{PREFIX}/.venv/bin"
DATA_DIR = "/var/lib/extra-work-tickets"
BACKUP_DIR = "/var/backups/extra-work-tickets"
UNITS = ["extra-work-tickets.service", "extra-work-tickets-sandbox.service",
         "extra-work-tickets-backup.service", "extra-work-tickets-backup.timer",
         "extra-work-tickets-reminders.service", "extra-work-tickets-reminders.timer",
         "extra-work-tickets-sweep.service", "extra-work-tickets-sweep.timer",
         "extra-work-tickets-records.service", "extra-work-tickets-records.timer",
         "extra-work-tickets-digest.service", "extra-work-tickets-digest.timer",
         "extra-work-tickets-webhooks.service"]
SIZE_UNITS = {"": 1, "B": 1, "KB": 1000, "KIB": 1024, "MB": 1000**2, "MIB": 1024**2}


def read_unit(name: str) -> dict[str, dict[str, list[str]]]:
    """A unit file's settings by section; a repeated key (Environment=) keeps every value."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in (DEPLOY / name).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key, []).append(value)
    return sections


def one(unit: dict[str, dict[str, list[str]]], key: str, section: str = "Service") -> str:
    """The single value of a setting."""
    values = unit[section][key]
    assert len(values) == 1, f"{key} is set {len(values)} times"
    return values[0]


def command(value: str) -> list[str]:
    """A unit's command line as its arguments, after systemd's %% and $$ unescaping."""
    return shlex.split(value.replace("%%", "%").replace("$$", "$"))


def environment(unit: dict[str, dict[str, list[str]]]) -> dict[str, str]:
    """The Environment= assignments of a unit."""
    return dict(value.split("=", 1) for value in unit["Service"].get("Environment", []))


def bind_address(unit: dict[str, dict[str, list[str]]]) -> str:
    """The address a unit's ExecStart listens on (gunicorn's --bind, or server.py's HOST PORT)."""
    arguments = command(one(unit, "ExecStart"))
    if "--bind" in arguments:
        return arguments[arguments.index("--bind") + 1]
    at = arguments.index("server")
    return f"{arguments[at + 1]}:{arguments[at + 2]}"


def install_default(name: str) -> str:
    """The default a variable gets in install.sh."""
    found = re.search(rf"^{name}=(?:\$\{{{name}:-(.+)\}}|(\w+))$", INSTALL.read_text(), re.M)
    assert found, f"install.sh sets no {name}"
    return found.group(1) or found.group(2)


def config_heredoc() -> str:
    """The config.py text that install.sh writes, as it stands in the script."""
    found = re.search(r"<<CONFIG\n(.*?)^CONFIG$", INSTALL.read_text(), re.S | re.M)
    assert found, "install.sh writes no config.py heredoc"
    return found.group(1)


def caddy_size(text: str) -> int:
    """Bytes of a Caddyfile size such as 34MiB."""
    number, unit = re.fullmatch(r"(\d+)\s*([A-Za-z]*)", text).groups()
    return int(number) * SIZE_UNITS[unit.upper()]


def run_install(data_dir: Path, *arguments: str) -> subprocess.CompletedProcess:
    """Run install.sh with DATA_DIR pointed at a private folder."""
    return subprocess.run(["bash", str(INSTALL), *arguments], capture_output=True, text=True,
                          env=dict(os.environ, DATA_DIR=str(data_dir)), timeout=60)


def test_scripts_have_valid_syntax():
    """install.sh parses as bash and the ewt-admin wrapper as POSIX sh."""
    for shell, script in (("bash", INSTALL), ("sh", DEPLOY / "ewt-admin")):
        result = subprocess.run([shell, "-n", str(script)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert os.access(script, os.X_OK), f"{script.name} is not executable"


def test_scripts_pass_shellcheck():
    """shellcheck finds nothing in the deploy scripts."""
    assert shutil.which("shellcheck"), "shellcheck is missing (make test installs it)"
    result = subprocess.run(["shellcheck", str(INSTALL), str(DEPLOY / "ewt-admin")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_install_defaults_are_the_folders_the_units_name():
    """install.sh's default folders and user are the ones written in the units and the wrapper."""
    assert install_default("PREFIX") == PREFIX
    assert install_default("DATA_DIR") == DATA_DIR
    assert install_default("BACKUP_DIR") == BACKUP_DIR
    assert install_default("SERVICE_USER") == "ewt"
    wrapper = (DEPLOY / "ewt-admin").read_text()
    assert f"cd {PREFIX}\n" in wrapper
    assert f"runuser -u ewt -- env EWT_INSTANCE_PATH={DATA_DIR}" in wrapper
    assert f"{VENV_BIN}/flask --app app \"$@\"" in wrapper
    for name in UNITS:
        if name.endswith(".service"):
            unit = read_unit(name)
            assert one(unit, "User") == one(unit, "Group") == "ewt", name
            assert one(unit, "WorkingDirectory") == PREFIX, name


def test_service_applies_migrations_then_runs_what_make_run_runs():
    """The main unit migrates on every start, then runs server.py on loopback, the entry point
    bin/serve (make run) starts too."""
    unit = read_unit("extra-work-tickets.service")
    assert environment(unit)["EWT_INSTANCE_PATH"] == DATA_DIR
    assert [command(line) for line in unit["Service"]["ExecStartPre"]] == [
        [f"{VENV_BIN}/flask", "--app", "app", "db", "upgrade"]]
    assert command(one(unit, "ExecStart")) == [
        f"{VENV_BIN}/python", "-m", "server", "127.0.0.1", "8000", "8"]
    assert re.search(r'^python -m server "\$HOST" "\$PORT" "\$THREADS" &$',
                     (ROOT / "bin" / "serve").read_text(), re.M)
    # systemd waits for the grace period the server gives requests in flight, and more.
    assert int(one(unit, "TimeoutStopSec")) > default_config(DATA_DIR)["SHUTDOWN_GRACE_S"]
    assert one(unit, "KillMode") == "mixed"  # SIGTERM to the server alone, first
    assert one(unit, "Type") == "notify"
    assert one(unit, "Restart") == "on-failure"
    assert one(unit, "WantedBy", "Install") == "multi-user.target"
    assert "StandardOutput" not in unit["Service"], "logs belong in the journal"


def test_service_may_write_only_its_data_folder():
    """The main unit runs unprivileged, sees the system read-only and writes only DATA_DIR."""
    unit = read_unit("extra-work-tickets.service")
    expected = {"NoNewPrivileges": "true", "ProtectSystem": "strict", "ReadWritePaths": DATA_DIR,
                "PrivateTmp": "true", "ProtectHome": "true", "PrivateDevices": "true",
                "CapabilityBoundingSet": ""}
    assert {key: one(unit, key) for key in expected} == expected


def test_sandbox_unit_matches_where_the_app_looks():
    """The optional sandbox listens on the app's SANDBOX_URL and keeps its file in the data folder."""
    unit = read_unit("extra-work-tickets-sandbox.service")
    defaults = default_config(DATA_DIR)
    arguments = command(one(unit, "ExecStart"))
    assert arguments[0] == f"{VENV_BIN}/gunicorn"
    assert arguments[-1] == "sandbox:create_sandbox_app()"
    assert bind_address(unit) == urlsplit(defaults["SANDBOX_URL"]).netloc
    assert environment(unit)["SANDBOX_DB_PATH"] == defaults["SANDBOX_DB_PATH"]
    assert environment(unit)["SANDBOX_FILES_DIR"].startswith(DATA_DIR + "/")
    assert one(unit, "ReadWritePaths") == DATA_DIR
    assert environment(unit)["XDG_RUNTIME_DIR"] == "/run/" + one(unit, "RuntimeDirectory")
    main = read_unit("extra-work-tickets.service")["Unit"]
    assert not any("sandbox" in value for key in ("Wants", "Requires") for value in main.get(key, []))


def test_backup_units_back_up_nightly_and_prune_after_14_days():
    """The backup service runs `flask backup` into a dated folder, then prunes; the timer is nightly."""
    unit = read_unit("extra-work-tickets-backup.service")
    assert one(unit, "Type") == "oneshot"
    assert environment(unit) == {"EWT_INSTANCE_PATH": DATA_DIR}
    shell, flag, script = command(one(unit, "ExecStart"))
    assert (shell, flag) == ("/bin/sh", "-c")
    assert shlex.split(script) == ["exec", f"{VENV_BIN}/flask", "--app", "app", "backup",
                                   f"{BACKUP_DIR}/$(date +%F-%H%M)"]
    prune = command(one(unit, "ExecStartPost"))
    assert prune[:2] == ["/usr/bin/find", BACKUP_DIR]
    assert prune[prune.index("-mtime") + 1] == "+13"  # whole days of age beyond 13: 14 or more
    assert one(unit, "ReadWritePaths").split() == [DATA_DIR, BACKUP_DIR]
    timer = read_unit("extra-work-tickets-backup.timer")
    assert re.fullmatch(r"\*-\*-\* \d\d:\d\d:\d\d", one(timer, "OnCalendar", "Timer"))
    assert one(timer, "Persistent", "Timer") == "true"
    assert one(timer, "WantedBy", "Install") == "timers.target"


def test_reminder_units_send_due_reminders_every_15_minutes():
    """The reminders service runs `flask reminders send` on the data folder; its timer every 15 minutes;
    install.sh installs, enables and starts the timer."""
    unit = read_unit("extra-work-tickets-reminders.service")
    assert one(unit, "Type") == "oneshot" and one(unit, "User") == "ewt"
    assert environment(unit) == {"EWT_INSTANCE_PATH": DATA_DIR}
    assert command(one(unit, "ExecStart")) == [f"{VENV_BIN}/flask", "--app", "app", "reminders", "send"]
    assert one(unit, "ReadWritePaths").split() == [DATA_DIR]
    timer = read_unit("extra-work-tickets-reminders.timer")
    assert one(timer, "OnCalendar", "Timer") == "*:0/15"
    assert one(timer, "WantedBy", "Install") == "timers.target"
    script = INSTALL.read_text()
    assert '"$SERVICE-reminders.service" "$SERVICE-reminders.timer"' in script
    assert re.search(r'^systemctl enable .*"\$SERVICE-reminders\.timer"', script, re.M)
    assert re.search(r'^systemctl start .*"\$SERVICE-reminders\.timer"', script, re.M)


def test_digest_units_send_the_morning_digests_every_15_minutes():
    """The digest service runs `flask digest send` on the data folder; its timer every 15
    minutes (each reviewer gets one a day); install.sh installs, enables and starts the timer."""
    unit = read_unit("extra-work-tickets-digest.service")
    assert one(unit, "Type") == "oneshot" and one(unit, "User") == "ewt"
    assert environment(unit) == {"EWT_INSTANCE_PATH": DATA_DIR}
    assert command(one(unit, "ExecStart")) == [f"{VENV_BIN}/flask", "--app", "app", "digest", "send"]
    assert one(unit, "ReadWritePaths").split() == [DATA_DIR]
    timer = read_unit("extra-work-tickets-digest.timer")
    assert re.fullmatch(r"\*:\d+/15", one(timer, "OnCalendar", "Timer"))
    assert one(timer, "WantedBy", "Install") == "timers.target"
    script = INSTALL.read_text()
    assert '"$SERVICE-digest.service" "$SERVICE-digest.timer"' in script
    assert re.search(r'^  "\$SERVICE-digest\.timer" \\$', script, re.M)  # enabled
    assert re.search(r'^systemctl start .*"\$SERVICE-digest\.timer"', script, re.M)


def test_records_units_read_back_written_tickets_every_15_minutes():
    """The records service runs `flask project-system sync` on the data folder; its timer every
    15 minutes; install.sh installs, enables and starts the timer."""
    unit = read_unit("extra-work-tickets-records.service")
    assert one(unit, "Type") == "oneshot" and one(unit, "User") == "ewt"
    assert environment(unit) == {"EWT_INSTANCE_PATH": DATA_DIR}
    assert command(one(unit, "ExecStart")) == [f"{VENV_BIN}/flask", "--app", "app",
                                               "project-system", "sync"]
    assert one(unit, "ReadWritePaths").split() == [DATA_DIR]
    timer = read_unit("extra-work-tickets-records.timer")
    assert one(timer, "OnCalendar", "Timer") == "*:7/15"
    assert one(timer, "WantedBy", "Install") == "timers.target"
    script = INSTALL.read_text()
    assert '"$SERVICE-records.service" "$SERVICE-records.timer"' in script
    assert re.search(r'^  "\$SERVICE-records\.timer" \\$', script, re.M)  # enabled
    assert re.search(r'^systemctl start .*"\$SERVICE-records\.timer"', script, re.M)


def test_sweep_units_remove_unused_photo_files_every_night():
    """The sweep service runs `flask photos orphans --remove` on the data folder; its timer is
    nightly; install.sh installs, enables and starts the timer."""
    unit = read_unit("extra-work-tickets-sweep.service")
    assert one(unit, "Type") == "oneshot" and one(unit, "User") == "ewt"
    assert environment(unit) == {"EWT_INSTANCE_PATH": DATA_DIR}
    assert command(one(unit, "ExecStart")) == [f"{VENV_BIN}/flask", "--app", "app", "photos",
                                               "orphans", "--remove"]
    assert one(unit, "ReadWritePaths").split() == [DATA_DIR]
    timer = read_unit("extra-work-tickets-sweep.timer")
    assert re.fullmatch(r"\*-\*-\* \d\d:\d\d:\d\d", one(timer, "OnCalendar", "Timer"))
    assert one(timer, "WantedBy", "Install") == "timers.target"
    script = INSTALL.read_text()
    assert '"$SERVICE-sweep.service" "$SERVICE-sweep.timer"; do' in script
    assert re.search(r'^  "\$SERVICE-sweep\.timer"$', script, re.M)  # enabled
    assert re.search(r'^systemctl start .*"\$SERVICE-sweep\.timer"$', script, re.M)


def test_webhook_unit_runs_the_worker_always_beside_the_service():
    """The webhook worker runs `flask webhooks work` on the data folder, restarts whenever it
    ends, and install.sh installs, enables and (re)starts it."""
    unit = read_unit("extra-work-tickets-webhooks.service")
    assert one(unit, "User") == "ewt" and one(unit, "Restart") == "always"
    assert environment(unit) == {"EWT_INSTANCE_PATH": DATA_DIR, "PYTHONUNBUFFERED": "1"}
    assert command(one(unit, "ExecStart")) == [f"{VENV_BIN}/flask", "--app", "app", "webhooks",
                                               "work"]
    assert one(unit, "ReadWritePaths").split() == [DATA_DIR]
    script = INSTALL.read_text()
    assert '"$SERVICE-webhooks.service" "$SERVICE-sweep.service"' in script
    assert re.search(r'^systemctl enable .*\\\n  "\$SERVICE-webhooks\.service" \\$', script, re.M)
    assert re.search(r'^systemctl restart .*"\$SERVICE-webhooks\.service"', script, re.M)


def test_units_pass_systemd_analyze_verify(tmp_path):
    """systemd itself accepts every unit, with the code folder pointed at this checkout."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed; the unit checks above still ran")
    for name in UNITS:
        text = (DEPLOY / name).read_text()
        text = text.replace(VENV_BIN, str(Path(sys.executable).parent)).replace(PREFIX, str(ROOT))
        (tmp_path / name).write_text(text)
    result = subprocess.run(["systemd-analyze", "verify", *(str(tmp_path / n) for n in UNITS)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_caddy_proxies_to_the_service_with_the_app_body_limit():
    """The Caddyfile hands requests to the unit's bind address and caps bodies at MAX_CONTENT_LENGTH."""
    text = (DEPLOY / "Caddyfile").read_text()
    bind = bind_address(read_unit("extra-work-tickets.service"))
    assert re.search(rf"^\s*reverse_proxy {re.escape(bind)}\b", text, re.M)
    size = re.search(r"^\s*max_size (\S+)$", text, re.M)
    assert size and caddy_size(size.group(1)) == default_config(DATA_DIR)["MAX_CONTENT_LENGTH"]
    assert re.search(r"^tickets\.example\.com \{$", text, re.M), "the placeholder install.sh replaces"
    assert not re.search(r"^\s*log\b", text, re.M), "an access log would record capture-link tokens"


def test_caddy_adapts_the_caddyfile(tmp_path):
    """Caddy's own parser reads the Caddyfile into the same upstream and body limit."""
    if shutil.which("caddy") is None:
        pytest.skip("caddy is not installed (Debian 12: apt-get install caddy); text checks ran")
    result = subprocess.run(["caddy", "adapt", "--config", str(DEPLOY / "Caddyfile"),
                             "--adapter", "caddyfile"], capture_output=True, text=True,
                            cwd=tmp_path, env=dict(os.environ, HOME=str(tmp_path)), timeout=60)
    assert result.returncode == 0, result.stderr
    server = json.loads(result.stdout)["apps"]["http"]["servers"]["srv0"]
    handlers = server["routes"][0]["handle"][0]["routes"][0]["handle"]
    by_name = {handler["handler"]: handler for handler in handlers}
    assert by_name["request_body"]["max_size"] == default_config(DATA_DIR)["MAX_CONTENT_LENGTH"]
    bind = bind_address(read_unit("extra-work-tickets.service"))
    assert by_name["reverse_proxy"]["upstreams"] == [{"dial": bind}]
    assert server["routes"][0]["match"] == [{"host": ["tickets.example.com"]}]


def test_install_writes_only_settings_the_app_reads():
    """Every name in install.sh's config.py is a setting of the app or of Flask."""
    names = re.findall(r"^([A-Z][A-Z0-9_]*) = ", config_heredoc(), re.M)
    assert names == ["SECRET_KEY", "PUBLIC_BASE_URL", "TRUSTED_PROXIES", "SESSION_COOKIE_SECURE"]
    known = set(default_config(DATA_DIR)) | set(Flask.default_config)
    assert set(names) <= known


def test_config_only_writes_a_config_the_app_loads(tmp_path, monkeypatch):
    """`install.sh --config-only DOMAIN` writes config.py once, and create_app reads it as meant."""
    for name in [n for n in os.environ if n.startswith("EWT_")] + ["DATABASE_URL"]:
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    result = run_install(data, "--config-only", "tickets.example.com")
    assert result.returncode == 0, result.stderr
    written = (data / "config.py").read_text()
    assert sorted(p.name for p in data.iterdir()) == ["config.py"]

    application = create_app({"TESTING": True, "INSTANCE_PATH": str(data)})
    assert re.fullmatch(r"[0-9a-f]{64}", application.config["SECRET_KEY"])
    assert application.config["PUBLIC_BASE_URL"] == "https://tickets.example.com"
    assert application.config["TRUSTED_PROXIES"] == 1
    assert application.config["SESSION_COOKIE_SECURE"] is True
    assert isinstance(application.wsgi_app, ProxyFix)
    assert not (data / "secret_key").exists(), "the key comes from config.py"

    again = run_install(data, "--config-only", "other.example.com")
    assert again.returncode == 0, again.stderr
    assert (data / "config.py").read_text() == written, "an existing config.py is kept as it is"


@pytest.mark.parametrize("domain", ["https://tickets.example.com", "tickets.example.com/x", "-x", ""])
def test_config_only_refuses_what_is_not_a_host_name(tmp_path, domain):
    """A URL or other non-host-name is refused before anything is written."""
    result = run_install(tmp_path / "data", "--config-only", domain)
    assert result.returncode != 0
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("proxies", [1, 0])
def test_forwarded_headers_count_only_behind_one_trusted_proxy(tmp_path, migrated_template, proxies):
    """TRUSTED_PROXIES=1 believes the last hop of X-Forwarded-*; 0 ignores the headers."""
    application = create_app(app_config(tmp_path, migrated_template, TRUSTED_PROXIES=proxies,
                                        PUBLIC_BASE_URL="https://tickets.example.com"))
    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "tickets.example.com",
               "X-Forwarded-For": "198.51.100.9, 203.0.113.7"}
    with application.test_client() as client:
        response = client.get("/login", headers=headers)
        assert response.status_code == 200
        cookie = response.headers["Set-Cookie"]
        assert cookie.startswith("session=")
        assert ("; Secure" in cookie) is bool(proxies)
        assert request.is_secure is bool(proxies)
        # Only the hop the proxy added counts; what the client put before it is not believed.
        assert request.remote_addr == ("203.0.113.7" if proxies else "127.0.0.1")
        assert request.host == ("tickets.example.com" if proxies else "localhost")


@pytest.mark.live
def test_unit_commands_serve_and_back_up(tmp_path):
    """The units' own commands on a private data folder: migrate, serve, back up, prune."""
    data, backups = tmp_path / "data", tmp_path / "backups"
    backups.mkdir()
    assert run_install(data, "--config-only", "tickets.example.com").returncode == 0
    port = free_port()

    def localise(arguments: list[str]) -> list[str]:
        """Point a unit command at this checkout, the private folders and a free port."""
        return [argument.replace(VENV_BIN, str(Path(sys.executable).parent))
                .replace(DATA_DIR, str(data)).replace(BACKUP_DIR, str(backups))
                .replace("127.0.0.1:8000", f"127.0.0.1:{port}").replace("8000", str(port))
                for argument in arguments]

    main = read_unit("extra-work-tickets.service")
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("EWT_") and key != "DATABASE_URL"}
    env.update(environment(main), EWT_INSTANCE_PATH=str(data))
    for line in main["Service"]["ExecStartPre"]:
        subprocess.run(localise(command(line)), cwd=ROOT, env=env, check=True,
                       capture_output=True, timeout=120)
    server = subprocess.Popen(localise(command(one(main, "ExecStart"))), cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        response = None
        for _ in range(600):  # the server needs a moment to bind; poll, bounded
            try:
                response = requests.get(f"http://127.0.0.1:{port}/login", timeout=5, headers={
                    "X-Forwarded-Proto": "https", "X-Forwarded-Host": "tickets.example.com",
                    "X-Forwarded-For": "203.0.113.7"})
                break
            except requests.ConnectionError:
                time.sleep(0.05)
        assert response is not None and response.status_code == 200
        assert "; Secure" in response.headers["Set-Cookie"]
        del response  # its kept-alive connection would hold the stopping worker for 2 s
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)

    backup = read_unit("extra-work-tickets-backup.service")
    stale = backups / "2000-01-01-0230"
    stale.mkdir()
    os.utime(stale, (time.time() - 20 * 86400,) * 2)
    subprocess.run(localise(command(one(backup, "ExecStart"))), cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=120)
    subprocess.run(localise(command(one(backup, "ExecStartPost"))), check=True, timeout=60)
    made = list(backups.iterdir())
    assert len(made) == 1 and re.fullmatch(r"\d{4}-\d\d-\d\d-\d{4}", made[0].name)
    assert json.loads((made[0] / "manifest.json").read_text())["tickets"] == 0
    reminders = read_unit("extra-work-tickets-reminders.service")
    sent = subprocess.run(localise(command(one(reminders, "ExecStart"))), cwd=ROOT, env=env,
                          check=True, capture_output=True, text=True, timeout=120)
    assert "e-mail is not set up" in sent.stdout  # the installed config.py names no MAIL_SERVER


def test_units_cap_memory_and_tasks():
    """Each unit has a memory ceiling (soft and hard) and a task ceiling."""
    for name in ("extra-work-tickets.service", "extra-work-tickets-sandbox.service",
                 "extra-work-tickets-webhooks.service"):
        text = (DEPLOY / name).read_text()
        for setting in ("MemoryMax", "MemoryHigh", "TasksMax"):
            assert re.search(rf"^{setting}=\S+$", text, re.M), f"{name} lacks {setting}"


def test_caddy_streams_bodies_to_the_server_with_a_short_read_timeout():
    """Caddy uses no buffering directive (deprecated, then renamed, across Caddy releases): the
    app's server paces bodies itself; Caddy still cuts a body off within minutes."""
    text = (DEPLOY / "Caddyfile").read_text()
    assert not re.search(r"^\s*(buffer_requests|request_buffers|buffer_responses)\b", text, re.M)
    read_body = re.search(r"^\s*read_body (\d+)([sm])$", text, re.M)
    assert read_body and int(read_body.group(1)) * (60 if read_body.group(2) == "m" else 1) <= 180


def test_caddy_validates_the_caddyfile(tmp_path):
    """`caddy validate` (Debian 12's Caddy, which make test-scale installs) accepts the file as
    install.sh writes it, with the warnings Caddy gives for deprecated directives failing it."""
    if shutil.which("caddy") is None:
        pytest.skip("caddy is not installed (Debian 12: apt-get install caddy); text checks ran")
    result = subprocess.run(["caddy", "validate", "--config", str(DEPLOY / "Caddyfile"),
                             "--adapter", "caddyfile"], capture_output=True, text=True,
                            cwd=tmp_path, env=dict(os.environ, HOME=str(tmp_path),
                                                   XDG_DATA_HOME=str(tmp_path),
                                                   XDG_CONFIG_HOME=str(tmp_path)), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Valid configuration" in result.stdout + result.stderr
    assert "deprecated" not in (result.stdout + result.stderr).lower()
