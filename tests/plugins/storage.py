"""The file store each test's app uses: the folder, or a fresh bucket on an S3-compatible server.

The server is moto's server mode, a real process on a free loopback port spoken to over HTTP
(started once per run), or the one `make test-scale` started (TEST_S3_ENDPOINT), under which
every test uses a bucket. Tests marked `both_stores` run once with each backend.
"""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from support.servers import new_bucket, s3_test_credentials, start_s3_server
from tests.plugins.parallel import hold_apart

S3_ENDPOINT = os.environ.get("TEST_S3_ENDPOINT")
s3_test_credentials()


def pytest_generate_tests(metafunc) -> None:
    """Run `both_stores` tests once on the folder and once on a bucket."""
    if metafunc.definition.get_closest_marker("both_stores") and \
            "store_backend" in metafunc.fixturenames:
        metafunc.parametrize("store_backend", ["folder", "bucket"], indirect=True)


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory) -> Iterator[str]:
    """The address of an S3-compatible server on loopback."""
    if S3_ENDPOINT:
        yield S3_ENDPOINT
        return
    server, endpoint = start_s3_server(tmp_path_factory.mktemp("s3") / "moto.log")
    hold_apart("the S3 server", endpoint)
    yield endpoint
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture
def store_backend(request) -> str:
    """Which store the test's app uses: a bucket under make test-scale, else the folder."""
    return getattr(request, "param", "bucket" if S3_ENDPOINT else "folder")


@pytest.fixture
def store_config(request, store_backend) -> dict:
    """The app settings of that store (none for the folder: PHOTO_DIR is set per test)."""
    if store_backend == "folder":
        return {}
    endpoint = request.getfixturevalue("s3_endpoint")
    return {"STORAGE_URL": f"s3://{new_bucket(endpoint)}/files", "S3_ENDPOINT_URL": endpoint}


def storage_env(app) -> dict[str, str]:
    """Environment that gives a server process started by a test the app's own store."""
    env = {"EWT_PHOTO_DIR": app.config["PHOTO_DIR"]}
    if app.config.get("STORAGE_URL"):
        env.update(STORAGE_URL=app.config["STORAGE_URL"],
                   S3_ENDPOINT_URL=app.config["S3_ENDPOINT_URL"])
    return env


def stored_names(app) -> list[str]:
    """The file names of the app's store (keys, and a folder's unfinished writes), sorted."""
    from services.files.storage import file_store

    with app.app_context():
        return sorted(entry.name.rsplit("/", 1)[-1] for entry in file_store().entries())


FOLDER_ONLY = pytest.mark.parametrize("store_backend", ["folder"], indirect=True)
