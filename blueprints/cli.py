"""Command-line tools: `flask --app app keys ...`, `demo`, `reviewers ...`."""
from __future__ import annotations

import json
import signal
import threading
import time

import click
from flask import Flask, current_app
from flask.cli import AppGroup, with_appcontext

from models import short_reference
from services import demo
from services.accounts import companies, keys, reviewers
from services.approval import record_status
from services.approval.connection_check import run as run_connection_check
from services.capture import signing
from services.files import backup, photo_sweep, photo_uploads, storage_migration
from services.platform import mail
from services.platform.errors import ServiceError
from services.project_system import connections, projects
from services.reports import digest
from services.routing import learning
from services.webhooks import webhook_delivery

keys_cli = AppGroup("keys", help="Create, list and revoke API keys.")
reviewers_cli = AppGroup("reviewers", help="Manage reviewer logins.")


def _fail(error: ServiceError) -> None:
    """Turn a service refusal into a clean CLI error."""
    raise click.ClickException(error.message)


@keys_cli.command("create")
@click.option("--company", "company_id", type=int, required=True, help="Company id.")
@click.option("--name", required=True, help="What the key is for, e.g. 'accounting sync'.")
def create_key_command(company_id: int, name: str) -> None:
    """Create an API key and print it once."""
    try:
        issued = keys.issue_key(company_id, name)
    except ServiceError as error:
        _fail(error)
    click.echo(issued.secret)
    click.echo(f"(prefix {issued.record.prefix}; store the key now, it cannot be shown again)",
               err=True)


@keys_cli.command("list")
@click.option("--company", "company_id", type=int, default=None, help="Only this company.")
def list_keys_command(company_id: int | None) -> None:
    """List keys without their secrets."""
    for record in keys.list_keys(company_id):
        state = f"revoked {record.revoked_at:%Y-%m-%d %H:%M}" if record.revoked_at else "active"
        used = f"{record.last_used_at:%Y-%m-%d %H:%M}" if record.last_used_at else "never"
        click.echo(f"{record.prefix}  company={record.company_id}  name={record.name!r}  "
                   f"created={record.created_at:%Y-%m-%d %H:%M}  last_used={used}  {state}")


@keys_cli.command("revoke")
@click.argument("prefix")
def revoke_key_command(prefix: str) -> None:
    """Revoke the key with this prefix."""
    try:
        record = keys.revoke_key(prefix)
    except ServiceError as error:
        _fail(error)
    click.echo(f"revoked {record.prefix} ({record.name})")


@reviewers_cli.command("create")
@click.option("--company", "company_id", type=int, required=True)
@click.option("--email", required=True)
@click.option("--admin", is_flag=True, help="May disable the company's other reviewers and make API keys.")
@click.password_option()
def create_reviewer_command(company_id: int, email: str, admin: bool, password: str) -> None:
    """Create a reviewer login."""
    try:
        reviewer = reviewers.create_reviewer(company_id, email, password, is_admin=admin)
    except ServiceError as error:
        _fail(error)
    click.echo(f"created reviewer {reviewer.email} for company {reviewer.company_id}")


@reviewers_cli.command("reset-password")
@click.option("--email", required=True)
@click.password_option()
def reset_password_command(email: str, password: str) -> None:
    """Set a new password for a reviewer."""
    try:
        reviewer = reviewers.reset_password(email, password)
    except ServiceError as error:
        _fail(error)
    click.echo(f"password changed for {reviewer.email}; every session of it has ended")


@reviewers_cli.command("disable")
@click.option("--email", required=True)
def disable_reviewer_command(email: str) -> None:
    """Stop a reviewer from signing in, ending every session of it."""
    try:
        reviewer = reviewers.set_disabled_by_email(email, True)
    except ServiceError as error:
        _fail(error)
    click.echo(f"disabled {reviewer.email}")


@reviewers_cli.command("enable")
@click.option("--email", required=True)
def enable_reviewer_command(email: str) -> None:
    """Let a disabled reviewer sign in again."""
    try:
        reviewer = reviewers.set_disabled_by_email(email, False)
    except ServiceError as error:
        _fail(error)
    click.echo(f"enabled {reviewer.email}")


