"""Decode, validate, normalise and store ticket photos and signatures.

Everything that reaches Pillow here is untrusted. The pipeline is: decode the
transport encoding (data URL or base64), identify the format from the bytes
themselves, refuse oversized images from their header before any pixel is
decoded, fully decode, then re-encode into a fresh file that carries no
metadata. The re-encoded bytes are stored by services/files/storage.py under their SHA-256.
"""

import base64
import binascii
import hashlib
import io
import struct
import zlib
from dataclasses import dataclass

from PIL import Image, ImageFile, ImageOps, UnidentifiedImageError

__all__ = [
    "PIXEL_CEILING",
    "ImageRejected",
    "ProcessedImage",
    "decode_image_input",
    "process_photo",
    "process_signature",
]

# The largest max_pixels any caller may ask for: phones shrink photos to 2048 px before
# sending, so 16 megapixels leaves room for a camera original. Pillow's own bomb check
# uses the same number: it warns above it and raises above twice it, so nothing this
# module is willing to accept ever trips Pillow's check, and anything that does is
# refused by us anyway.
PIXEL_CEILING = 16_000_000
Image.MAX_IMAGE_PIXELS = PIXEL_CEILING
# No side may be longer than this, whatever the pixel count (a 16000 x 1000 strip).
MAX_EDGE = 4096
# A progressive JPEG is decoded once per scan over the whole image; cameras and browsers
# write 1 (baseline) to about 10. Thousands of empty scans make a small file cost minutes.
MAX_JPEG_SCANS = 24
# A truncated upload must be refused, not padded with grey.
ImageFile.LOAD_TRUNCATED_IMAGES = False

# Pillow identifiers tried by Image.open; nothing else is even parsed.
_OPEN_FORMATS = ("JPEG", "PNG", "WEBP")
# Phones write multi-picture JPEGs; Pillow's JPEG reader reports those as MPO.
_ACCEPTED_FORMATS = frozenset({"JPEG", "MPO", "PNG", "WEBP"})
_DATA_URL_TYPES = frozenset({"image/jpeg", "image/jpg", "image/png", "image/webp"})
_NOT_SUPPORTED = "not a JPEG, PNG or WebP image"

# Exceptions Pillow raises on malformed input (zlib.error from PNG streams).
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error, zlib.error)



class ImageRejected(ValueError):
    """An uploaded image was refused; .message says why, in words a user can act on."""

    def __init__(self, message: str) -> None:
        """Keep the human-readable reason on .message."""
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class ProcessedImage:
    """A re-encoded image, its thumbnail, and what a caller needs to store or serve it."""

    data: bytes
    thumb: bytes
    width: int
    height: int
    content_type: str

    @property
    def sha256(self) -> str:
        """Hex SHA-256 of the re-encoded image."""
        return hashlib.sha256(self.data).hexdigest()

    @property
    def extension(self) -> str:
        """The store's extension for this content type ("jpg" or "png")."""
        return "jpg" if self.content_type == "image/jpeg" else "png"


def _human_size(n: int) -> str:
    """Format a byte count as '2 MiB', '512 KiB' or '1000 bytes'."""
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} bytes"


