"""Tests for services.files.photos: input decoding, image validation and normalisation (the store:
test_storage.py)."""

import base64
import hashlib
import io
import re
import struct
import warnings
import zlib

import pytest
from PIL import ExifTags, Image, ImageDraw, ImageFile, JpegImagePlugin, PngImagePlugin

from services.files import photos
from services.files.photos import (
    ImageRejected,
    decode_image_input,
    process_photo,
    process_signature,
)

MiB = 1 << 20


# --- helpers: every image is generated here ---------------------------------


def encode(im: Image.Image, fmt: str, **options) -> bytes:
    """Save an image to bytes in the given format."""
    out = io.BytesIO()
    im.save(out, format=fmt, **options)
    return out.getvalue()


def noise(size: tuple[int, int]) -> Image.Image:
    """An RGB image that does not compress well, so files have real data to truncate."""
    return Image.merge("RGB", [Image.effect_noise(size, 80) for _ in range(3)])


def halves(size: tuple[int, int], left: str, right: str) -> Image.Image:
    """An RGB image whose left half is one colour and right half another."""
    im = Image.new("RGB", size, left)
    im.paste(right, (size[0] // 2, 0, size[0], size[1]))
    return im


def png_claiming(width: int, height: int) -> bytes:
    """A tiny PNG whose IHDR claims width x height (CRC fixed so it parses)."""
    data = bytearray(encode(Image.new("1", (1, 1)), "PNG"))
    assert data[12:16] == b"IHDR"
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


def jpeg_claiming(width: int, height: int) -> bytes:
    """A tiny baseline JPEG whose SOF0 header claims width x height."""
    data = bytearray(encode(Image.new("RGB", (8, 8)), "JPEG"))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def webp_claiming(width: int, height: int) -> bytes:
    """A tiny lossless WebP whose VP8L header claims width x height (at most 16384 each)."""
    data = bytearray(encode(Image.new("RGB", (1, 1)), "WEBP", lossless=True))
    assert data[12:16] == b"VP8L" and data[20] == 0x2F
    bits = struct.unpack("<I", data[21:25])[0]
    bits = (bits & ~0xFFFFFFF) | (width - 1) | ((height - 1) << 14)
    data[21:25] = struct.pack("<I", bits)
    return bytes(data)


def data_url(raw: bytes, media_type: str = "image/png") -> str:
    """Wrap bytes in a base64 data URL."""
    return f"data:{media_type};base64," + base64.b64encode(raw).decode()


def png_chunk_types(data: bytes) -> list[bytes]:
    """List the chunk types of a PNG file in order."""
    types, pos = [], 8
    while pos < len(data):
        length = struct.unpack(">I", data[pos : pos + 4])[0]
        types.append(data[pos + 4 : pos + 8])
        pos += 12 + length
    return types


@pytest.fixture(scope="module")
def small_png() -> bytes:
    """A small valid PNG."""
    return encode(halves((40, 20), "red", "blue"), "PNG")


# --- decode_image_input -----------------------------------------------------


def test_data_url_and_bare_base64_give_the_same_bytes(small_png: bytes) -> None:
    b64 = base64.b64encode(small_png).decode()
    assert decode_image_input(data_url(small_png), max_bytes=MiB) == small_png
    assert decode_image_input(b64, max_bytes=MiB) == small_png
    # Case-insensitive scheme/type, the common image/jpg alias, extra params.
    assert decode_image_input("DATA:Image/PNG;base64," + b64, max_bytes=MiB) == small_png
    assert decode_image_input("data:image/jpg;base64," + b64, max_bytes=MiB) == small_png
    assert decode_image_input("data:image/png;name=s.png;base64," + b64, max_bytes=MiB) == small_png


def test_whitespace_and_mime_line_breaks_are_ignored(small_png: bytes) -> None:
    wrapped = base64.encodebytes(small_png).decode().replace("\n", "\r\n")
    assert "\r\n" in wrapped.strip()
    assert decode_image_input(f"  \n{wrapped}\t ", max_bytes=MiB) == small_png
    assert decode_image_input(f" data:image/png;base64,\n{wrapped}", max_bytes=MiB) == small_png


def test_url_safe_alphabet_is_accepted_when_unambiguous() -> None:
    raw = bytes(range(256)) * 3
    urlsafe = base64.urlsafe_b64encode(raw).decode()
    assert "-" in urlsafe and "_" in urlsafe
    assert decode_image_input(urlsafe, max_bytes=MiB) == raw
    mixed = base64.b64encode(raw).decode().replace("/", "_", 1)
    with pytest.raises(ImageRejected, match="invalid base64"):
        decode_image_input(mixed, max_bytes=MiB)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("data:text/plain;base64,aGVsbG8=", "media type 'text/plain' is not accepted"),
        ("data:image/gif;base64,R0lGODlh", "media type 'image/gif' is not accepted"),
        ("data:;base64,aGVsbG8=", "media type '(none)' is not accepted"),
        ("data:image/png,%89PNG", "not base64-encoded"),
        ("data:image/png;base64", "no comma"),
        ("not base64 at all!", "invalid base64"),
        ("aGVsbG8", "invalid base64"),  # padding missing
        ("aGVs=bG8=", "invalid base64"),  # padding in the middle
        ("aGVsbG8=\u00e9", "invalid base64"),
        ("", "image data is empty"),
        ("  \r\n ", "image data is empty"),
        ("data:image/png;base64,", "image data is empty"),
        ("data:image/webp;base64,  \n", "image data is empty"),
    ],
)
def test_bad_input_is_refused_with_a_reason(value: str, message: str) -> None:
    with pytest.raises(ImageRejected, match=re.escape(message)) as info:
        decode_image_input(value, max_bytes=MiB)
    assert info.value.message == str(info.value)
    assert isinstance(info.value, ValueError)


