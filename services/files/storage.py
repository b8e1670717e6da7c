"""Where stored files live: a local folder (the default) or an S3-compatible bucket.

The module is one thing: the file store's interface and its two backends, kept side by side so
that each operation reads the same in both.

Every stored file (photos, their thumbnails, signature images, photos staged ahead of their
ticket) is named by the SHA-256 of its bytes, `<64 hex>.<jpg|png>`, so the same bytes are kept
once. `STORAGE_URL` picks the backend: unset is the folder `PHOTO_DIR`; `s3://BUCKET/PREFIX` is
a bucket, reached at `S3_ENDPOINT_URL` (any S3-compatible server; unset is AWS) with the
standard AWS credential variables, through boto3.

A file is stored before the transaction that names it commits. Storing one that is already
there refreshes its time, so the sweep (services/files/photo_sweep.py), which only takes files
unchanged for an hour or more, never takes one a request is about to name. `put_all` stores
a request's files all or none: when one fails, those this call created are taken away again.

Pieces of photos still being sent (services/files/photo_uploads.py) are files of the same store,
under `pieces/<owner>/<upload>/<first byte>-<size>-<when>` (a folder's `pieces/` subfolder, or the
bucket's `PREFIX/pieces/`), not rows of the database; the sweep of unreferenced images never
lists them.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import re
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from flask import current_app

from services.platform.errors import ServiceError

EXTENSIONS = {"jpg": "image/jpeg", "png": "image/png"}
KEY_RE = re.compile(r"[0-9a-f]{64}\.(?:jpg|png)")
PIECE_RE = re.compile(r"[0-9a-f]{32}/[0-9a-f]{32}/\d{10}-\d{1,10}-\d{1,12}")
PIECES = "pieces/"
CHUNK = 64 * 1024
_PUT_ID = "put-id"


class StorageUnavailable(ServiceError):
    """The bucket could not be reached or refused the call; nothing was changed."""

    status = 503
    code = "storage_unavailable"


@dataclass(frozen=True)
class Entry:
    """One file of a store as the sweep sees it; `key` is None for a folder's unfinished write."""

    name: str
    key: str | None
    size: int
    modified: float


@dataclass(frozen=True)
class StoreSpec:
    """What a worker process needs to open the same store (picklable)."""

    url: str | None
    folder: str
    endpoint: str | None


@dataclass
class Stream:
    """A stored file opened for reading: its size and its bytes in chunks, read as sent."""

    size: int
    chunks: Iterator[bytes]


def check_key(key: str) -> str:
    """The key itself, or ValueError for anything but '<64 lowercase hex>.<jpg|png>'."""
    if not isinstance(key, str) or not KEY_RE.fullmatch(key):
        raise ValueError("invalid image key")
    return key


def key_for(data: bytes, extension: str) -> str:
    """The key bytes are stored under."""
    if extension not in EXTENSIONS:
        raise ValueError(f"extension must be one of {sorted(EXTENSIONS)}")
    return f"{hashlib.sha256(data).hexdigest()}.{extension}"


def digest_matches(key: str, data: bytes) -> bool:
    """Tell whether bytes are the ones their key names."""
    return hashlib.sha256(data).hexdigest() == key[:64]


