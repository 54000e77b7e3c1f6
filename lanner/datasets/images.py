"""Image probing: content hash, trainer-visible size, corruption checks, thumbnails and a perceptual hash.

One decode serves everything: the file is streamed once for its sha256, opened with Pillow (content decides the
format, never the name), its header checked against a decompression-bomb limit, then fully decoded so that truncated
files fail here rather than in the trainer. JPEGs are decoded with libjpeg's DCT scaling (``Image.draft``) to the
smallest scale that still covers a ``THUMBNAIL_SIDE`` thumbnail, which is ~2x faster and is all phash and thumbnails
need; the entropy-coded data is still read to the end, so truncation is still caught.

The rules mirror Ultralytics' ``check_image``/``exif_size`` (``ultralytics/data/utils.py``) so that an image that
probes fine is one the trainer keeps: sides >= 10 px, a supported format, a JPEG ends with the EOI marker ``FFD9``
(Ultralytics silently re-saves such files; we report them as truncated), and width/height are EXIF-orientation
corrected exactly like ``exif_size`` (swapped for orientations 5-8; for TIFF/WebP the OpenCV decode decides).
"""

from __future__ import annotations

import hashlib
import io
import math
import struct
from pathlib import Path
from typing import Literal, overload

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from lanner.datasets.records import CorruptImage, ImageInfo

MAX_PIXELS = 100_000_000        # decompression-bomb guard (width * height from the header, before decoding)
MIN_SIDE = 10                   # Ultralytics drops images with a side under 10 px
THUMBNAIL_SIDE = 256            # default thumbnail size; also fixes the JPEG decode scale used for phash
THUMBNAIL_QUALITY = 85
HASH_CHUNK = 1 << 20            # sha256 is streamed in 1 MiB chunks: memory stays bounded whatever the file size

# Pillow format name -> ImageInfo.format. MPO is the multi-picture JPEG many cameras write; it is a JPEG.
FORMATS = {"JPEG": "jpeg", "MPO": "jpeg", "PNG": "png", "BMP": "bmp", "WEBP": "webp", "TIFF": "tiff"}
_CV2_CHECKED = {"tiff", "webp", "bmp"}  # formats where Pillow and OpenCV disagree often enough to ask OpenCV too