def test_oversized_payload_is_refused_before_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_decode(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("b64decode called for an oversized payload")

    monkeypatch.setattr(photos.base64, "b64decode", must_not_decode)
    just_over = base64.b64encode(b"\0" * (2 * MiB + 1)).decode()
    with pytest.raises(ImageRejected, match=r"^decoded image is larger than 2 MiB$"):
        decode_image_input(just_over, max_bytes=2 * MiB)
    with pytest.raises(ImageRejected, match="larger than 2 MiB"):
        decode_image_input("data:image/jpeg;base64," + "A" * (40 * MiB), max_bytes=2 * MiB)


def test_payload_of_exactly_max_bytes_is_accepted() -> None:
    raw = b"\x01" * 1000
    assert decode_image_input(base64.b64encode(raw).decode(), max_bytes=1000) == raw
    with pytest.raises(ImageRejected, match="larger than 999 bytes"):
        decode_image_input(base64.b64encode(raw).decode(), max_bytes=999)


# --- process_photo: refusals -------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"hello, this is a text file\n" * 20, id="text"),
        pytest.param(encode(Image.new("P", (20, 20)), "GIF"), id="gif"),
        pytest.param(encode(Image.new("RGB", (20, 20)), "BMP"), id="bmp"),
        pytest.param(encode(Image.new("RGB", (20, 20)), "TIFF"), id="tiff"),
    ],
)
def test_unsupported_formats_are_refused(raw: bytes) -> None:
    with pytest.raises(ImageRejected, match=r"^not a JPEG, PNG or WebP image$"):
        process_photo(raw)
    with pytest.raises(ImageRejected, match="not a JPEG, PNG or WebP"):
        process_signature(raw)


def test_empty_bytes_are_refused() -> None:
    with pytest.raises(ImageRejected, match="empty"):
        process_photo(b"")