@click.command("demo")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--only-if-empty", is_flag=True, help="Do nothing when a company already exists.")
@with_appcontext
def demo_command(as_json: bool, only_if_empty: bool) -> None:
    """Create a new, independent demo company and print how to use it."""
    if only_if_empty and demo.has_any_company():
        click.echo("Using the existing data. New key: flask --app app keys create --company ID --name NAME")
        return
    info = demo.create_demo_company()
    if as_json:
        click.echo(json.dumps(info))
        return
    click.echo("Demo company created.")
    click.echo(f"  Reviewer login : {info['reviewer']['email']} / {info['reviewer']['password']}")
    click.echo(f"  API key        : {info['api_key']}")
    for project in info.get("projects", []):
        tool = "change events" if project["change_events"] else "daily log only"
        click.echo(f"  Project        : {project['id']} {project['name']} ({tool})")
    if info.get("capture_url"):
        click.echo(f"  Capture link   : {info['capture_url']}")


def register_commands(app: Flask) -> None:
    """Attach every command group to the app's CLI."""
    app.cli.add_command(keys_cli)
    app.cli.add_command(reviewers_cli)
    app.cli.add_command(demo_command)
    app.cli.add_command(companies_cli)
    app.cli.add_command(project_system_cli)
    app.cli.add_command(backup_cli)
    app.cli.add_command(storage_cli)
    app.cli.add_command(restore_command)
    app.cli.add_command(photos_cli)
    app.cli.add_command(reminders_cli)
    app.cli.add_command(routing_cli)
    app.cli.add_command(webhooks_cli)
    app.cli.add_command(digest_cli)


project_system_cli = AppGroup("project-system", help="Connect a company to Procore and check it.")
companies_cli = AppGroup("companies", help="Create and list companies.")
photos_cli = AppGroup("photos", help="Look after the stored photo and signature files.")
storage_cli = AppGroup("storage", help="Move the stored files to a bucket.")
reminders_cli = AppGroup("reminders", help="E-mail reminders of unsigned signing links.")
webhooks_cli = AppGroup("webhooks", help="Send the webhook events stored for programs.")
digest_cli = AppGroup("digest", help="E-mail each reviewer the morning digest of what waits.")
routing_cli = AppGroup("routing", help="See, and undo, what routing learned from the PM's choices.")


@routing_cli.command("explain")
@click.option("--company", "company_id", type=int, required=True, help="Company id.")
@click.option("--kind", type=click.Choice(["labor", "equipment", "materials"]), default="labor",
              show_default=True, help="The kind of line.")
@click.option("--sub", default=None, help="The sub or crew the line comes from.")
@click.option("--description", default=None, help="The ticket's description.")
@click.argument("words")
def routing_explain_command(company_id: int, kind: str, sub: str | None,
                            description: str | None, words: str) -> None:
    """Say where a line saying WORDS would be routed, and the past decisions behind it."""
    found = learning.explain(company_id, words, kind, sub, description)
    if found.suggestion is None:
        click.echo(f"{kind} line '{words}': no suggestion (nothing this company routed is alike)")
    else:
        s = found.suggestion
        click.echo(f"{kind} line '{words}': cost code {s.cost_code}, {s.cost_type} "
                   f"({s.budget_code} where it was chosen): {s.reason}")
    for score, row in found.decisions:
        click.echo(f"  #{row.id}  {score:3.0f}% alike  '{row.text}'"
                   f"{' from ' + row.sub if row.sub else ''} -> {row.budget_code} "
                   f"({row.how}, {row.decided_at:%Y-%m-%d}, ticket {short_reference(row.ticket_id)}, "
                   f"project {row.project_id})")


@routing_cli.command("forget")
@click.option("--company", "company_id", type=int, required=True, help="Company id.")
@click.argument("decision_ids", nargs=-1, type=int, required=True)
def routing_forget_command(company_id: int, decision_ids: tuple[int, ...]) -> None:
    """Forget past decisions by their number (as `routing explain` lists them)."""
    click.echo(f"{learning.forget(company_id, list(decision_ids))} decision(s) forgotten")


@webhooks_cli.command("work")
def webhooks_work_command() -> None:
    """Send webhook deliveries until stopped (SIGTERM or Ctrl-C ends it after the sends under
    way); several may run against one PostgreSQL database."""
    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    click.echo("Sending webhook events", err=True)
    webhook_delivery.work(current_app._get_current_object(), stop)


@webhooks_cli.command("send")
def webhooks_send_command() -> None:
    """Send the deliveries that are due now, once, and say how many were tried."""
    attempted = webhook_delivery.run_once(current_app._get_current_object())
    click.echo(f"{attempted} delivery attempt(s)")


