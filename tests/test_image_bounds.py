"""Image decoding with hard bounds: scan bombs, pixel floods, and the worker pool's limits."""
from __future__ import annotations

import time

import pytest

from services.files import image_pool
from services.files.photos import ImageRejected
from support.images import data_url, flat_png, jpeg_bytes, jpeg_scan_bomb
from tests.test_hostile_input import stored_state

CPU_BUDGET_S = 1.0


def _link(client, tenant) -> str:
    return client.post("/v1/links", headers=tenant.headers,
                       json={"project_id": tenant.project()["id"]}).json["token"]


def _send(client, token, photos):
    body = {"description": "Cut in a sleeve", "reason": "Not on the drawings", "directed_by": "Sam",
            "photos": photos}
    started = time.process_time()
    response = client.post(f"/c/{token}/tickets", json=body)
    return response, time.process_time() - started


@pytest.mark.parametrize("label, raw, reason", [
    ("scan bomb 49 MP", jpeg_scan_bomb(7000, 7000, scans=1000), "scans"),
    ("scan bomb within the pixel ceiling", jpeg_scan_bomb(4000, 3000, scans=600), "scans"),
    ("50 MP flat PNG", flat_png(7071, 7071), "too large"),
    ("long strip", flat_png(8000, 1000), "longest side"),
])
def test_costly_images_are_refused_cheaply_and_nothing_is_stored(app, client, acme, label, raw, reason):
    app.config["IMAGE_WORKERS"] = 0  # decode in this process, so its CPU time counts all the work
    token = _link(client, acme)
    before = stored_state(app)
    response, cpu = _send(client, token, [{"name": "good.jpg", "data_url": data_url(jpeg_bytes())},
                                          {"name": "trailer.jpg", "data_url": data_url(raw)}])
    assert response.status_code == 400, label
    problem = response.json["error"]["details"][0]
    assert problem["message"].startswith("photo 2 (trailer.jpg): ") and reason in problem["message"]
    assert cpu < CPU_BUDGET_S, f"{label} cost {cpu:.2f} s of CPU"
    assert stored_state(app) == before


def test_a_phone_photo_at_the_ceiling_still_goes_through(app, client, acme):
    token = _link(client, acme)
    response, _ = _send(client, token, [{"name": "wide.jpg", "data_url": data_url(jpeg_bytes(4096, 3072))}])
    assert response.status_code == 200 and response.json["photo_count"] == 1


def burn_cpu(_raw: bytes) -> None:
    """Spin forever: only the worker's CPU limit ends it."""
    while True:
        pass


def grab_memory(_raw: bytes) -> int:
    """Ask for far more memory than a worker may have."""
    return len(bytearray(2 * 1024 ** 3))


def echo_length(raw: bytes) -> int:
    """A well-behaved piece of image work."""
    return len(raw)


def test_pool_ends_an_image_that_runs_past_its_cpu_limit():
    settings = image_pool.PoolSettings(1, 1, 512 * 1024 ** 2)
    started = time.monotonic()
    [result] = image_pool.run_all([(burn_cpu, (b"x",), {})], settings, budget_s=20)
    assert isinstance(result, ImageRejected) and "too long" in result.message
    assert time.monotonic() - started < 15
    # The pool is whole again for the next request.
    assert image_pool.run_all([(echo_length, (b"abc",), {})], settings, budget_s=20) == [3]


def test_pool_refuses_an_image_that_needs_too_much_memory():
    settings = image_pool.PoolSettings(1, 5, 512 * 1024 ** 2)
    [result] = image_pool.run_all([(grab_memory, (b"x",), {})], settings, budget_s=20)
    assert isinstance(result, ImageRejected) and "memory" in result.message


def test_a_request_waits_no_longer_than_its_budget():
    settings = image_pool.PoolSettings(1, 3, 512 * 1024 ** 2)
    started = time.monotonic()
    with pytest.raises(image_pool.ImagesBusy) as busy:  # the host was busy, not the image bad
        image_pool.run_all([(burn_cpu, (b"x",), {}), (echo_length, (b"ab",), {})], settings,
                           budget_s=0.5)
    assert time.monotonic() - started < 3
    assert busy.value.status == 503 and busy.value.headers["Retry-After"]


def test_the_pool_keeps_working_over_hundreds_of_requests():
    """Workers are replaced as the pool ages, and a pool never ends up with no worker at all
    (as one whose workers retired through max_tasks_per_child can on Python 3.11)."""
    settings = image_pool.PoolSettings(2, 5, 512 * 1024 ** 2)
    sizes = [1, 2, 3, 1, 10, 2] * 40  # 760 calls: past a replacement of the pool
    assert sum(sizes) > image_pool.CALLS_PER_POOL
    for number, size in enumerate(sizes):
        calls = [(echo_length, (b"x" * (number % 7 + 1),), {})] * size
        assert image_pool.run_all(calls, settings, budget_s=20) == [number % 7 + 1] * size, number


def test_a_busy_pool_is_a_503_to_the_phone_the_plain_form_and_the_api(app, client, acme, monkeypatch):
    """When the pool is saturated the photo is not refused as unusable: 503 images_busy with
    Retry-After to the capture script and the API, and the plain form says to send again."""
    import io

    from support.images import data_url, jpeg_bytes

    def saturated(*_args, **_kwargs):
        raise image_pool.ImagesBusy()

    app.config["IMAGE_WORKERS"] = 2
    monkeypatch.setattr(image_pool, "run_all", saturated)
    token = client.post("/v1/links", headers=acme.headers,
                        json={"project_id": acme.project()["id"]}).json["token"]
    ticket = {"description": "Core drill", "reason": "r", "directed_by": "d",
              "photos": [{"name": "site.jpg", "data_url": data_url(jpeg_bytes())}]}
    phone = client.post(f"/c/{token}/tickets", json=ticket)
    assert phone.status_code == 503 and phone.json["error"]["code"] == "images_busy"
    assert int(phone.headers["Retry-After"]) > 0
    api = client.post("/v1/tickets", headers=acme.headers,
                      json={**ticket, "project_id": acme.project()["id"]})
    assert api.status_code == 503 and api.json["error"]["code"] == "images_busy"
    form = client.post(f"/c/{token}/tickets", headers={"Accept-Language": "es-MX,es;q=0.9"},
                       data={"description": "Zanja", "reason": "r", "directed_by": "Sam",
                             "photo_files": (io.BytesIO(jpeg_bytes()), "site.jpg")},
                       content_type="multipart/form-data")
    assert form.status_code == 503 and "la oficina está ocupada" in form.get_data(as_text=True)
