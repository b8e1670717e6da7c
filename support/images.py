"""Images made on the spot with Pillow, for tests and the bench."""
from __future__ import annotations

import base64
import functools
import io

from PIL import Image, ImageDraw, ImageFilter


def jpeg_bytes(width: int = 64, height: int = 48, color=(200, 120, 40)) -> bytes:
    """A small JPEG."""
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, "JPEG", quality=80)
    return buffer.getvalue()


def png_bytes(width: int = 120, height: int = 40, mode: str = "RGBA") -> bytes:
    """A small PNG, transparent by default, like a drawn signature."""
    buffer = io.BytesIO()
    Image.new(mode, (width, height), (0, 0, 0, 0) if mode == "RGBA" else 0).save(buffer, "PNG")
    return buffer.getvalue()


def signature_png() -> bytes:
    """A transparent PNG with a drawn stroke, as a signature pad exports it."""
    image = Image.new("RGBA", (600, 200), (0, 0, 0, 0))
    ImageDraw.Draw(image).line([(20, 150), (120, 40), (220, 160), (320, 50), (560, 120)],
                               fill=(20, 20, 20, 255), width=6)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def data_url(raw: bytes, media_type: str = "image/jpeg") -> str:
    """Wrap bytes in a base64 data URL."""
    return f"data:{media_type};base64,{base64.b64encode(raw).decode()}"


@functools.lru_cache(maxsize=2)
def camera_jpeg(width: int = 4000, height: int = 3000) -> bytes:
    """A photo-like 12-megapixel JPEG: gradients, shapes and a little grain (browser tests, bench).
    Made once per size and run (about a second of CPU each time); the bytes are never changed."""
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


def _jpeg_segments(raw: bytes) -> list[tuple[int, bytes]]:
    """The marker segments of a JPEG up to its first scan header."""
    at, out = 2, []
    while at < len(raw):
        marker = raw[at + 1]
        length = int.from_bytes(raw[at + 2:at + 4], "big")
        out.append((marker, raw[at:at + 2 + length]))
        if marker == 0xDA:
            break
        at += 2 + length
    return out


def jpeg_scan_bomb(width: int = 7000, height: int = 7000, scans: int = 1000) -> bytes:
    """A progressive JPEG of thousands of empty scans: a few KB that libjpeg decodes once per scan."""
    small = io.BytesIO()
    Image.new("L", (8, 8), 128).save(small, "JPEG", progressive=True)
    head, component = bytearray(b"\xff\xd8"), 1
    for marker, segment in _jpeg_segments(small.getvalue()):
        if marker == 0xC2:  # the frame header: claim the large size
            segment = bytearray(segment)
            segment[5:9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
            component = segment[10]
        if marker != 0xDA:
            head += segment
    empty_scan = b"\xff\xda\x00\x08\x01" + bytes([component]) + b"\x00\x00\x00\x00"
    return bytes(head) + empty_scan * scans + b"\xff\xd9"


def flat_png(width: int = 7071, height: int = 7071) -> bytes:
    """A real, fully decodable grey PNG of one colour: a few hundred KB for 50 megapixels."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    packer = zlib.compressobj(9)
    row = b"\x00" + b"\x80" * width
    rows = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


def noise_jpeg(width: int = 320, height: int = 240, seed: int = 0) -> bytes:
    """A JPEG of grain that does not compress away: some kilobytes, different for each seed."""
    import random

    pixels = random.Random(seed).randbytes(width * height * 3)
    buffer = io.BytesIO()
    Image.frombytes("RGB", (width, height), pixels).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()