@reminders_cli.command("send")
def send_reminders_command() -> None:
    """E-mail the reminders that are due (safe to run often and twice at once; a timer runs it)."""
    if not mail.configured():
        click.echo("no reminders: e-mail is not set up (MAIL_SERVER)")
        return
    sent = signing.send_due_reminders()
    click.echo(f"{len(sent)} reminder(s) sent")


@digest_cli.command("send")
def send_digest_command() -> None:
    """E-mail the morning digests that are due (safe to run often and twice at once; a timer
    runs it)."""
    if not mail.configured():
        click.echo("no digest: e-mail is not set up (MAIL_SERVER)")
        return
    sent = digest.send_due()
    click.echo(f"{len(sent)} digest(s) sent")


@photos_cli.command("orphans")
@click.option("--min-age-hours", type=click.FloatRange(min=1), default=24.0, show_default=True,
              help="Only files unchanged for this long (at least an hour).")
@click.option("--remove", is_flag=True, help="Remove them; without it they are only listed.")
def photo_orphans_command(min_age_hours: float, remove: bool) -> None:
    """List image files no ticket refers to (left by refused or interrupted requests, or staged
    for a ticket whose text never came within STAGED_PHOTO_DAYS), and photos sent in part and
    left unfinished for PHOTO_PIECE_HOURS."""
    stale = photo_sweep.drop_stale_staged(remove)
    days = current_app.config["STAGED_PHOTO_DAYS"]
    click.echo(f"{'dropped' if remove else 'found'} {stale} photo(s) staged over {days} days for "
               "a ticket that never came")
    unfinished = photo_uploads.drop_stale(remove)
    click.echo(f"{'dropped' if remove else 'found'} {unfinished} photo(s) sent in part and "
               f"left unfinished over {current_app.config['PHOTO_PIECE_HOURS']} hours")
    report = photo_sweep.sweep_orphans(min_age_hours * 3600, remove=remove)
    now = time.time()
    for orphan in report.found:
        click.echo(f"{orphan.name}\t{orphan.size} bytes\t{(now - orphan.modified) / 3600:.0f} h old")
    found_bytes = sum(orphan.size for orphan in report.found)
    if remove:
        removed_bytes = sum(orphan.size for orphan in report.removed)
        click.echo(f"removed {len(report.removed)} of {len(report.found)} orphaned files "
                   f"({removed_bytes:,} bytes)")
    else:
        click.echo(f"{len(report.found)} orphaned files ({found_bytes:,} bytes); "
                   "--remove takes them away")


@storage_cli.command("migrate")
@click.option("--to", "url", required=True, help="s3://BUCKET/PREFIX")
@click.option("--endpoint", default=None, help="S3_ENDPOINT_URL of a bucket not on AWS.")
def storage_migrate_command(url: str, endpoint: str | None) -> None:
    """Copy every stored file to a bucket, check each by its digest, and switch to it."""
    try:
        report = storage_migration.migrate(url, endpoint)
    except (ValueError, ServiceError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"copied {report.copied}, already there {report.present}; every file checked by "
               f"its digest; {report.config_file} now says STORAGE_URL = {url!r}")
    click.echo("restart the service, then run this again to copy what came in meanwhile")


@companies_cli.command("create")
@click.option("--name", required=True, help="The firm's name.")
@click.option("--sandbox/--no-sandbox", default=False,
              help="Also connect it to a fresh company in the embedded sandbox.")
def create_company_command(name: str, sandbox: bool) -> None:
    """Create a company (a tenant) and print its id."""
    try:
        company = companies.create_company(name)
        if sandbox:
            demo.connect_embedded_sandbox(company.id, name=company.name)
    except ServiceError as error:
        _fail(error)
    click.echo(company.id)


@project_system_cli.command("connect")
@click.option("--company", "company_id", type=int, required=True, help="Our company id.")
@click.option("--environment", type=click.Choice(connections.ENVIRONMENTS), required=True)
@click.option("--client-id", required=True, help="The Procore app's client id.")
@click.option("--client-secret", prompt=True, hide_input=True, help="Asked for when not given.")
@click.option("--procore-company-id", type=int, required=True, help="The Procore company id.")
@click.option("--api-base", default=None, help="Only for --environment custom.")
@click.option("--oauth-base", default=None, help="Only for --environment custom.")
@click.option("--web-base", default=None, help="Only for --environment custom.")
def connect_command(company_id: int, environment: str, client_id: str, client_secret: str,
                    procore_company_id: int, api_base: str | None, oauth_base: str | None,
                    web_base: str | None) -> None:
    """Store a company's Procore connection, then check it."""
    try:
        connections.save_connection(company_id, environment=environment, client_id=client_id,
                                    client_secret=client_secret,
                                    remote_company_id=procore_company_id, api_base=api_base,
                                    oauth_base=oauth_base, web_base=web_base)
    except ServiceError as error:
        _fail(error)
    projects.clear_caches()
    click.echo("saved; checking the connection:")
    _print_findings(connections.check_connection(company_id))


