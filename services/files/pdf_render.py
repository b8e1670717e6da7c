"""Turn a ticket document's HTML into PDF, in a worker of the image pool (services/files/image_pool.py).

WeasyPrint and its libraries are imported here only when a document is rendered, so the
processes that serve requests never load them. The HTML names its images as
``ewt-image:<store key>``; those are read from the file store (folder or bucket) and shrunk to at most
DOCUMENT_IMAGE_EDGE pixels (PACKAGE_IMAGE_EDGE in a backup package). Nothing else is fetched:
no network, no other file.
"""
from __future__ import annotations

import io

from PIL import Image, ImageFile, ImageOps

from services.files import storage

IMAGE_SCHEME = "ewt-image:"
# Long edge of a photo in the document: sharp at the 80 mm it is printed at, and a tenth of
# the original's pixels to decode and embed.
DOCUMENT_IMAGE_EDGE = 1000
# In a backup package of up to 50 tickets (services/reports/backup_package.py): 150 dpi at that
# size, and a quarter of a stored photo's pixels decoded (JPEG's 1/4 scale), so 600 photos are
# made within one document's CPU limit.
PACKAGE_IMAGE_EDGE = 512


def shrunk(data: bytes, edge: int = DOCUMENT_IMAGE_EDGE) -> tuple[bytes, str]:
    """A stored image at most `edge` pixels on its long side, and its media type."""
    with Image.open(io.BytesIO(data)) as image:
        if image.format == "JPEG":
            # Decode at a fraction of the size when it can: the box is the shrunk image's own
            # size, as a square box of `edge` would keep a 4:3 photo's short side from scaling.
            scale = min(1.0, edge / max(image.size))
            image.draft("RGB", (max(1, int(image.width * scale)), max(1, int(image.height * scale))))
        image = ImageOps.exif_transpose(image)
        if max(image.size) > edge:
            image.thumbnail((edge, edge), Image.Resampling.LANCZOS)
        out = io.BytesIO()
        if image.mode in ("RGBA", "LA", "P"):  # signatures: keep their transparency
            image.save(out, "PNG", optimize=True)
            return out.getvalue(), "image/png"
        image.convert("RGB").save(out, "JPEG", quality=80, optimize=True)
        return out.getvalue(), "image/jpeg"


def render_pdf(html: str, spec: storage.StoreSpec, image_edge: int = DOCUMENT_IMAGE_EDGE) -> bytes:
    """The PDF of a document's HTML, its images read from the file store `spec` describes and
    shrunk to at most `image_edge` pixels."""
    import weasyprint  # loaded only in the process that renders

    # Importing WeasyPrint lets Pillow accept truncated images; the same worker processes
    # check untrusted photos, which must refuse them (services/files/photos.py).
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    store = storage.open_store(spec)

    class StoreFetcher(weasyprint.urls.URLFetcher):
        """Serves ewt-image: addresses from the photo store and refuses everything else."""

        def fetch(self, url, headers=None):
            """The shrunk image a store key names; ValueError for any other address."""
            if not url.startswith(IMAGE_SCHEME):
                raise ValueError("only the ticket's own images are part of its document")
            data, media_type = shrunk(store.open(url[len(IMAGE_SCHEME):]), image_edge)
            return weasyprint.urls.URLFetcherResponse(
                url, data, headers={"Content-Type": media_type})

    return weasyprint.HTML(string=html, url_fetcher=StoreFetcher(allowed_protocols=())
                           ).write_pdf()
