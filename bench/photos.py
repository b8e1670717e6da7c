"""The server's processing of one photo, timed against a Pillow baseline."""
from __future__ import annotations

import io
import statistics
import time
from dataclasses import dataclass

from PIL import Image


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
    """Time services.files.photos.process_photo and the baseline, alternating, on the same bytes."""
    from services.files.photos import process_photo

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