class FileStore:
    """What every backend does; `put_all` is the one way requests store files."""

    def put(self, data: bytes, extension: str) -> str:
        """Store bytes (or refresh the time of those already stored) and return their key."""
        return self._put(data, extension)[0]

    def put_all(self, files: list[tuple[bytes, str]]) -> list[str]:
        """Store every file or none: on a failure the files this call created are removed."""
        keys, created = [], []
        try:
            for data, extension in files:
                if key_for(data, extension) in keys:  # a small photo is its own thumbnail
                    keys.append(key_for(data, extension))
                    continue
                key, mark = self._put(data, extension)
                keys.append(key)
                if mark is not None:
                    created.append((key, mark))
        except BaseException:
            for key, mark in created:
                with contextlib.suppress(Exception):
                    self._remove_if_mark(key, mark)
            raise
        return keys

    def open(self, key: str) -> bytes:
        """The whole stored file (small: at most one image); KeyError if absent."""
        stream = self.stream(key)
        return b"".join(stream.chunks)

    def _put(self, data: bytes, extension: str) -> tuple[str, object | None]:
        """Store bytes; their key and, when this call created the file, a mark of that write."""
        raise NotImplementedError

    def _remove_if_mark(self, key: str, mark: object) -> None:
        """Remove a file this store created, unless it was stored again since."""
        raise NotImplementedError

    def stream(self, key: str) -> Stream:
        """Open a stored file for sending in chunks; KeyError if absent."""
        raise NotImplementedError

    def exists(self, key: str) -> bool:
        """Tell whether key is stored; a malformed key is simply not stored."""
        raise NotImplementedError

    def entries(self) -> Iterator[Entry]:
        """Every file of the store."""
        raise NotImplementedError

    def remove_if_unchanged_since(self, name: str, cutoff: float) -> int | None:
        """Remove a file unchanged since `cutoff` (a time.time()); its size if removed."""
        raise NotImplementedError

    def free_bytes(self) -> int | None:
        """Free space where files are stored; None where it is not ours to watch (a bucket)."""
        raise NotImplementedError

    def check(self) -> dict:
        """For /healthz: whether the store answers (a folder's disk is checked on its own)."""
        return {"ok": True, "backend": "folder"}

    def put_piece(self, name: str, data: bytes) -> bool:
        """Store a photo piece under `name` ('<owner>/<upload>/<first>-<size>-<when>'); False if
        one is there."""
        raise NotImplementedError

    def read_piece(self, name: str) -> bytes:
        """A stored piece's bytes; KeyError if absent."""
        raise NotImplementedError

    def list_pieces(self, prefix: str) -> list[Entry]:
        """The pieces whose names start with `prefix` ('' for all), their sizes and times."""
        raise NotImplementedError

    def remove_piece(self, name: str) -> None:
        """Remove a piece (absent is fine)."""
        raise NotImplementedError


def check_piece(name: str) -> str:
    """The piece name itself, or ValueError for anything but '<32 hex>/<32 hex>/<first>-<size>-<when>'."""
    if not isinstance(name, str) or not PIECE_RE.fullmatch(name):
        raise ValueError("invalid piece name")
    return name