def test_truncated_jpeg_is_refused() -> None:
    full = encode(noise((400, 300)), "JPEG", quality=90)
    with pytest.raises(ImageRejected, match=r"^the image data is truncated$"):
        process_photo(full[: len(full) // 2])


def test_truncated_png_is_refused() -> None:
    full = encode(noise((200, 200)), "PNG")
    with pytest.raises(ImageRejected, match="truncated"):
        process_photo(full[: len(full) // 2])
    with pytest.raises(ImageRejected, match="truncated"):
        process_signature(full[: len(full) // 2])


def test_png_cut_inside_its_header_is_called_corrupt_not_unsupported() -> None:
    full = encode(Image.new("RGB", (10, 10)), "PNG")
    with pytest.raises(ImageRejected, match="truncated or corrupt"):
        process_photo(full[:20])


@pytest.mark.parametrize(
    "bomb",
    [
        pytest.param(png_claiming(20_000, 20_000), id="png-20000x20000"),
        pytest.param(jpeg_claiming(20_000, 20_000), id="jpeg-20000x20000"),
        pytest.param(webp_claiming(16_384, 16_384), id="webp-16384x16384"),
        pytest.param(png_claiming(9_000, 9_000), id="png-81Mpx-pillow-warning"),
    ],
)
def test_decompression_bombs_are_refused_from_the_header(bomb: bytes, monkeypatch) -> None:
    assert len(bomb) < 1000  # small on disk, huge once decoded
    decoded = []
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda image: decoded.append(image.size))
    with pytest.raises(ImageRejected, match=r"^image is too large: .*pixels, the limit is 16000000$"):
        process_photo(bomb)
    assert decoded == []  # refused before a single pixel was decoded


def test_bombs_are_refused_even_when_pillow_warnings_are_not_errors() -> None:
    for action in ("ignore", "default"):
        with warnings.catch_warnings(record=True):
            warnings.simplefilter(action)
            with pytest.raises(ImageRejected,
                               match=r"^image is too large: 25000000 pixels, the limit is 16000000$"):
                process_photo(png_claiming(5_000, 5_000))


def test_size_limit_message_gives_the_pixel_count() -> None:
    with pytest.raises(ImageRejected, match=r"^image is too large: 6000000 pixels, the limit is 4000000$"):
        process_signature(png_claiming(3_000, 2_000))
    with pytest.raises(ImageRejected, match=r"^image is too large: 10000 pixels, the limit is 9999$"):
        process_photo(png_claiming(100, 100), max_pixels=9_999)


def test_pixel_limit_above_the_ceiling_is_a_programming_error() -> None:
    assert Image.MAX_IMAGE_PIXELS == photos.PIXEL_CEILING
    with pytest.raises(ValueError, match="max_pixels"):
        process_photo(b"irrelevant", max_pixels=photos.PIXEL_CEILING + 1)


# --- process_photo: output ----------------------------------------------------


def test_exif_gps_and_all_other_metadata_are_removed() -> None:
    exif = Image.Exif()
    exif[ExifTags.Base.Make] = "PhoneCo"
    exif[ExifTags.Base.Model] = "Site Phone 9"
    exif[ExifTags.IFD.GPSInfo] = {
        ExifTags.GPS.GPSLatitudeRef: "N",
        ExifTags.GPS.GPSLatitude: (52.0, 31.0, 12.5),
        ExifTags.GPS.GPSLongitudeRef: "E",
        ExifTags.GPS.GPSLongitude: (13.0, 24.0, 6.0),
    }
    xmp = b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><secret>site-location</secret></x:xmpmeta>'
    source = encode(
        noise((300, 200)), "JPEG", exif=exif, xmp=xmp, icc_profile=b"\0" * 200, comment=b"taken at 52N 13E"
    )
    with Image.open(io.BytesIO(source)) as check:  # the fixture really carries GPS
        assert check.getexif().get_ifd(ExifTags.IFD.GPSInfo)[ExifTags.GPS.GPSLatitudeRef] == "N"

    result = process_photo(source)

    for blob in (result.data, result.thumb):
        with Image.open(io.BytesIO(blob)) as out:
            assert out.format == "JPEG"
            exif_out = out.getexif()
            assert len(exif_out) == 0
            assert ExifTags.IFD.GPSInfo not in exif_out
            assert exif_out.get_ifd(ExifTags.IFD.GPSInfo) == {}
            assert not {"exif", "xmp", "icc_profile", "comment"} & set(out.info)
        for marker in (b"Exif", b"PhoneCo", b"site-location", b"ICC_PROFILE", b"52N", b"ns.adobe.com"):
            assert marker not in blob


def test_exif_orientation_6_is_applied() -> None:
    exif = Image.Exif()
    exif[ExifTags.Base.Orientation] = 6
    source = encode(halves((400, 200), "red", "blue"), "JPEG", exif=exif, quality=95)

    result = process_photo(source)

    assert (result.width, result.height) == (200, 400)
    with Image.open(io.BytesIO(result.data)) as out:
        assert out.size == (200, 400)
        assert out.getexif().get(ExifTags.Base.Orientation) is None
        # Orientation 6 means "rotate 90 degrees clockwise to display": the left half ends up on top.
        top, bottom = out.getpixel((100, 50)), out.getpixel((100, 350))
    assert top[0] > 200 and top[2] < 60
    assert bottom[2] > 200 and bottom[0] < 60
    with Image.open(io.BytesIO(result.thumb)) as thumb:
        assert thumb.size == (160, 320)


def test_12_megapixel_jpeg_is_scaled_to_2048_with_a_320_thumbnail() -> None:
    # Upscaled noise: photo-like detail, much cheaper to generate than 12 MP of noise.
    source = encode(noise((1000, 750)).resize((4000, 3000), Image.Resampling.BICUBIC), "JPEG", quality=90)

    result = process_photo(source)

    assert (result.width, result.height) == (2048, 1536)
    assert result.content_type == "image/jpeg"
    assert result.sha256 == hashlib.sha256(result.data).hexdigest()
    with Image.open(io.BytesIO(result.data)) as out:
        assert (out.format, out.mode, out.size) == ("JPEG", "RGB", (2048, 1536))
    with Image.open(io.BytesIO(result.thumb)) as thumb:
        assert (thumb.format, thumb.size) == ("JPEG", (320, 240))


def test_large_jpeg_is_decoded_at_reduced_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes_after_draft: list[tuple[int, int]] = []
    original_draft = JpegImagePlugin.JpegImageFile.draft

    def spy(self: JpegImagePlugin.JpegImageFile, mode: str | None, size: tuple[int, int] | None):
        result = original_draft(self, mode, size)
        sizes_after_draft.append(self.size)
        return result

    monkeypatch.setattr(JpegImagePlugin.JpegImageFile, "draft", spy)
    source = encode(noise((200, 150)).resize((2000, 1500)), "JPEG")
    result = process_photo(source, long_edge=500)

    assert sizes_after_draft == [(500, 375)]  # libjpeg decoded at 1/4 scale
    assert (result.width, result.height) == (500, 375)


def test_small_photo_is_not_upscaled() -> None:
    result = process_photo(encode(noise((100, 50)), "PNG"))
    assert (result.width, result.height) == (100, 50)
    with Image.open(io.BytesIO(result.thumb)) as thumb:
        assert thumb.size == (100, 50)


def test_png_with_alpha_becomes_rgb_jpeg_on_white() -> None:
    im = Image.new("RGBA", (200, 100), (0, 0, 0, 0))
    ImageDraw.Draw(im).rectangle((0, 0, 99, 99), fill=(0, 0, 255, 255))
    result = process_photo(encode(im, "PNG"))

    assert result.content_type == "image/jpeg"
    with Image.open(io.BytesIO(result.data)) as out:
        assert (out.format, out.mode, out.size) == ("JPEG", "RGB", (200, 100))
        transparent, opaque = out.getpixel((150, 50)), out.getpixel((50, 50))
    assert min(transparent) > 245  # flattened on white, not black
    assert opaque[2] > 200 and opaque[0] < 60


def test_palette_png_with_transparency_is_flattened_on_white() -> None:
    im = Image.new("P", (50, 50), 0)
    im.putpalette([0, 0, 0, 255, 0, 0])
    im.paste(1, (0, 0, 25, 50))
    im.info["transparency"] = 0
    with Image.open(io.BytesIO(process_photo(encode(im, "PNG")).data)) as out:
        assert out.mode == "RGB"
        assert min(out.getpixel((40, 25))) > 245
        assert out.getpixel((10, 25))[0] > 200


@pytest.mark.parametrize("options", [{"quality": 80}, {"lossless": True}], ids=["lossy", "lossless"])
def test_webp_is_accepted(options: dict) -> None:
    source = encode(halves((300, 150), "red", "blue"), "WEBP", **options)
    result = process_photo(source)
    assert (result.width, result.height) == (300, 150)
    with Image.open(io.BytesIO(result.data)) as out:
        assert out.format == "JPEG"
        assert out.getpixel((30, 75))[0] > 200


def test_format_comes_from_the_bytes_not_the_data_url_label() -> None:
    jpeg = encode(noise((64, 48)), "JPEG")
    raw = decode_image_input(data_url(jpeg, "image/png"), max_bytes=MiB)
    assert process_photo(raw).width == 64
    gif = encode(Image.new("P", (8, 8)), "GIF")
    with pytest.raises(ImageRejected, match="not a JPEG, PNG or WebP"):
        process_photo(decode_image_input(data_url(gif, "image/jpeg"), max_bytes=MiB))


def test_multi_picture_jpeg_from_a_phone_is_accepted() -> None:
    frames = [halves((120, 80), "red", "blue"), Image.new("RGB", (60, 40), "green")]
    source = encode(frames[0], "MPO", save_all=True, append_images=frames[1:])
    with Image.open(io.BytesIO(source)) as check:
        assert check.format == "MPO"
    result = process_photo(source)
    assert (result.width, result.height) == (120, 80)
    with Image.open(io.BytesIO(result.data)) as out:
        assert out.format == "JPEG"
        assert out.getpixel((10, 40))[0] > 200


def test_same_input_gives_identical_output() -> None:
    source = encode(noise((120, 90)), "JPEG")
    first, second = process_photo(source), process_photo(source)
    assert first == second


# --- process_signature ------------------------------------------------------


def signature_png(size: tuple[int, int] = (600, 200)) -> bytes:
    """A transparent canvas with an opaque black stroke, as a phone signature pad exports it."""
    im = Image.new("RGBA", size, (0, 0, 0, 0))
    ImageDraw.Draw(im).line((20, size[1] - 40, size[0] - 20, 40), fill=(0, 0, 0, 255), width=12)
    info = PngImagePlugin.PngInfo()
    info.add_text("Author", "Jane Foreman")
    return encode(im, "PNG", pnginfo=info)


def test_signature_keeps_transparency_and_drops_text_chunks() -> None:
    result = process_signature(signature_png())

    assert result.content_type == "image/png"
    assert result.extension == "png"
    assert (result.width, result.height) == (600, 200)
    assert result.sha256 == hashlib.sha256(result.data).hexdigest()
    with Image.open(io.BytesIO(result.data)) as out:
        assert (out.format, out.mode) == ("PNG", "RGBA")
        assert out.getpixel((5, 5))[3] == 0
        assert out.getpixel((300, 100)) == (0, 0, 0, 255)
    assert set(png_chunk_types(result.data)) <= {b"IHDR", b"IDAT", b"IEND"}
    assert b"Jane Foreman" not in result.data
    with Image.open(io.BytesIO(result.thumb)) as thumb:
        assert (thumb.format, thumb.mode, thumb.size) == ("PNG", "RGBA", (320, 107))


def test_signature_long_edge_is_capped() -> None:
    result = process_signature(signature_png((1800, 600)))
    assert (result.width, result.height) == (1200, 400)


def test_signature_from_jpeg_is_re_encoded_as_png() -> None:
    result = process_signature(encode(Image.new("RGB", (300, 100), "white"), "JPEG"))
    with Image.open(io.BytesIO(result.data)) as out:
        assert (out.format, out.mode) == ("PNG", "RGB")
