"""Sign-in against an attacker: redirects, throttling, timing, sessions, disabling, passwords."""
from __future__ import annotations

import threading

import pytest
from argon2 import PasswordHasher

from models import Reviewer, db
from services import auth, reviewers
from tests.test_review_pages import PASSWORD, add_reviewer, csrf_token, sign_in


def _login(client, email, password, query=""):
    token = csrf_token(client.get("/login").get_data(as_text=True))
    return client.post("/login" + query, data={"csrf_token": token, "email": email, "password": password})


@pytest.mark.parametrize("next_value, expected", [
    ("/%09/evil.example", "/queue"),
    ("/%0a/evil.example", "/queue"),
    ("/%0d%0aSet-Cookie:%20x=1", "/Set-Cookie:%20x=1"),
    ("//evil.example", "/queue"),
    ("/\\evil.example", "/queue"),
    ("https://evil.example/", "/queue"),
    ("/%00//evil.example", None),  # a NUL in the query is refused outright (400)
    ("/tickets/abc?status=needs_review", "/tickets/abc?status=needs_review"),
])
def test_next_is_only_a_bare_local_path(app, client, acme, next_value, expected):
    email = add_reviewer(app, acme)
    response = _login(client, email, PASSWORD, query="?next=" + next_value)
    if expected is None:
        assert response.status_code == 400 and "Location" not in response.headers
        return
    assert response.status_code == 302
    location = response.headers["Location"]
    assert location == expected
    assert "\n" not in location and "\r" not in location and "\t" not in location


def test_failures_at_one_account_from_many_addresses_are_throttled(app, acme):
    email = add_reviewer(app, acme)
    statuses = []
    for n in range(12):
        client = app.test_client()
        client.environ_base["REMOTE_ADDR"] = f"198.51.100.{n + 1}"
        statuses.append(_login(client, email, "not the password").status_code)
    assert statuses[:5] == [401] * 5
    assert set(statuses[5:]) == {429}


def test_concurrent_tries_are_counted_before_the_password_check(app, acme, monkeypatch):
    email = add_reviewer(app, acme)
    checked = []
    real_check = auth.check_login
    monkeypatch.setattr(auth, "check_login", lambda *a: checked.append(1) or real_check(*a))
    client = app.test_client()
    token = csrf_token(client.get("/login").get_data(as_text=True))
    start = threading.Barrier(20)
    statuses = []

    def attempt():
        worker = app.test_client()
        worker.set_cookie("session", client.get_cookie("session").value)
        start.wait()
        statuses.append(worker.post("/login", data={"csrf_token": token, "email": email,
                                                    "password": "wrong"}).status_code)

    threads = [threading.Thread(target=attempt) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(checked) <= 5
    assert statuses.count(429) >= 15


def test_unknown_email_costs_one_verification_and_no_hash(app, acme, monkeypatch):
    email = add_reviewer(app, acme)
    calls = {"hash": 0, "verify": 0}
    real_hash, real_verify = PasswordHasher.hash, PasswordHasher.verify

    def counting_hash(self, *args, **kwargs):
        calls["hash"] += 1
        return real_hash(self, *args, **kwargs)

    def counting_verify(self, *args, **kwargs):
        calls["verify"] += 1
        return real_verify(self, *args, **kwargs)

    monkeypatch.setattr(PasswordHasher, "hash", counting_hash)
    monkeypatch.setattr(PasswordHasher, "verify", counting_verify)
    with app.app_context():
        auth.check_login("nobody@acme.example", "whatever it is")  # may make the dummy hash once
        calls.update(hash=0, verify=0)
        auth.check_login("nobody-else@acme.example", "whatever it is")
        unknown = dict(calls)
        calls.update(hash=0, verify=0)
        auth.check_login(email, "whatever it is")
        known = dict(calls)
    assert unknown == known == {"hash": 0, "verify": 1}


def test_logout_ends_every_session_of_the_reviewer(app, acme):
    email = add_reviewer(app, acme)
    phone, tablet = app.test_client(), app.test_client()
    first = sign_in(app, phone, acme, email=email)
    sign_in(app, tablet, acme, email=email)
    stolen = phone.get_cookie("session").value
    assert first.post("/logout").status_code == 302
    assert tablet.get("/queue").status_code == 302  # the other device is signed out too
    replay = app.test_client()
    replay.set_cookie("session", stolen)
    assert replay.get("/queue").status_code == 302


def test_password_reset_ends_every_session(app, acme):
    email = add_reviewer(app, acme)
    client = app.test_client()
    sign_in(app, client, acme, email=email)
    assert client.get("/queue").status_code == 200
    with app.app_context():
        reviewers.reset_password(email, "a new pass phrase 7")
    assert client.get("/queue").status_code == 302


def test_cli_disables_and_enables_a_reviewer(app, acme, runner):
    email = add_reviewer(app, acme)
    client = app.test_client()
    sign_in(app, client, acme, email=email)
    result = runner.invoke(args=["reviewers", "disable", "--email", email])
    assert result.exit_code == 0, result.output
    assert client.get("/queue").status_code == 302
    assert _login(app.test_client(), email, PASSWORD).status_code == 401
    assert runner.invoke(args=["reviewers", "enable", "--email", email]).exit_code == 0
    assert _login(app.test_client(), email, PASSWORD).status_code == 302


def test_company_admin_disables_a_reviewer_from_the_page(app, acme, rival):
    with app.app_context():
        reviewers.create_reviewer(acme.company_id, "boss@acme.example", PASSWORD, is_admin=True)
        worker = reviewers.create_reviewer(acme.company_id, "pm@acme.example", PASSWORD)
        outsider = reviewers.create_reviewer(rival.company_id, "pm@rival.example", PASSWORD)
        worker_id, outsider_id = worker.id, outsider.id
    pm_client = app.test_client()
    pm = sign_in(app, pm_client, acme, email="pm@acme.example")
    assert pm.get("/reviewers").status_code == 403  # not an admin
    boss = sign_in(app, app.test_client(), acme, email="boss@acme.example")
    page = boss.get("/reviewers").get_data(as_text=True)
    assert "pm@acme.example" in page and "pm@rival.example" not in page
    assert boss.post(f"/reviewers/{outsider_id}/disable").status_code == 404
    assert boss.post(f"/reviewers/{worker_id}/disable").status_code == 200
    assert pm_client.get("/queue").status_code == 302
    with app.app_context():
        assert db.session.get(Reviewer, worker_id).disabled_at is not None
        assert db.session.get(Reviewer, outsider_id).disabled_at is None


@pytest.mark.parametrize("password", ["aaaaaaaaaa", "password123", "1234567890", "qwertyuiop",
                                      "Password1!", "abababababab", "pm-acme-2026!"])
def test_weak_and_common_passwords_are_refused(app, acme, password):
    from services.errors import ValidationFailed

    with app.app_context(), pytest.raises(ValidationFailed) as refused:
        reviewers.create_reviewer(acme.company_id, "pm-acme@acme.example", password)
    assert refused.value.details[0]["field"] == "password"


def test_a_strong_password_is_accepted(app, acme):
    with app.app_context():
        assert reviewers.create_reviewer(acme.company_id, "pm@acme.example", "mud season 4 drywall").id
