"""Servers on loopback for tests and the bench: free ports, and moto's S3-compatible server
(a real process spoken to over HTTP) with fresh buckets."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

import requests


def free_port() -> int:
    """A free loopback port, as the OS hands it out."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout_s: float = 60.0) -> None:
    """Block until something accepts connections on the port, or fail after the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout_s:.0f} s")


def s3_test_credentials() -> None:
    """Credentials for moto where none are set: it takes any, and these keep boto3 from
    looking further (and from real AWS)."""
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)


def start_s3_server(log_path) -> tuple[subprocess.Popen, str]:
    """moto's S3-compatible server on a free loopback port, answering once this returns."""
    port = free_port()
    with open(log_path, "w") as log:
        server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                   "-p", str(port)], stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(600):  # bounded wait until it answers
        try:
            requests.get(f"{endpoint}/moto-api/", timeout=5)
            return server, endpoint
        except requests.RequestException:
            if server.poll() is not None:
                break
            time.sleep(0.05)
    server.kill()
    raise AssertionError(f"the S3 server did not start; see {log_path}")


def new_bucket(endpoint: str) -> str:
    """A fresh, empty bucket's name."""
    from services.files.storage import s3_client

    name = f"ewt-{uuid.uuid4().hex[:16]}"
    s3_client(endpoint).create_bucket(Bucket=name)
    return name
