"""An uploaded image, decoded for inference: what it is is decided by its bytes, never by its name or the
content type the client declared.

Three refusals, each before any pixel work that a hostile file could make expensive:
- not an image at all (a video, an archive, text): 415, saying what it looks like;
- a decompression bomb: the size in the header (Pillow reads only the header to open a file) over
  ``LANNER_INFERENCE_MAX_PIXELS`` is a 422 before a pixel is decoded;
- a truncated or corrupt image: a 422. A JPEG must end with its EOI marker (as Ultralytics' own ``check_image``
  asks); one that does not is fully decoded by Pillow, which tells a cut-off file from one with trailing bytes.

The pixels come from OpenCV's ``imdecode`` in colour (BGR, EXIF orientation applied): exactly what ``yolo
predict`` reads from a file, so a prediction here matches one made locally on the same file.
"""

from __future__ import annotations

import io
import sys
import warnings
from typing import Any

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from lanner.errors import Unprocessable, UnsupportedMediaType

FORMATS = {"JPEG": "JPEG", "MPO": "JPEG", "PNG": "PNG", "BMP": "BMP", "WEBP": "WebP", "TIFF": "TIFF"}
ACCEPTED = "a JPEG, PNG, BMP, WebP or TIFF image"
_LOOKS_LIKE = (  # magic bytes -> what the file is, for a refusal that says so
    (b"PK\x03\x04", "a ZIP archive"), (b"%PDF", "a PDF document"), (b"\x1f\x8b", "a gzip archive"),
    (b"GIF8", "a GIF (not supported: send one frame as " + ACCEPTED + ")"), (b"\x1aE\xdf\xa3", "a video (WebM/MKV)"),
    (b"RIFF", "a RIFF file (AVI or WAV)"), (b"\x00\x00\x00\x18ftyp", "a video (MP4)"),
    (b"\x00\x00\x00\x1cftyp", "a video (MP4)"), (b"\x00\x00\x00\x20ftyp", "a video (MP4/MOV)"),
)


class NotAnImage(UnsupportedMediaType):
    code = "not_an_image"


class BadImage(Unprocessable):
    code = "bad_image"


def _pillow_open() -> Any:
    """Pillow's own ``Image.open``. Importing Ultralytics replaces it (``ultralytics.utils.patches``) with one
    that, on the first file it cannot identify, tries to pip-install a HEIF plugin: never on a request's bytes."""
    return getattr(sys.modules.get("ultralytics.utils.patches"), "_image_open", None) or Image.open


def describe(data: bytes) -> str:
    """What ``data`` looks like, for a refusal: a known container by its magic bytes, else text or binary."""
    for magic, what in _LOOKS_LIKE:
        if data.startswith(magic) or (magic.endswith(b"ftyp") and data[4:8] == b"ftyp"):
            return what
    head = data[:512]
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return "binary data of an unknown format"
    return "text"


def decode_image(data: bytes, *, max_pixels: int, field: str = "file") -> np.ndarray:
    """The image in ``data`` as a BGR ``uint8`` array (height, width, 3); raises ``NotAnImage`` (415) or
    ``BadImage`` (422) saying why it cannot be used. ``field`` names the request field in the message."""
    if not data:
        raise BadImage(f"{field}: the image is empty (0 bytes)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our own limit decides, below
            header = _pillow_open()(io.BytesIO(data))  # reads the header only
        fmt, (width, height) = header.format or "", header.size
    except Image.DecompressionBombError:
        raise BadImage(f"{field}: the image is too large to decode (its header declares over "
                       f"{2 * (Image.MAX_IMAGE_PIXELS or 0) / 1e6:.0f} megapixels; the limit is "
                       f"{max_pixels / 1e6:g} MP, LANNER_INFERENCE_MAX_PIXELS)") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        raise NotAnImage(f"{field}: this is not an image (it looks like {describe(data)}); send {ACCEPTED}") from None
    if fmt not in FORMATS:
        raise NotAnImage(f"{field}: {fmt or 'this'} images are not supported; send {ACCEPTED}")
    if width <= 0 or height <= 0:
        raise BadImage(f"{field}: the image has no pixels ({width}x{height})")
    if width * height > max_pixels:
        raise BadImage(f"{field}: the image is {width}x{height}, {width * height / 1e6:.1f} megapixels, over the "
                       f"{max_pixels / 1e6:g} MP limit (LANNER_INFERENCE_MAX_PIXELS; a decompression-bomb guard)")
    if FORMATS[fmt] == "JPEG" and not data.rstrip(b"\x00\r\n ").endswith(b"\xff\xd9"):
        _decode_fully(header, field)  # no EOI marker: truncated, or only followed by other bytes
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if pixels is None:
        _decode_fully(header, field)  # Pillow's reason, when it has one
        raise BadImage(f"{field}: the {FORMATS[fmt]} image cannot be decoded (corrupt data)")
    return pixels


def _decode_fully(image: Image.Image, field: str) -> None:
    try:
        image.load()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as error:
        reason = "truncated" if "truncated" in str(error) else "corrupt"
        raise BadImage(f"{field}: the {FORMATS.get(image.format or '', 'image')} image is {reason} "
                       f"({error})") from None