_MAGIC = {  # for a clearer message when Pillow cannot identify a file that claims to be an image
    b"\xff\xd8\xff": "JPEG", b"\x89PNG\r\n\x1a\n": "PNG", b"BM": "BMP", b"GIF8": "GIF",
    b"II*\x00": "TIFF", b"MM\x00*": "TIFF", b"RIFF": "WebP",
}
_TRANSPOSE = {  # EXIF orientation -> the transpose that makes the image upright (as in ImageOps.exif_transpose)
    2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
_MASK64 = (1 << 64) - 1


@overload
def probe_image(path: Path, *, thumbnail: Literal[False] = ..., thumbnail_side: int = ...,
                max_pixels: int = ..., min_side: int = ...) -> ImageInfo: ...
@overload
def probe_image(path: Path, *, thumbnail: Literal[True], thumbnail_side: int = ...,
                max_pixels: int = ..., min_side: int = ...) -> tuple[ImageInfo, bytes]: ...
def probe_image(path: Path, *, thumbnail: bool = False, thumbnail_side: int = THUMBNAIL_SIDE,
                max_pixels: int = MAX_PIXELS, min_side: int = MIN_SIDE) -> ImageInfo | tuple[ImageInfo, bytes]:
    """Hash, size, format and phash of an image file; raises ``CorruptImage`` saying why it cannot be used.

    With ``thumbnail=True`` returns ``(info, jpeg_bytes)`` from the same decode (a second decode only when
    ``thumbnail_side`` exceeds ``THUMBNAIL_SIDE``). The phash never depends on the thumbnail arguments.
    Pillow refuses images over ~179 MP on its own, so ``max_pixels`` above that has no effect.
    """
    path = Path(path)
    sha256, size, head, tail = _hash_file(path)
    if size == 0:
        raise CorruptImage("empty file (0 bytes)")
    try:
        with Image.open(path) as im:
            fmt = _check_header(im, max_pixels, min_side)
            if fmt == "jpeg" and not tail.endswith(b"\xff\xd9"):
                raise CorruptImage("truncated JPEG: the file does not end with the end-of-image marker (FFD9)")
            if fmt == "png":  # chunk CRCs and the IEND chunk, as Ultralytics' verify(); OpenCV rejects them too
                with Image.open(path) as check:
                    check.verify()
            orientation = _orientation(im)
            width, height = im.size
            if im.format in ("JPEG", "MPO"):
                im.draft(None, _fit(width, height, THUMBNAIL_SIDE))
            im.load()  # full decode: a truncated file fails here (the pixels stay usable once the file is closed)
            decoded = im
            pixel_orientation = _orientation(im)  # Pillow turns TIFFs upright while loading and drops the tag
            if orientation in (5, 6, 7, 8) and fmt not in _CV2_CHECKED:
                width, height = height, width
    except CorruptImage:
        raise
    except (UnidentifiedImageError, ImportError):
        # ImportError: a plugin another library registered with Pillow (e.g. a HEIF opener) probed the file and
        # lacks its module; the file is not one of our formats either way.
        raise CorruptImage(_unidentified_reason(head)) from None
    except Image.DecompressionBombError as e:
        raise CorruptImage(f"image too large (possible decompression bomb): {e}") from None
    except MemoryError:
        raise
    except Exception as e:  # Pillow reports damaged data as OSError, SyntaxError, ValueError, struct.error, ...
        raise CorruptImage(_decode_reason(e)) from None
    if fmt in _CV2_CHECKED:
        cv_size = _cv2_size(path, fmt)
        if orientation in (5, 6, 7, 8):  # exif_size: for TIFF/WebP the trainer's OpenCV decode decides
            width, height = cv_size
    upright = _upright(decoded, pixel_orientation)
    info = ImageInfo(sha256=sha256, size=size, width=width, height=height, format=fmt, phash=phash(upright))
    if not thumbnail:
        return info
    if thumbnail_side > THUMBNAIL_SIDE:
        return info, make_thumbnail(path, thumbnail_side)
    return info, _encode_thumbnail(upright, thumbnail_side)


def make_thumbnail(path: Path, max_side: int = THUMBNAIL_SIDE, *, max_pixels: int = MAX_PIXELS) -> bytes:
    """JPEG bytes no larger than ``max_side`` on either side, aspect kept, EXIF orientation applied, never upscaled."""
    try:
        with Image.open(path) as im:
            _check_header(im, max_pixels, 1)
            if im.format in ("JPEG", "MPO"):
                im.draft(None, _fit(*im.size, max_side))
            im.load()
            return _encode_thumbnail(_upright(im, _orientation(im)), max_side)
    except CorruptImage:
        raise
    except UnidentifiedImageError:
        raise CorruptImage(_unidentified_reason(_head(path))) from None
    except Image.DecompressionBombError as e:
        raise CorruptImage(f"image too large (possible decompression bomb): {e}") from None
    except MemoryError:
        raise
    except Exception as e:
        raise CorruptImage(_decode_reason(e)) from None


def phash(image: Image.Image | np.ndarray) -> int:
    """64-bit DCT perceptual hash, stable under resizing and re-encoding (compare with ``hamming``).

    Grayscale -> 32x32 (area interpolation) -> 2-D DCT -> the 8x8 lowest frequencies next to the DC term
    (``dct[1:9, 1:9]``: the DC row and column are left out, as in the original pHash, because they mostly carry
    overall brightness) -> one bit per coefficient, set when above the median of the 64. The first coefficient is
    the most significant bit; the result is unsigned (0 .. 2**64-1). A NumPy array is read as OpenCV would
    write it: (H, W) gray, (H, W, 3) BGR or (H, W, 4) BGRA.
    """
    gray = _gray(image)
    small = cv2.resize(gray, (32, 32), interpolation=cv2.INTER_AREA).astype(np.float32)
    coeffs = cv2.dct(small)[1:9, 1:9]
    bits = (coeffs > np.median(coeffs)).ravel()
    return int.from_bytes(np.packbits(bits).tobytes(), "big")


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two 64-bit hashes (signed storage of the same bits gives the same answer)."""
    return ((a ^ b) & _MASK64).bit_count()


# --- internals ---------------------------------------------------------------------------------------------------


def _hash_file(path: Path) -> tuple[str, int, bytes, bytes]:
    """sha256, size, first 32 and last 2 bytes, reading 1 MiB at a time."""
    digest = hashlib.sha256()
    size = 0
    head = b""
    tail = b""
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            if not size:
                head = chunk[:32]
            digest.update(chunk)
            size += len(chunk)
            tail = (tail + chunk)[-2:]
    return digest.hexdigest(), size, head, tail


def _head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(32)


def _check_header(im: Image.Image, max_pixels: int, min_side: int) -> str:
    """Format and dimension rules that need no decoding; returns our format name."""
    fmt = FORMATS.get(im.format or "")
    if fmt is None:
        raise CorruptImage(f"unsupported image format {im.format}; supported: JPEG, PNG, BMP, WebP, TIFF")
    width, height = im.size
    if width <= 0 or height <= 0:
        raise CorruptImage(f"zero-size image ({width}x{height})")
    if width * height > max_pixels:
        raise CorruptImage(f"image too large: {width}x{height} is {width * height / 1e6:.0f} megapixels, "
                           f"over the {max_pixels / 1e6:g} MP limit (decompression-bomb guard)")
    if min(width, height) < min_side:
        raise CorruptImage(f"image too small: {width}x{height}, the trainer needs at least {min_side} px a side")
    return fmt


def _orientation(im: Image.Image) -> int:
    try:
        value = im.getexif().get(274)
        return int(value) if value in _TRANSPOSE else 1
    except Exception:  # broken EXIF must not make a decodable image corrupt (Ultralytics ignores it too)
        return 1


def _fit(width: int, height: int, side: int) -> tuple[int, int]:
    """Smallest size the thumbnail needs from the decoder: the image scaled to fit ``side``, aspect kept."""
    scale = min(1.0, side / max(width, height))
    return max(1, round(width * scale)), max(1, round(height * scale))


def _cv2_size(path: Path, fmt: str) -> tuple[int, int]:
    """(width, height) as the trainer's OpenCV ``imread`` decodes it; failing here means the trainer skips it."""
    data = np.fromfile(str(path), np.uint8)
    im = None
    if fmt == "tiff":
        ok, frames = cv2.imdecodemulti(data, cv2.IMREAD_UNCHANGED)
        if ok and frames and frames[0].ndim == 3:
            im = frames[0]
    if im is None:
        im = cv2.imdecode(data, cv2.IMREAD_COLOR)
    if im is None:
        raise CorruptImage(f"OpenCV cannot decode this {fmt.upper()} file, so the trainer would skip it")
    return int(im.shape[1]), int(im.shape[0])


def _upright(im: Image.Image, orientation: int) -> Image.Image:
    method = _TRANSPOSE.get(orientation)
    return im.transpose(method) if method is not None else im


def _to_8bit(im: Image.Image) -> Image.Image:
    """16-bit and float images keep their high byte (as Ultralytics' imread does) instead of clipping to white."""
    if im.mode not in ("I", "F") and not im.mode.startswith("I;16"):
        return im
    arr = np.asarray(im, dtype=np.float64)
    top = float(arr.max()) if arr.size else 0.0
    if top > 255:
        arr = arr * (255.0 / (65535.0 if top <= 65535 else top))
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "L")


