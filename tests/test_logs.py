"""Request logs: one JSON line per request, and no secret in any log line."""
from __future__ import annotations

import json
import logging
import os
import re
import threading

from services import reviewers
from services.logs import BatchedLines, JsonLines, redact
from tests.images import data_url, jpeg_bytes


def formatted(caplog) -> list[str]:
    """Every captured record as the JSON line production would write."""
    formatter = JsonLines()
    return [formatter.format(record) for record in caplog.records]


def test_request_lines_carry_route_status_company_and_prefix(app, client, acme, caplog):
    caplog.set_level(logging.INFO)
    response = client.get("/v1/me", headers={**acme.headers, "X-Request-Id": "trace-12345678"})
    assert response.headers["X-Request-Id"] == "trace-12345678"
    lines = [json.loads(line) for line in formatted(caplog) if '"logger": "ewt.requests"' in line]
    entry = lines[-1]
    assert entry["route"] == "/v1/me" and entry["status"] == 200 and entry["method"] == "GET"
    assert entry["company_id"] == acme.company_id and entry["key_prefix"] == acme.prefix
    assert entry["request_id"] == "trace-12345678" and entry["duration_ms"] >= 0
    generated = client.get("/v1/me", headers={"X-Request-Id": "bad id with spaces"})
    assert re.fullmatch(r"[0-9a-f]{16}", generated.headers["X-Request-Id"])


def test_generated_request_ids_differ_across_requests_and_forked_workers(client):
    """Ids come from the random module, which each forked worker reseeds: no two collide."""
    def ids(count: int) -> list[str]:
        return [client.get("/healthz").headers["X-Request-Id"] for _ in range(count)]

    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.write(writer, " ".join(ids(50)).encode())
        finally:
            os._exit(0)
    os.close(writer)
    mine = ids(50)
    with os.fdopen(reader) as pipe:
        theirs = pipe.read().split()
    os.waitpid(child, 0)
    assert len(theirs) == 50 and all(re.fullmatch(r"[0-9a-f]{16}", i) for i in mine + theirs)
    assert len(set(mine) | set(theirs)) == 100


def test_no_secret_reaches_any_log_line(app, client, acme, caplog):
    caplog.set_level(logging.DEBUG)
    password = "a reviewer password 9"
    with app.app_context():
        reviewers.create_reviewer(acme.company_id, "pm@acme.example", password)
    link = client.post("/v1/links", headers=acme.headers, json={"project_id": acme.project()["id"]}).json
    client.get(link["url"])
    ticket = client.post(f"/c/{link['token']}/tickets?via=qr", json={
        "description": "d", "reason": "r", "directed_by": "x",
        "labor": [{"trade": "Laborer", "hours": 1, "rate": 1, "costCode": "02-200"}],
        "photos": [{"data_url": data_url(jpeg_bytes())}]}).json
    client.get("/v1/projects", headers={"X-API-Key": acme.key})
    client.post(f"/v1/tickets/{ticket['id']}/approve", headers=acme.headers, json={})
    client.get("/v1/me", headers={"Authorization": "Bearer ewt_" + "Z" * 43})  # an unknown key
    page = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    client.post("/login", data={"csrf_token": token, "email": "pm@acme.example", "password": password})
    lines = formatted(caplog)
    assert len(lines) >= 8
    everything = "\n".join(lines)
    for secret in (acme.key, "ewt_" + "Z" * 43, link["token"], acme.client_secret, password):
        assert secret not in everything
    assert "Bearer " not in everything


def test_redact_blanks_every_secret_shape():
    text = ("GET /c/AbCdEfGhIjKlMnOpQrStUvWxYz012345/q Authorization: Bearer abc.def "
            "key ewt_" + "k" * 43 + " client_secret=s3cr3t")
    cleaned = redact(text)
    assert "AbCdEf" not in cleaned and "abc.def" not in cleaned and "k" * 43 not in cleaned
    assert "s3cr3t" not in cleaned and cleaned.count("[redacted]") == 4


class RecordingStream:
    """A stream that keeps each write, and signals the first one."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.flushes = 0
        self.written = threading.Event()

    def write(self, text: str) -> None:
        self.writes.append(text)
        self.written.set()

    def flush(self) -> None:
        self.flushes += 1


def batched_logger(name: str, stream: RecordingStream, interval_s: float) -> logging.Logger:
    """A logger of its own writing plain messages through a BatchedLines handler."""
    handler = BatchedLines(stream, interval_s=interval_s)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger(f"tests.batched.{name}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger


def test_batched_lines_from_many_threads_are_written_once_each_in_one_write():
    stream = RecordingStream()
    logger = batched_logger("threads", stream, interval_s=3600)  # the test flushes, not the writer

    def log_lines(thread: int) -> None:
        for n in range(500):
            logger.info("thread %d line %d", thread, n)

    threads = [threading.Thread(target=log_lines, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert stream.writes == []  # kept, not yet written
    logger.handlers[0].flush()
    assert len(stream.writes) == 1 and stream.flushes == 1
    lines = stream.writes[0].splitlines()
    assert len(lines) == 4000 and len(set(lines)) == 4000
    for thread in range(8):
        mine = [line for line in lines if line.startswith(f"thread {thread} ")]
        assert mine == [f"thread {thread} line {n}" for n in range(500)]


def test_a_warning_is_written_at_once_after_the_lines_kept_before_it():
    stream = RecordingStream()
    logger = batched_logger("warning", stream, interval_s=3600)
    logger.info("first")
    logger.info("second")
    logger.warning("something is wrong")
    assert "".join(stream.writes) == "first\nsecond\nsomething is wrong\n"


def test_the_writer_thread_writes_a_batch_without_being_asked():
    stream = RecordingStream()
    logger = batched_logger("writer", stream, interval_s=0)
    logger.info("on its own")
    assert stream.written.wait(timeout=30)
    assert stream.writes == ["on its own\n"]


class FailingOnceStream(RecordingStream):
    """A stream whose first write fails, as a full disk or a closed pipe would."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = threading.Event()

    def write(self, text: str) -> None:
        if not self.failed.is_set():
            self.failed.set()
            raise OSError("no space left on device")
        super().write(text)


def test_the_writer_thread_goes_on_after_a_failed_write(capsys):
    stream = FailingOnceStream()
    logger = batched_logger("failing", stream, interval_s=0)
    logger.info("lost with the failed write")
    assert stream.failed.wait(timeout=30)
    logger.info("written by the same writer")
    assert stream.written.wait(timeout=30)
    assert stream.writes == ["written by the same writer\n"]
    assert "no space left on device" in capsys.readouterr().err


def test_a_kept_line_shows_its_arguments_as_they_were_when_logged():
    """Records are formatted by the writer later: the message is resolved when kept."""
    stream = RecordingStream()
    logger = batched_logger("arguments", stream, interval_s=3600)
    lines = ["first state"]
    logger.info("lines: %s", lines)
    lines[0] = "changed afterwards"
    logger.handlers[0].flush()
    assert stream.writes == ["lines: ['first state']\n"]


def test_a_record_that_cannot_be_formatted_costs_only_its_own_line(capsys):
    stream = RecordingStream()
    logger = batched_logger("unformattable", stream, interval_s=3600)
    logger.handlers[0].setFormatter(logging.Formatter("%(message)s %(missing_field)s"))
    logger.info("kept before", extra={"missing_field": "a"})
    logger.info("cannot be formatted")
    logger.info("kept after", extra={"missing_field": "b"})
    logger.handlers[0].flush()
    assert stream.writes == ["kept before a\nkept after b\n"]
    assert "missing_field" in capsys.readouterr().err