class FolderStore(FileStore):
    """Files under root, at root/ab/cd/<sha256>.<ext>, written atomically and durably.

    Storing and removing hold the folder's lock file (shared and exclusive), so no removal
    happens halfway through a store of the same file.
    """

    LOCK_FILE = ".lock"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        """Use root as the store directory (created on first write)."""
        self.root = Path(root)

    def path_for(self, key: str) -> Path:
        """A key's file path; ValueError for a malformed key."""
        check_key(key)
        return self.root / key[:2] / key[2:4] / key

    def _put(self, data: bytes, extension: str) -> tuple[str, object | None]:
        """Create the file with a hard link (no overwrite), or refresh its time if it exists."""
        key = key_for(data, extension)
        path = self.path_for(key)
        with self._locked(fcntl.LOCK_SH):
            if self._refresh(path):
                return key, None
            if not _link_new(path, data):  # the same bytes stored at the same moment
                self._refresh(path)
                return key, None
            mark = path.stat().st_mtime_ns
        return key, mark

    @staticmethod
    def _refresh(path: Path) -> bool:
        """Give an existing file this moment's time (to the nanosecond); False if absent."""
        now = time.time_ns()
        try:
            os.utime(path, ns=(now, now))
            return True
        except FileNotFoundError:
            return False

    def _remove_if_mark(self, key: str, mark: object) -> None:
        """Remove the file if its time is still the one this store's write gave it."""
        path = self.path_for(key)
        with self._locked(fcntl.LOCK_EX), contextlib.suppress(FileNotFoundError):
            if path.stat().st_mtime_ns == mark:
                path.unlink()

    def stream(self, key: str) -> Stream:
        """The file opened now, read in chunks as it is sent."""
        try:
            handle = self.path_for(key).open("rb")
        except FileNotFoundError:
            raise KeyError(key) from None

        def chunks() -> Iterator[bytes]:
            with handle:
                yield from iter(lambda: handle.read(CHUNK), b"")

        return Stream(size=os.fstat(handle.fileno()).st_size, chunks=chunks())

    def exists(self, key: str) -> bool:
        """Tell whether key is stored; a malformed key is simply not stored."""
        try:
            return self.path_for(key).is_file()
        except ValueError:
            return False

    def entries(self) -> Iterator[Entry]:
        """Every stored file and every temp file a write left behind (path relative to root)."""
        if not self.root.is_dir():
            return
        for folder, _, names in os.walk(self.root):
            for name in names:
                key = name if KEY_RE.fullmatch(name) else None
                if key is None and not (name.startswith(".tmp-") and name.endswith(".part")):
                    continue
                path = Path(folder, name)
                try:
                    status = path.stat()
                except FileNotFoundError:
                    continue
                yield Entry(name=str(path.relative_to(self.root)), key=key,
                            size=status.st_size, modified=status.st_mtime)

    def remove_if_unchanged_since(self, name: str, cutoff: float) -> int | None:
        """Remove a file under the exclusive lock, so no store of it is halfway through."""
        path = self.root / name
        with self._locked(fcntl.LOCK_EX):
            try:
                status = path.stat()
                if status.st_mtime >= cutoff:
                    return None
                path.unlink()
            except FileNotFoundError:
                return None
        return status.st_size

    def free_bytes(self) -> int | None:
        """Free disk under the folder (or the nearest folder above it that exists)."""
        folder = self.root
        while not folder.is_dir() and folder != folder.parent:
            folder = folder.parent
        status = os.statvfs(folder)
        return status.f_bavail * status.f_frsize

    def put_piece(self, name: str, data: bytes) -> bool:
        """Write the piece to a temp file, then link it in place (no overwrite), durably."""
        return _link_new(self.root / PIECES / check_piece(name), data)

    def read_piece(self, name: str) -> bytes:
        """The piece's bytes; KeyError if absent."""
        try:
            return (self.root / PIECES / check_piece(name)).read_bytes()
        except FileNotFoundError:
            raise KeyError(name) from None

    def list_pieces(self, prefix: str) -> list[Entry]:
        """The pieces under `prefix` (whole path segments), from the folder."""
        base = self.root / PIECES
        start = base / prefix if prefix else base
        found = []
        if not start.is_dir():
            return found
        for folder, _, names in os.walk(start):
            for file in names:
                path = Path(folder, file)
                name = str(path.relative_to(base))
                if not PIECE_RE.fullmatch(name):
                    continue
                try:
                    status = path.stat()
                except FileNotFoundError:
                    continue
                found.append(Entry(name=name, key=None, size=status.st_size, modified=status.st_mtime))
        return found

    def remove_piece(self, name: str) -> None:
        """Unlink the piece, and its upload's folder and owner's folder once empty."""
        path = self.root / PIECES / check_piece(name)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        for folder in (path.parent, path.parent.parent):
            with contextlib.suppress(OSError):  # not empty, or gone: both fine
                folder.rmdir()

    @contextlib.contextmanager
    def _locked(self, operation: int) -> Iterator[None]:
        """Hold the store's lock file, shared (storing) or exclusive (removing)."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / self.LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, operation)
            yield
        finally:
            os.close(fd)  # closing the descriptor lets go of the lock


def _link_new(path: Path, data: bytes) -> bool:
    """Write `data` to a temp file beside `path`, then link it there durably; False if `path`
    exists (nothing is overwritten)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # The temp name cannot match a stored name's pattern, so readers never see it.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _fsync_dir(path.parent)
    return True


