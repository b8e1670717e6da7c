"""Test images made on the spot with Pillow."""
from __future__ import annotations

import base64
import io

from PIL import Image


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


def data_url(raw: bytes, media_type: str = "image/jpeg") -> str:
    """Wrap bytes in a base64 data URL."""
    return f"data:{media_type};base64,{base64.b64encode(raw).decode()}"
