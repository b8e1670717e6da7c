"""Sign-in limits over loopback against the served app, from real 127.0.0.x addresses."""
from __future__ import annotations

import os

import pytest
import requests
from requests.adapters import HTTPAdapter

from services.accounts import reviewers
from support.servers import free_port
from tests.test_crash import start_server
from tests.test_review_pages import PASSWORD, csrf_token


class FromAddress(HTTPAdapter):
    """Connections from one loopback address of 127.0.0.0/8."""

    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        """Bind every connection's source address."""
        kwargs["source_address"] = (self.address, 0)
        return super().init_poolmanager(*args, **kwargs)


def browser(address: str) -> requests.Session:
    """A browser whose connections come from `address`."""
    session = requests.Session()
    session.mount("http://", FromAddress(address))
    return session


def sign_in(session: requests.Session, base: str, email: str, password: str) -> int:
    """Post the sign-in form as a browser does; the answer's status."""
    token = csrf_token(session.get(f"{base}/login", timeout=10).text)
    return session.post(f"{base}/login", data={"csrf_token": token, "email": email,
                                               "password": password},
                        allow_redirects=False, timeout=10).status_code


def sign_out(session: requests.Session, base: str) -> None:
    """Sign out through the queue page's form."""
    token = csrf_token(session.get(f"{base}/queue", timeout=10).text)
    session.post(f"{base}/logout", data={"csrf_token": token}, timeout=10)


@pytest.fixture
def served(app, sandbox_server, tmp_path):
    port = free_port()
    server = start_server(app, sandbox_server, tmp_path, port)
    yield f"http://127.0.0.1:{port}"
    os.killpg(server.pid, 15)
    server.wait(timeout=30)


@pytest.mark.live
def test_seven_sign_ins_from_one_address_in_a_minute_all_succeed(app, acme, served):
    with app.app_context():
        emails = [reviewers.create_reviewer(acme.company_id, f"pm{n}@acme.example", PASSWORD).email
                  for n in range(7)]
    statuses = []
    for email in emails:
        with browser("127.0.0.9") as office:
            statuses.append(sign_in(office, served, email, PASSWORD))
    assert statuses == [302] * 7


@pytest.mark.live
def test_thirty_addresses_guessing_leave_the_owners_browser_able_to_sign_in(app, acme, served):
    with app.app_context():
        email = reviewers.create_reviewer(acme.company_id, "pm@acme.example", PASSWORD).email
    owner = browser("127.0.0.1")
    assert sign_in(owner, served, email, PASSWORD) == 302
    sign_out(owner, served)
    guesses = []
    for n in range(30):
        with browser(f"127.0.0.{n + 2}") as attacker:
            guesses.append(sign_in(attacker, served, email, f"guess {n}"))
    assert set(guesses[:4]) == {401} and set(guesses[4:]) == {429}, guesses
    with browser("127.0.0.40") as stranger:  # the right password from a browser never used here
        assert sign_in(stranger, served, email, PASSWORD) == 429
    assert sign_in(owner, served, email, PASSWORD) == 302
    owner.close()