def _fsync_dir(directory: Path) -> None:
    """Flush a directory entry to disk so a completed link survives a crash."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def parse_bucket_url(url: str) -> tuple[str, str]:
    """Bucket and key prefix ('' or ending in '/') of 's3://BUCKET/PREFIX'; ValueError otherwise."""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"not an s3://BUCKET/PREFIX address: {url!r}")
    prefix = parts.path.strip("/")
    return parts.netloc, f"{prefix}/" if prefix else ""


@functools.lru_cache(maxsize=8)
def s3_client(endpoint: str | None):
    """A boto3 S3 client (thread-safe, one per endpoint and process); credentials as AWS reads them."""
    import boto3  # only installs on a bucket load it
    from botocore.config import Config

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint or None, region_name=region,
        config=Config(connect_timeout=3, read_timeout=30, max_pool_connections=32,
                      retries={"mode": "standard", "max_attempts": 3},
                      s3={"addressing_style": "path"} if endpoint else None))


@contextlib.contextmanager
def bucket_errors() -> Iterator[None]:
    """A bucket that cannot be reached or refuses is StorageUnavailable (503), never a 500."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as error:
        raise StorageUnavailable(
            f"the file store refused the call ({error.response['Error'].get('Code', '?')})",
            headers={"Retry-After": "5"}) from None
    except BotoCoreError:
        raise StorageUnavailable("the file store cannot be reached right now",
                                 headers={"Retry-After": "5"}) from None


def is_missing(error) -> bool:
    """Tell whether a boto3 ClientError says the object is not there."""
    return error.response["Error"].get("Code") in ("NoSuchKey", "404", "NotFound")


