"""Sign-in against an attacker: redirects, throttling, timing, sessions, disabling, passwords."""
from __future__ import annotations

import datetime as dt
import re
import threading

import pytest
import requests
import time_machine
from argon2 import PasswordHasher

from models import Reviewer, db
from services.accounts import auth, reviewers
from tests.mailbox import smtp_server
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
    from services.platform.errors import ValidationFailed

    with app.app_context(), pytest.raises(ValidationFailed) as refused:
        reviewers.create_reviewer(acme.company_id, "pm-acme@acme.example", password)
    assert refused.value.details[0]["field"] == "password"


def test_a_strong_password_is_accepted(app, acme):
    with app.app_context():
        assert reviewers.create_reviewer(acme.company_id, "pm@acme.example", "mud season 4 drywall").id


def test_seven_sign_ins_from_one_address_in_a_minute_all_succeed(app, acme):
    """An office of PMs behind one address: right passwords never count against it."""
    with app.app_context():
        emails = [reviewers.create_reviewer(acme.company_id, f"pm{n}@acme.example", PASSWORD).email
                  for n in range(7)]
    statuses = []
    for email in emails:
        client = app.test_client()
        client.environ_base["REMOTE_ADDR"] = "198.51.100.7"
        statuses.append(_login(client, email, PASSWORD).status_code)
    assert statuses == [302] * 7
    # Wrong passwords from that address still do count, and are throttled.
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = "198.51.100.7"
    wrong = [_login(client, email, "not the password").status_code for email in emails]
    assert wrong[:5] == [401] * 5 and set(wrong[5:]) == {429}


def test_many_addresses_at_one_account_leave_its_owners_browser_signing_in(app, acme):
    """Thirty wrong passwords from thirty addresses: the account is throttled for everyone
    else, while the browser that signed in to it before signs in again (its device cookie)."""
    email = add_reviewer(app, acme)
    owner = app.test_client()
    owner.environ_base["REMOTE_ADDR"] = "127.0.0.1"
    assert _login(owner, email, PASSWORD).status_code == 302
    assert owner.get_cookie("ewt_device", path="/login") is not None
    owner.post("/logout", data={"csrf_token": csrf_token(owner.get("/queue").get_data(as_text=True))})
    statuses = []
    for n in range(30):
        attacker = app.test_client()
        attacker.environ_base["REMOTE_ADDR"] = f"127.0.0.{n + 2}"
        statuses.append(_login(attacker, email, f"guess {n}").status_code)
    assert statuses[:4] == [401] * 4 and set(statuses[4:]) == {429}  # the owner's sign-in was 1
    stranger = app.test_client()  # even with the right password: it never signed in here
    assert _login(stranger, email, PASSWORD).status_code == 429
    assert _login(owner, email, PASSWORD).status_code == 302
    # The owner's browser guesses no more than anyone else: its own bucket is throttled too.
    owner.post("/logout", data={"csrf_token": csrf_token(owner.get("/queue").get_data(as_text=True))})
    own = [_login(owner, email, "wrong").status_code for _ in range(6)]
    assert own[:4] == [401] * 4 and set(own[4:]) == {429}


def test_a_device_cookie_counts_only_for_its_own_account(app, acme):
    email = add_reviewer(app, acme)
    other = add_reviewer(app, acme, email="pm2@acme.example")
    browser = app.test_client()
    assert _login(browser, email, PASSWORD).status_code == 302
    browser.post("/logout", data={"csrf_token": csrf_token(browser.get("/queue").get_data(as_text=True))})
    for n in range(5):
        _login(app.test_client(), other, f"guess {n}")
    assert _login(browser, other, PASSWORD).status_code == 429  # no pass on another account
    browser.set_cookie("ewt_device", "forged.value.here", path="/login")
    assert _login(browser, other, PASSWORD).status_code == 429


def _attack(app, email: str, tries: int = 30) -> None:
    """Wrong passwords at one account from many addresses, until it is throttled for strangers."""
    for n in range(tries):
        attacker = app.test_client()
        attacker.environ_base["REMOTE_ADDR"] = f"127.0.0.{n + 2}"
        _login(attacker, email, f"guess {n}")


