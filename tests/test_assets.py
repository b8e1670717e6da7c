"""Static files under addresses that name their content, kept for a year by phones."""
from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

from tests.test_links import make_link

YEAR = "max-age=31536000"


def script_addresses(html: str) -> dict[str, str]:
    """The static files a page loads, by file name, with their full addresses."""
    return {re.sub(r"\?.*", "", src).removeprefix("/static/"): src
            for src in re.findall(r'(?:src|href)="(/static/[^"]+)"', html)}


def test_static_addresses_name_the_files_content_and_are_kept_a_year(client, acme, app):
    link = make_link(client, acme)
    addresses = script_addresses(client.get(f"/c/{link['token']}").get_data(as_text=True))
    assert {"capture.js", "capture-send.js", "capture.css"} <= set(addresses)
    for name, address in addresses.items():
        digest = hashlib.sha256((Path(app.static_folder) / name).read_bytes()).hexdigest()[:16]
        assert address.endswith(f"?v={digest}"), address
        with client.get(address) as answer:
            assert answer.status_code == 200
            assert answer.headers["Cache-Control"] == f"public, {YEAR}, immutable", name
            # (bytes on one bar: nothing the kept answer never uses)
            assert not {"Content-Disposition", "Last-Modified"} & set(answer.headers.keys()), name
    # An address without the digest, or with another file's, is checked again every time.
    for address in ("/static/capture.js", "/static/capture.js?v=0123456789abcdef"):
        with client.get(address) as answer:
            assert answer.status_code == 200 and answer.headers["Cache-Control"] == "no-cache"
    # The worker's own script is always checked for a new release.
    with client.get("/c/sw.js") as worker:
        assert "immutable" not in worker.headers["Cache-Control"]
    assert client.get("/static/../app.py?v=0").status_code == 404


def test_a_changed_file_gets_a_new_address(client, acme, app, tmp_path):
    link = make_link(client, acme)
    before = script_addresses(client.get(f"/c/{link['token']}").get_data(as_text=True))
    release = tmp_path / "static"
    shutil.copytree(app.static_folder, release)
    with open(release / "capture.js", "a") as script:
        script.write("\n// next release\n")
    app.static_folder = str(release)
    after = script_addresses(client.get(f"/c/{link['token']}").get_data(as_text=True))
    assert after["capture.js"] != before["capture.js"]
    assert after["capture-send.js"] == before["capture-send.js"]
    with client.get(before["capture.js"]) as old:  # a page of the last release still loads,
        assert old.headers["Cache-Control"] == "no-cache"  # but nobody keeps the answer


def test_the_worker_imports_its_files_at_their_versioned_addresses(client, app, tmp_path):
    """The worker's imports are kept for a year, and a changed import changes the worker itself."""
    def imports() -> list[str]:
        script = client.get("/c/sw.js").get_data(as_text=True)
        (call,) = re.findall(r"importScripts\(([^)]*)\)", script)
        return re.findall(r'"([^"]+)"', call)

    before = imports()
    assert [address.split("?")[0] for address in before] == [
        "/static/vendor/idb-keyval-6.3.0.umd.js", "/static/capture-send.js"]
    for address in before:
        with client.get(address) as answer:
            assert "immutable" in answer.headers["Cache-Control"], address
    etag = client.get("/c/sw.js").headers["ETag"]
    release = tmp_path / "static"
    shutil.copytree(app.static_folder, release)
    with open(release / "capture-send.js", "a") as script:
        script.write("\n// next release\n")
    app.static_folder = str(release)
    after = imports()
    assert after[0] == before[0] and after[1] != before[1]
    assert client.get("/c/sw.js", headers={"If-None-Match": etag}).status_code == 200


def test_static_answers_do_not_vary_with_the_cookie(app, client, acme):
    """A cache in front of the service keeps one copy of a file for every visitor."""
    from tests.test_review_pages import sign_in

    page = sign_in(app, client, acme).get("/queue")
    assert page.status_code == 200
    assert "Cookie" in page.headers.get("Vary", "")
    with client.get(script_addresses(page.get_data(as_text=True))["review.js"]) as answer:
        assert answer.status_code == 200
        assert "Cookie" not in answer.headers.get("Vary", "") and "Set-Cookie" not in answer.headers