class BucketStore(FileStore):
    """Files as objects `<PREFIX><sha256>.<ext>` in an S3-compatible bucket.

    An object is created only if absent (If-None-Match: *); one already there is copied onto
    itself, which gives it a new time, as the sweep needs. Removals check the object's time or
    write mark just before they delete.
    """

    def __init__(self, url: str, endpoint: str | None = None) -> None:
        """Use the bucket and prefix of `url`, at `endpoint` (None: AWS)."""
        self.url = url
        self.bucket, self.prefix = parse_bucket_url(url)
        self.client = s3_client(endpoint)

    def object_name(self, key: str) -> str:
        """The object name of a key."""
        return self.prefix + check_key(key)

    def _put(self, data: bytes, extension: str) -> tuple[str, object | None]:
        """Create the object if absent, else refresh it."""
        from botocore.exceptions import ClientError

        key = key_for(data, extension)
        name, mark = self.object_name(key), uuid.uuid4().hex
        with bucket_errors():
            try:
                self.client.put_object(Bucket=self.bucket, Key=name, Body=data, IfNoneMatch="*",
                                       ContentType=EXTENSIONS[extension], Metadata={_PUT_ID: mark})
                return key, mark
            except ClientError as error:
                if error.response["Error"].get("Code") not in ("PreconditionFailed", "412"):
                    raise
            self.client.copy_object(Bucket=self.bucket, Key=name, MetadataDirective="REPLACE",
                                    CopySource={"Bucket": self.bucket, "Key": name},
                                    ContentType=EXTENSIONS[extension], Metadata={_PUT_ID: mark})
        return key, None

    def _remove_if_mark(self, key: str, mark: object) -> None:
        """Delete the object if it still carries this store's write mark."""
        from botocore.exceptions import ClientError

        name = self.object_name(key)
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=name)
        except ClientError:
            return
        if head.get("Metadata", {}).get(_PUT_ID) == mark:
            self.client.delete_object(Bucket=self.bucket, Key=name)

    def stream(self, key: str) -> Stream:
        """The object opened now (a missing one is KeyError), read in chunks as it is sent."""
        from botocore.exceptions import ClientError

        with bucket_errors():
            try:
                answer = self.client.get_object(Bucket=self.bucket, Key=self.object_name(key))
            except ClientError as error:
                if is_missing(error):
                    raise KeyError(key) from None
                raise
        body = answer["Body"]

        def chunks() -> Iterator[bytes]:
            with contextlib.closing(body):
                yield from body.iter_chunks(CHUNK)

        return Stream(size=int(answer["ContentLength"]), chunks=chunks())

    def exists(self, key: str) -> bool:
        """Tell whether key is stored; a malformed key is simply not stored."""
        from botocore.exceptions import ClientError

        try:
            name = self.object_name(key)
        except ValueError:
            return False
        with bucket_errors():
            try:
                self.client.head_object(Bucket=self.bucket, Key=name)
                return True
            except ClientError as error:
                if is_missing(error):
                    return False
                raise

    def entries(self) -> Iterator[Entry]:
        """Every object under the prefix whose name is a key."""
        with bucket_errors():
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix)
            for page in pages:
                for item in page.get("Contents", []):
                    key = item["Key"][len(self.prefix):]
                    if KEY_RE.fullmatch(key):
                        yield Entry(name=key, key=key, size=int(item["Size"]),
                                    modified=item["LastModified"].timestamp())

    def remove_if_unchanged_since(self, name: str, cutoff: float) -> int | None:
        """Delete the object if its time, read just before, is before the cutoff."""
        from botocore.exceptions import ClientError

        with bucket_errors():
            try:
                head = self.client.head_object(Bucket=self.bucket, Key=self.object_name(name))
            except ClientError as error:
                if is_missing(error):
                    return None
                raise
            if head["LastModified"].timestamp() >= cutoff:
                return None
            self.client.delete_object(Bucket=self.bucket, Key=self.object_name(name))
        return int(head["ContentLength"])

    def free_bytes(self) -> int | None:
        """A bucket has no disk of ours to keep free."""
        return None

    def put_piece(self, name: str, data: bytes) -> bool:
        """Create the piece's object if absent (If-None-Match: *)."""
        from botocore.exceptions import ClientError

        with bucket_errors():
            try:
                self.client.put_object(Bucket=self.bucket, Key=self.prefix + PIECES + check_piece(name),
                                       Body=data, IfNoneMatch="*")
            except ClientError as error:
                if error.response["Error"].get("Code") not in ("PreconditionFailed", "412"):
                    raise
                return False
        return True

    def read_piece(self, name: str) -> bytes:
        """The piece's bytes; KeyError if absent."""
        from botocore.exceptions import ClientError

        with bucket_errors():
            try:
                answer = self.client.get_object(Bucket=self.bucket,
                                                Key=self.prefix + PIECES + check_piece(name))
            except ClientError as error:
                if is_missing(error):
                    raise KeyError(name) from None
                raise
            return answer["Body"].read()

    def list_pieces(self, prefix: str) -> list[Entry]:
        """The piece objects under `prefix`."""
        base = self.prefix + PIECES
        found = []
        with bucket_errors():
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=base + prefix)
            for page in pages:
                for item in page.get("Contents", []):
                    name = item["Key"][len(base):]
                    if PIECE_RE.fullmatch(name):
                        found.append(Entry(name=name, key=None, size=int(item["Size"]),
                                           modified=item["LastModified"].timestamp()))
        return found

    def remove_piece(self, name: str) -> None:
        """Delete the piece's object."""
        with bucket_errors():
            self.client.delete_object(Bucket=self.bucket, Key=self.prefix + PIECES + check_piece(name))

    def check(self) -> dict:
        """Whether the bucket answers a HEAD; the error's kind (never its text) if not."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.head_bucket(Bucket=self.bucket)
            return {"ok": True, "backend": "bucket"}
        except (BotoCoreError, ClientError) as error:
            return {"ok": False, "backend": "bucket", "error": type(error).__name__}


def store_spec() -> StoreSpec:
    """This app's store as a worker process opens it."""
    config = current_app.config
    return StoreSpec(url=config.get("STORAGE_URL") or None, folder=config["PHOTO_DIR"],
                     endpoint=config.get("S3_ENDPOINT_URL") or None)


def open_store(spec: StoreSpec) -> FileStore:
    """The store a spec describes: a bucket when it has a URL, else the folder."""
    if spec.url:
        return BucketStore(spec.url, spec.endpoint)
    return FolderStore(spec.folder)


def file_store() -> FileStore:
    """This app's store, made once per app."""
    spec = store_spec()
    cached = current_app.extensions.get("file_store")
    if cached is None or cached[0] != spec:
        cached = (spec, open_store(spec))
        current_app.extensions["file_store"] = cached
    return cached[1]