@project_system_cli.command("sync")
@click.option("--limit", type=click.IntRange(1, 1000), default=record_status.SYNC_PAGE,
              show_default=True, help="Tickets read in this run, the longest since last tried first.")
def sync_command(limit: int) -> None:
    """Read back Procore's status of tickets written in the last 90 days (a timer runs it)."""
    # Each company's calls are paced by its rate limit; a company busy or away waits a run.
    report = record_status.sync_due(limit=limit)
    click.echo(f"{report.read} record(s) read, {report.failed} refused")
    for company_id, code in sorted(report.skipped_companies.items()):
        click.echo(f"company {company_id}: left for the next run ({code})")


@project_system_cli.command("check")
@click.option("--company", "company_id", type=int, required=True)
@click.option("--write-test", is_flag=True,
              help="Also approve scratch tickets into a change event and a daily log entry, "
                   "check them, and delete them.")
@click.option("--project", "project_id", type=int, default=None,
              help="Procore project id for --write-test (default: the first with change events).")
def check_command(company_id: int, write_test: bool, project_id: int | None) -> None:
    """Check a company's connection (read-only unless --write-test) and say what is wrong."""
    findings = connections.check_connection(company_id)
    _print_findings(findings)
    if write_test and all(ok is not False for ok, _ in findings):
        click.echo("write test:")
        written = run_connection_check(company_id, project_id)
        _print_findings(written)
        findings += written
    if any(ok is False for ok, _ in findings):
        raise SystemExit(1)


def _print_findings(findings: list[tuple[bool | None, str]]) -> None:
    """Print check results, one line each: ok, FAIL, or note (works, but worth knowing)."""
    for ok, text in findings:
        click.echo(f"  {'ok  ' if ok else 'note' if ok is None else 'FAIL'} {text}")


class BackupGroup(AppGroup):
    """`backup PATH` writes a backup; any other first word is one of its subcommands."""

    def resolve_command(self, ctx, args):
        """Read `backup PATH` as `backup to PATH`."""
        if args and args[0] not in self.commands:
            return "to", self.commands["to"], args
        return super().resolve_command(ctx, args)


backup_cli = BackupGroup("backup", help="Back up (PATH: a new folder, or s3://BUCKET/PREFIX), "
                                        "verify, make a key.")


@backup_cli.command("to")
@click.argument("path")
def backup_command(path: str) -> None:
    """Copy the database and files to a new folder PATH, or encrypted to s3://BUCKET/PREFIX,
    while the service keeps running."""
    try:
        summary = backup.create_backup(path)
    except backup.BackupError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"backed up {summary.tickets} tickets and {summary.photo_files} photo files to {summary.path}")


@backup_cli.command("verify")
@click.argument("url")
def backup_verify_command(url: str) -> None:
    """Restore the newest backup in s3://BUCKET/PREFIX into a scratch folder and check it."""
    try:
        summary = backup.verify_latest(url)
    except (backup.BackupError, ServiceError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"ok: {summary.path} restores to {summary.tickets} tickets and "
               f"{summary.photo_files} whole files")


@backup_cli.command("new-key")
@click.argument("path")
def backup_new_key_command(path: str) -> None:
    """Write a new backup key to PATH; keep a copy away from this machine."""
    try:
        backup.new_key(path)
    except FileExistsError:
        raise click.ClickException(f"{path} exists; a key is never overwritten") from None
    click.echo(f"wrote a new backup key to {path}; set BACKUP_KEY_FILE to it and keep a copy "
               "elsewhere: without it no backup can be read")


@click.command("restore")
@click.argument("path")
@click.option("--yes", is_flag=True, help="Replace the current data without asking.")
@with_appcontext
def restore_command(path: str, yes: bool) -> None:
    """Replace this instance's database and files with the backup in PATH, or the newest in
    s3://BUCKET/PREFIX (stop the service first)."""
    if not yes:
        click.confirm("This replaces the current database and photos. Is the service stopped?", abort=True)
    try:
        summary = backup.restore_backup(path)
    except (backup.BackupError, ServiceError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"restored {summary.tickets} tickets and {summary.photo_files} photo files "
               f"from {summary.path}")
