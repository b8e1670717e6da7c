"""A camera-like test photo, and the server's processing of one photo against a Pillow baseline."""
from __future__ import annotations

import io
import statistics
import time
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFilter


def camera_jpeg(width: int = 4000, height: int = 3000) -> bytes:
    """A photo-like 12-megapixel JPEG: gradients, shapes and light grain (as the browser tests make)."""
    image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    draw = ImageDraw.Draw(image)
    for i in range(12):
        x, y = (i * 331) % width, (i * 197) % height
        draw.ellipse([x, y, x + 600, y + 400], fill=(40 + i * 15, 90, 160 - i * 8))
        draw.rectangle([y % width, x % height, y % width + 300, x % height + 900],
                       fill=(150, 120 + i * 5, 60))
    noise = Image.effect_noise((width, height), 18).convert("RGB")
    image = Image.blend(image, noise, 0.12).filter(ImageFilter.SMOOTH)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=92)
    return buffer.getvalue()


def _baseline(raw: bytes, quality: int = 82) -> bytes:
    """Pillow alone: decode the image and encode it again as JPEG, nothing else."""
    with Image.open(io.BytesIO(raw)) as image:
        image.load()
        out = io.BytesIO()
        image.save(out, "JPEG", quality=quality)
    return out.getvalue()


@dataclass(frozen=True)
class ServerPhoto:
    """Median times of process_photo and of the bare decode-and-encode baseline on one input."""

    input_bytes: int
    input_size: tuple[int, int]
    ms: float
    runs_ms: list[float]
    ceiling_ms: float
    ceiling_runs_ms: list[float]
    output_bytes: int
    output_size: tuple[int, int]


def time_server_processing(raw: bytes, runs: int = 7) -> ServerPhoto:
    """Time services.photos.process_photo and the baseline, alternating, on the same bytes."""
    from services.photos import process_photo

    process_photo(raw)
    _baseline(raw)  # warm both paths (imports, codec tables)
    times, ceiling = [], []
    for _ in range(runs):
        start = time.perf_counter()
        processed = process_photo(raw)
        times.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        _baseline(raw)
        ceiling.append((time.perf_counter() - start) * 1000)
    with Image.open(io.BytesIO(raw)) as image:
        size = image.size
    return ServerPhoto(input_bytes=len(raw), input_size=size, ms=statistics.median(times),
                       runs_ms=times, ceiling_ms=statistics.median(ceiling),
                       ceiling_runs_ms=ceiling, output_bytes=len(processed.data),
                       output_size=(processed.width, processed.height))
