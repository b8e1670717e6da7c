"""Test images made on the spot with Pillow."""
from __future__ import annotations

import base64
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


def data_url(raw: bytes, media_type: str = "image/jpeg") -> str:
    """Wrap bytes in a base64 data URL."""
    return f"data:{media_type};base64,{base64.b64encode(raw).decode()}"


def camera_jpeg(width: int = 4000, height: int = 3000) -> bytes:
    """A photo-like 12-megapixel JPEG: gradients, shapes and a little grain (browser tests, bench)."""
    image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    draw = ImageDraw.Draw(image)
    for i in range(12):
        x, y = (i * 331) % width, (i * 197) % height
        draw.ellipse([x, y, x + 600, y + 400], fill=(40 + i * 15, 90, 160 - i * 8))
        draw.rectangle([y % width, x % height, y % width + 300, x % height + 900], fill=(150, 120 + i * 5, 60))
    noise = Image.effect_noise((width, height), 18).convert("RGB")
    image = Image.blend(image, noise, 0.12).filter(ImageFilter.SMOOTH)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=92)
    return buffer.getvalue()