def _ask_link(client, email: str):
    token = csrf_token(client.get("/login").get_data(as_text=True))
    answer = client.post("/login/link", data={"csrf_token": token, "link_email": email})
    answer.close()  # as a server does once the answer is out: the e-mail goes then
    return answer


def _link_in(message) -> str:
    """The path of the sign-in link in an e-mail."""
    return re.search(r"https?://[^/\s]+(/login/link/\S+)", message.get_content()).group(1)


def test_the_owner_gets_in_from_a_new_browser_by_an_emailed_link_during_an_attack(app, acme):
    email = add_reviewer(app, acme)
    _attack(app, email)
    owner = app.test_client()  # a new browser: no device cookie
    assert _login(owner, email, PASSWORD).status_code == 429
    with smtp_server() as mailbox:
        app.config.update(mailbox.settings())
        # The attacker asks for links too (more than the limit sends): they only reach the owner.
        for _ in range(8):
            assert _ask_link(app.test_client(), email).status_code == 200
        unknown = _ask_link(app.test_client(), "nobody@acme.example")
        assert unknown.status_code == 200 and "on its way" in unknown.get_data(as_text=True)
        assert len(mailbox.messages) == 5  # SIGN_IN_LINK_RATE_LIMIT; no mail for an unknown e-mail
    assert all(m["To"] == email for m in mailbox.messages)
    first = _link_in(mailbox.messages[0])
    page = owner.get(first)  # opening the link (a mail scanner may) does not spend it
    assert page.status_code == 200 and "Sign in as" in page.get_data(as_text=True)
    done = owner.post(first, data={"csrf_token": csrf_token(page.get_data(as_text=True))})
    assert done.status_code == 302 and done.headers["Location"].endswith("/queue")
    assert owner.get("/queue").status_code == 200
    # Once: that link and every one sent with it are spent.
    again = app.test_client()
    for path in (first, _link_in(mailbox.messages[-1])):
        spent = again.get(path)
        assert spent.status_code == 404
        assert '<form method="post" action="/login">' in spent.get_data(as_text=True)
    # The browser it was used in is now a known device: the owner's password works there.
    owner.post("/logout", data={"csrf_token": csrf_token(owner.get("/queue").get_data(as_text=True))})
    assert _login(owner, email, PASSWORD).status_code == 302


def test_the_answer_to_a_known_email_does_not_wait_for_its_mail(app, acme, live_server):
    """The link's e-mail goes after the answer, so how long the answer takes tells nothing."""
    email = add_reviewer(app, acme)
    with smtp_server() as mailbox:
        app.config.update(mailbox.settings())
        mailbox.hold = threading.Event()  # the mail server takes its time
        with requests.Session() as browser:
            token = csrf_token(browser.get(live_server.url + "/login", timeout=10).text)
            answer = browser.post(live_server.url + "/login/link", timeout=3,
                                  data={"csrf_token": token, "link_email": email})
        assert answer.status_code == 200 and "on its way" in answer.text
        assert mailbox.messages == []
        mailbox.hold.set()
        assert mailbox.received.wait(10), "the link's e-mail never went"
    assert mailbox.messages[0]["To"] == email and _link_in(mailbox.messages[0])


def test_a_sign_in_link_expires(app, acme):
    email = add_reviewer(app, acme)
    with smtp_server() as mailbox:
        app.config.update(mailbox.settings())
        start = dt.datetime.now(dt.timezone.utc)
        with time_machine.travel(start, tick=False):
            _ask_link(app.test_client(), email)
        path = _link_in(mailbox.messages[0])
        with time_machine.travel(start + dt.timedelta(minutes=16), tick=False):
            assert app.test_client().get(path).status_code == 404


def test_a_password_reset_voids_device_cookies(app, acme):
    email = add_reviewer(app, acme)
    owner = app.test_client()
    assert _login(owner, email, PASSWORD).status_code == 302
    with app.app_context():
        reviewers.reset_password(email, "a brand new passphrase")
    _attack(app, email)
    # The cookie given under the old password (one a thief may have copied) no longer passes.
    assert _login(owner, email, "a brand new passphrase").status_code == 429