def _gray(image: Image.Image | np.ndarray) -> np.ndarray:
    if isinstance(image, Image.Image):
        return np.asarray(_to_8bit(image).convert("L"))
    arr = np.asarray(image)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[..., 0]
    if arr.dtype == np.uint16:
        arr = (arr >> 8).astype(np.uint8)
    elif arr.dtype != np.uint8:
        arr = arr.astype(np.float32)
    if arr.ndim == 2:
        return arr
    if arr.ndim == 3 and arr.shape[2] in (3, 4):
        return cv2.cvtColor(arr, cv2.COLOR_BGR2GRAY if arr.shape[2] == 3 else cv2.COLOR_BGRA2GRAY)
    raise ValueError(f"phash needs a gray, BGR or BGRA image, got shape {arr.shape}")


def _encode_thumbnail(im: Image.Image, max_side: int) -> bytes:
    im = _to_8bit(im)
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        im = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba)
    if im.mode not in ("RGB", "L"):
        im = im.convert("RGB")
    out = io.BytesIO()
    _shrunk(im, max_side).save(out, "JPEG", quality=THUMBNAIL_QUALITY)
    return out.getvalue()


def _shrunk(im: Image.Image, max_side: int) -> Image.Image:
    """A new image no larger than ``max_side`` on either side, aspect kept (Pillow's ``thumbnail`` sizes), never
    upscaled. Resized by OpenCV: Pillow's bilinear filter cost 1-1.5 ms for the 320x240 -> 256x192 step every
    imported 640x480 JPEG takes after its draft decode (a third of the import's CPU per image), OpenCV's 0.2 ms.
    Bilinear while shrinking by less than 2 (what a draft decode leaves: it stops at the first scale that still
    covers the thumbnail); area averaging beyond, where bilinear would alias (a PNG or a large TIFF)."""
    width, height = im.size
    size = _thumbnail_size(width, height, max_side)
    if size == (width, height):
        return im.copy()
    interpolation = cv2.INTER_LINEAR if size[0] * 2 > width else cv2.INTER_AREA
    return Image.fromarray(cv2.resize(np.asarray(im), size, interpolation=interpolation), mode=im.mode)


def _thumbnail_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """What ``Image.thumbnail((max_side, max_side))`` would make of ``width`` x ``height``."""
    if width <= max_side and height <= max_side:
        return width, height
    aspect = width / height
    if aspect >= 1:  # Pillow's preserve_aspect_ratio: the nearer of floor and ceil to the aspect, at least 1
        y = min(math.floor(max_side / aspect), math.ceil(max_side / aspect),
                key=lambda n: 0 if n == 0 else abs(aspect - max_side / n))
        return max_side, max(y, 1)
    x = min(math.floor(max_side * aspect), math.ceil(max_side * aspect), key=lambda n: abs(aspect - n / max_side))
    return max(x, 1), max_side


def _unidentified_reason(head: bytes) -> str:
    if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR" and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        if width == 0 or height == 0:
            return f"zero-size image ({width}x{height})"
    for magic, name in _MAGIC.items():
        if head.startswith(magic):
            return f"looks like a {name} file but its header cannot be read (damaged)"
    return "not an image: the file content is not a recognised image format"


def _decode_reason(error: Exception) -> str:
    text = str(error) or type(error).__name__
    if "truncated" in text.lower() or isinstance(error, (EOFError, struct.error)):
        return f"truncated image: {text}"
    return f"image data cannot be decoded: {text}"
