"""/v1/docs: the OpenAPI document rendered for people by the vendored Redoc, with nothing
fetched from anywhere but this server."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from blueprints.openapi import REDOC_SCRIPT

STATIC = Path(__file__).resolve().parent.parent / "static"


def test_docs_page_names_the_vendored_renderer_and_the_document(client):
    response = client.get("/v1/docs")
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    page = response.get_data(as_text=True)
    script = re.search(r'<script src="([^"]+)"></script>', page).group(1)
    assert script.startswith(f"/static/{REDOC_SCRIPT}?v=")
    assert re.search(r'<redoc spec-url="/v1/openapi.json">', page)
    assert "http://" not in page and "https://" not in page
    served = client.get(script)
    assert served.status_code == 200
    assert served.get_data() == (STATIC / REDOC_SCRIPT).read_bytes()
    served.close()
    assert (STATIC / REDOC_SCRIPT.replace(".standalone.js", ".LICENSE")).is_file()


def test_docs_page_policy_allows_this_server_alone(client):
    policy = client.get("/v1/docs").headers["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["connect-src"] == "'self'"
    assert directives["default-src"] == "'self'"
    assert directives["worker-src"] == "blob:"
    assert directives["frame-ancestors"] == "'none'"
    # The other pages keep their stricter policy: inline styles are allowed here only.
    other = client.get("/login").headers["Content-Security-Policy"]
    assert "'unsafe-inline'" not in other


@pytest.mark.browser
def test_docs_render_every_section_from_this_server_alone(live_server, chromium):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    requests, failed, problems = [], {}, []
    context.on("request", lambda request: requests.append(request.url))
    context.on("requestfailed", lambda request: failed.setdefault(request.url, request.failure))
    page = context.new_page()
    # Redoc's menu shows its maker's logo from the maker's CDN; the page's policy blocks that
    # image in the browser (which says so on the console), and nothing else may fail.
    blocked_image = 'violates the following Content Security Policy directive: "img-src'
    page.on("console", lambda message: message.type == "error"
            and blocked_image not in message.text and problems.append(message.text))
    page.on("pageerror", lambda error: problems.append(str(error)))
    try:
        page.goto(f"{live_server.url}/v1/docs")
        document = page.request.get(f"{live_server.url}/v1/openapi.json").json()
        # An operation's summary, a section heading and the document's own description show.
        page.get_by_role("heading", name="Create a ticket with the same validation as the "
                                         "capture form.").wait_for(timeout=20_000)
        text = page.inner_text("body")
        for tag in document["tags"]:
            assert tag["x-displayName"] in text, tag["name"]
        assert "Decisions where the contract left the shape open" in text
        # The search index runs in its worker: a search finds the signing-link operations.
        page.get_by_placeholder("Search...").fill("signing link")
        results = page.locator("[data-role='search:results'] [role=menuitem]")
        results.first.wait_for(timeout=10_000)
        assert "Stop a signing link from working; revoking again, or a used link, changes " \
               "nothing." in " ".join(results.all_inner_texts())
    finally:
        context.close()
    own = urlsplit(live_server.url).netloc
    elsewhere = [url for url in requests
                 if not url.startswith(("blob:", "data:")) and urlsplit(url).netloc != own]
    # Every address elsewhere the page named was stopped in the browser: none left it.
    assert {url: failed.get(url) for url in elsewhere} == \
        dict.fromkeys(elsewhere, "csp")
    assert f"{live_server.url}/v1/openapi.json" in requests
    assert problems == []