def decode_image_input(value: str, *, max_bytes: int) -> bytes:
    """Decode a data URL or bare base64 to bytes: strict, padded, standard or URL-safe alphabet
    (not mixed)."""
    # Rules, for the API documentation:
    # - "data:<type>[;param...];base64,<data>" where <type> is image/jpeg,
    #   image/jpg, image/png or image/webp (case-insensitive); anything else is
    #   refused. The type is only a label: the decoded bytes are identified later.
    # - Otherwise the whole value is taken as base64.
    # - Whitespace anywhere (e.g. MIME line wrapping) is ignored.
    # - Standard alphabet (+/) or URL-safe (-_), never a mix of the two.
    #   Padding is required; any other character is an error.
    if max_bytes <= 0:
        raise ValueError("max_bytes must be positive")
    encoded_max = 4 * ((max_bytes + 2) // 3)
    # Refuse absurd strings before even scanning them; the slack covers line
    # wrapping and a data URL header.
    if len(value) > encoded_max + encoded_max // 16 + 1024:
        raise ImageRejected(f"decoded image is larger than {_human_size(max_bytes)}")

    text = value.strip()
    if text[:5].lower() == "data:":
        text = _data_url_payload(text)
    return _decode_base64("".join(text.split()), max_bytes)


def _data_url_payload(text: str) -> str:
    """The data of a data URL, refused unless it is a base64-encoded image of an accepted type."""
    header, comma, text = text.partition(",")
    if not comma:
        raise ImageRejected("malformed data URL: no comma before the data")
    params = [p.strip().lower() for p in header[5:].split(";")]
    media_type = params[0]
    if media_type not in _DATA_URL_TYPES:
        shown = media_type[:40] or "(none)"
        raise ImageRejected(
            f"data URL media type {shown!r} is not accepted; use image/jpeg, image/png or image/webp"
        )
    if len(params) < 2 or params[-1] != "base64":
        raise ImageRejected("data URL is not base64-encoded")
    return text


def _decode_base64(compact: str, max_bytes: int) -> bytes:
    """Decode base64 without whitespace, padded, in one alphabet (standard or URL-safe), to at
    most `max_bytes` bytes."""
    if not compact:
        raise ImageRejected("image data is empty")
    if not compact.isascii():
        raise ImageRejected("invalid base64")
    padding = min(len(compact) - len(compact.rstrip("=")), 2)
    if len(compact) * 3 // 4 - padding > max_bytes:
        raise ImageRejected(f"decoded image is larger than {_human_size(max_bytes)}")

    altchars = None
    if "-" in compact or "_" in compact:
        if "+" in compact or "/" in compact:
            raise ImageRejected("invalid base64")
        altchars = b"-_"
    try:
        raw = base64.b64decode(compact, altchars=altchars, validate=True)
    except (binascii.Error, ValueError):
        raise ImageRejected("invalid base64") from None
    if not raw:
        raise ImageRejected("image data is empty")
    if len(raw) > max_bytes:
        raise ImageRejected(f"decoded image is larger than {_human_size(max_bytes)}")
    return raw


def _has_known_signature(raw: bytes) -> bool:
    """Tell whether the bytes start like a JPEG, PNG or WebP file."""
    return (
        raw.startswith(b"\xff\xd8\xff")
        or raw.startswith(b"\x89PNG\r\n\x1a\n")
        or (raw[:4] == b"RIFF" and raw[8:12] == b"WEBP")
    )


def count_jpeg_scans(raw: bytes, limit: int = MAX_JPEG_SCANS) -> int:
    """Count the scans (SOS markers) of a JPEG's first image, refusing more than `limit`.

    Walks the marker segments without decoding anything: each segment's length is skipped,
    and after a scan header its entropy-coded data is skipped up to the next marker.
    """
    size = len(raw)
    at, scans = 2, 0
    while at < size:
        if raw[at] != 0xFF:
            return scans  # not a marker where one should be: Pillow will call it corrupt
        while at < size and raw[at] == 0xFF:
            at += 1  # fill bytes
        if at >= size:
            break
        marker = raw[at]
        at += 1
        if marker == 0xD9:  # end of image
            break
        if 0xD0 <= marker <= 0xD7 or marker in (0x01, 0xD8):
            continue  # markers without a length
        if at + 2 > size:
            break
        at += (raw[at] << 8) | raw[at + 1]
        if marker != 0xDA:
            continue
        scans += 1
        if scans > limit:
            raise ImageRejected(f"the JPEG has more than {limit} scans; save it again as a normal JPEG")
        at = _after_entropy_coded_data(raw, at)
        if at < 0:
            return scans
    return scans


def _after_entropy_coded_data(raw: bytes, at: int) -> int:
    """Where the marker after a scan's entropy-coded data starts (FF 00 and restart markers
    belong to the data), or -1 when the data runs to the end."""
    size = len(raw)
    while True:
        at = raw.find(b"\xff", at)
        if at < 0 or at + 1 >= size:
            return -1
        following = raw[at + 1]
        if following == 0x00 or 0xD0 <= following <= 0xD7:
            at += 2
        elif following == 0xFF:
            at += 1
        else:
            return at


def _check_max_pixels(max_pixels: int) -> None:
    """Refuse a pixel limit outside (0, PIXEL_CEILING]; that is a programming error."""
    if not 0 < max_pixels <= PIXEL_CEILING:
        raise ValueError(f"max_pixels must be between 1 and {PIXEL_CEILING}")


def _open_checked(raw: bytes, max_pixels: int) -> ImageFile.ImageFile:
    """Identify an image from its header, refusing unsupported formats and oversized dimensions."""
    if not raw:
        raise ImageRejected("image data is empty")
    if raw.startswith(b"\xff\xd8"):
        count_jpeg_scans(raw)
    pillow_limit = Image.MAX_IMAGE_PIXELS or PIXEL_CEILING
    try:
        im = Image.open(io.BytesIO(raw), formats=_OPEN_FORMATS)
    except Image.DecompressionBombError:
        raise ImageRejected(
            f"image is too large: more than {2 * pillow_limit} pixels, the limit is {max_pixels}"
        ) from None
    except Image.DecompressionBombWarning:
        # Only raised when warnings are configured as errors (as in the tests);
        # otherwise Pillow just warns and the size check below refuses it.
        raise ImageRejected(
            f"image is too large: more than {pillow_limit} pixels, the limit is {max_pixels}"
        ) from None
    except UnidentifiedImageError:
        if _has_known_signature(raw):
            raise ImageRejected("the image data is truncated or corrupt") from None
        raise ImageRejected(_NOT_SUPPORTED) from None
    except (*_DECODE_ERRORS, Warning):
        raise ImageRejected("the image data is truncated or corrupt") from None

    if im.format not in _ACCEPTED_FORMATS:
        im.close()
        raise ImageRejected(_NOT_SUPPORTED)
    width, height = im.size
    if width * height > max_pixels:
        im.close()
        raise ImageRejected(f"image is too large: {width * height} pixels, the limit is {max_pixels}")
    if max(width, height) > MAX_EDGE:
        im.close()
        raise ImageRejected(f"image is too large: {width} x {height} pixels, the longest side may "
                            f"be {MAX_EDGE}")
    return im


def _load_upright(im: ImageFile.ImageFile, long_edge: int) -> Image.Image:
    """Decode all pixels (at reduced JPEG scale when possible) and apply the EXIF orientation."""
    width, height = im.size
    if im.format in ("JPEG", "MPO") and max(width, height) > long_edge:
        # libjpeg can decode at 1/2, 1/4 or 1/8 scale for free; draft() picks
        # the smallest scale that is still at least the requested size.
        scale = long_edge / max(width, height)
        im.draft(None, (max(1, round(width * scale)), max(1, round(height * scale))))
    try:
        im.load()
    except (*_DECODE_ERRORS, Warning) as exc:
        if "truncated" in str(exc):
            raise ImageRejected("the image data is truncated") from None
        raise ImageRejected("the image data is corrupt") from None
    try:
        ImageOps.exif_transpose(im, in_place=True)
    except (*_DECODE_ERRORS, KeyError, TypeError):
        # Unreadable EXIF only costs us the rotation; the pixels are fine.
        pass
    return im


def _encode(im: Image.Image, fmt: str, **options: object) -> bytes:
    """Encode an image with no metadata at all (EXIF, XMP, ICC, comments, text chunks)."""
    # Pillow carries source metadata in .info and some writers reuse it.
    im.info = {}
    out = io.BytesIO()
    im.save(out, format=fmt, **options)
    return out.getvalue()


def _fit(im: Image.Image, edge: int) -> Image.Image:
    """Scale an image down so its long edge is at most edge; never scales up, returns im if it fits."""
    width, height = im.size
    scale = edge / max(width, height)
    if scale >= 1:
        return im
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return im.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)


