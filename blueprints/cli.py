"""Command-line tools: `flask --app app keys ...`, `demo`, `reviewers ...`."""
from __future__ import annotations

import json

import click
from flask import Flask
from flask.cli import AppGroup, with_appcontext

from services import demo, keys, reviewers
from services.errors import ServiceError

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
@click.password_option()
def create_reviewer_command(company_id: int, email: str, password: str) -> None:
    """Create a reviewer login."""
    try:
        reviewer = reviewers.create_reviewer(company_id, email, password)
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
    click.echo(f"password changed for {reviewer.email}")


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
    for name in ("capture_url",):
        if info.get(name):
            click.echo(f"  Capture link   : {info[name]}")


def register_commands(app: Flask) -> None:
    """Attach every command group to the app's CLI."""
    app.cli.add_command(keys_cli)
    app.cli.add_command(reviewers_cli)
    app.cli.add_command(demo_command)
