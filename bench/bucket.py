"""Stored files in a bucket on loopback (moto's S3 server, a real process): what storing a
photo adds to a create, and the memory a photo sent from the bucket takes."""
from __future__ import annotations

import os
import statistics
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

from services.files.photos import process_photo
from services.files.storage import BucketStore, FolderStore, s3_client
from support.servers import new_bucket, s3_test_credentials, start_s3_server


@dataclass(frozen=True)
class BucketPhoto:
    """Median times of storing one photo and its thumbnail, and the peak memory of sending one."""

    photo_bytes: int
    bucket_ms: float
    bucket_runs_ms: list[float]
    folder_ms: float
    folder_runs_ms: list[float]
    ceiling_ms: float
    ceiling_runs_ms: list[float]
    stream_bytes: int
    stream_peak_kb: float


def measure(raw: bytes, runs: int = 15) -> BucketPhoto:
    """Time put_all of a new photo and thumbnail into a bucket and into a folder (what a create
    stores), beside one bare boto3 put_object of the same bytes (the least a bucket costs);
    then the peak Python memory while a 2 MiB object is read out as it is sent."""
    s3_test_credentials()
    processed = process_photo(raw)
    with tempfile.TemporaryDirectory(prefix="ewt-bucket-") as workdir:
        server, endpoint = start_s3_server(Path(workdir) / "moto.log")
        try:
            bucket = BucketStore(f"s3://{new_bucket(endpoint)}/files", endpoint)
            folder = FolderStore(Path(workdir) / "photos")
            client = s3_client(endpoint)
            bucket.put(b"warm", "jpg")  # connection and first-call costs are not a create's
            bucket_ms, folder_ms, ceiling_ms = [], [], []
            for run in range(runs):
                # Fresh bytes each run: a create stores a photo the store has not seen.
                data = processed.data + run.to_bytes(4, "big")
                thumb = processed.thumb + run.to_bytes(4, "big")
                start = time.perf_counter()
                bucket.put_all([(data, "jpg"), (thumb, "jpg")])
                bucket_ms.append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                folder.put_all([(data, "jpg"), (thumb, "jpg")])
                folder_ms.append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                client.put_object(Bucket=bucket.bucket, Key=f"ceiling/{run}", Body=data)
                ceiling_ms.append((time.perf_counter() - start) * 1000)
            big = os.urandom(2 << 20)
            key = bucket.put(big, "jpg")
            tracemalloc.start()
            stream = bucket.stream(key)
            sent = sum(len(chunk) for chunk in stream.chunks)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        finally:
            server.terminate()
            server.wait(timeout=30)
    return BucketPhoto(photo_bytes=len(processed.data), bucket_ms=statistics.median(bucket_ms),
                       bucket_runs_ms=bucket_ms, folder_ms=statistics.median(folder_ms),
                       folder_runs_ms=folder_ms, ceiling_ms=statistics.median(ceiling_ms),
                       ceiling_runs_ms=ceiling_ms, stream_bytes=sent, stream_peak_kb=peak / 1024)