def process_photo(
    raw: bytes,
    *,
    max_pixels: int = PIXEL_CEILING,
    long_edge: int = 2048,
    thumb_edge: int = 320,
    quality: int = 82,
) -> ProcessedImage:
    """Validate a JPEG/PNG/WebP photo and re-encode it as a metadata-free RGB JPEG plus thumbnail."""
    _check_max_pixels(max_pixels)
    options = {"quality": quality, "optimize": True, "progressive": True}
    # Everything happens inside the block: a closed Pillow image has no pixels.
    with _open_checked(raw, max_pixels) as source:
        im = _load_upright(source, long_edge)
        if im.has_transparency_data:
            rgba = im.convert("RGBA")
            flat = Image.new("RGB", rgba.size, (255, 255, 255))
            flat.paste(rgba, mask=rgba.getchannel("A"))
        elif im.mode != "RGB":
            flat = im.convert("RGB")
        else:
            flat = im
        main = _fit(flat, long_edge)
        data = _encode(main, "JPEG", **options)
        thumb = _encode(_fit(main, thumb_edge), "JPEG", **options)
        width, height = main.size
    return ProcessedImage(data=data, thumb=thumb, width=width, height=height,
                          content_type="image/jpeg")


def process_signature(
    raw: bytes,
    *,
    max_pixels: int = 4_000_000,
    long_edge: int = 1200,
    thumb_edge: int = 320,
) -> ProcessedImage:
    """Validate a drawn signature and re-encode it as a metadata-free PNG (transparency kept) plus
    thumbnail."""
    _check_max_pixels(max_pixels)
    with _open_checked(raw, max_pixels) as source:
        im = _load_upright(source, long_edge)
        mode = "RGBA" if im.has_transparency_data else "RGB"
        main = _fit(im if im.mode == mode else im.convert(mode), long_edge)
        data = _encode(main, "PNG", optimize=True)
        thumb = _encode(_fit(main, thumb_edge), "PNG", optimize=True)
        width, height = main.size
    return ProcessedImage(data=data, thumb=thumb, width=width, height=height,
                          content_type="image/png")
