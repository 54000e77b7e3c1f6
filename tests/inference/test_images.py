"""Decoding an upload for inference: images decode as OpenCV reads them from a file; what is not an image, is cut
off, or declares more pixels than allowed is refused with the reason, before any expensive decoding."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import cv2
import numpy as np
import pytest

from lanner.inference.images import BadImage, NotAnImage, decode_image
from tests.inference.conftest import encoded, shapes_image

LIMIT = 50_000_000


def _png_declaring(width: int, height: int) -> bytes:
    """A tiny, valid-looking PNG whose header declares ``width`` x ``height`` (a decompression bomb's shape)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + \
        chunk(b"IEND", b"")


@pytest.mark.parametrize("ext", [".jpg", ".png", ".bmp", ".webp", ".tiff"])
def test_images_decode_as_opencv_reads_the_file(ext: str, tmp_path) -> None:
    data = encoded(shapes_image(), ext)
    (tmp_path / f"a{ext}").write_bytes(data)
    pixels = decode_image(data, max_pixels=LIMIT)
    assert pixels.shape == (96, 128, 3) and np.array_equal(pixels, cv2.imread(str(tmp_path / f"a{ext}")))


def test_a_jpeg_with_bytes_after_its_end_marker_is_fine() -> None:
    assert decode_image(encoded(shapes_image()) + b"trailing metadata", max_pixels=LIMIT).shape == (96, 128, 3)


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("a.txt", "hello")
    return buffer.getvalue()


@pytest.mark.parametrize("data, says", [
    (b"hello, this is text", "looks like text"), (_zip(), "ZIP archive"), (b"%PDF-1.7 ...", "PDF"),
    (b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 64, "video"), (b"GIF89a" + b"\x00" * 64, "GIF"),
])
def test_what_is_not_an_image_is_a_415_saying_what_it_looks_like(data: bytes, says: str) -> None:
    with pytest.raises(NotAnImage) as refused:
        decode_image(data, max_pixels=LIMIT)
    assert refused.value.status_code == 415 and says in refused.value.message


@pytest.mark.parametrize("ext, cut", [(".jpg", 0.5), (".jpg", 0.97), (".png", 0.6)])
def test_a_truncated_image_is_a_422(ext: str, cut: float) -> None:
    data = encoded(shapes_image(320, 240, seed=3), ext)
    with pytest.raises(BadImage) as refused:
        decode_image(data[:int(len(data) * cut)], max_pixels=LIMIT)
    assert refused.value.status_code == 422 and ("truncated" in refused.value.message
                                                 or "corrupt" in refused.value.message)


def test_a_decompression_bomb_is_refused_from_its_header() -> None:
    for width, height in ((10_000, 10_000), (100_000, 100_000)):  # under and over Pillow's own ceiling
        with pytest.raises(BadImage) as refused:
            decode_image(_png_declaring(width, height), max_pixels=LIMIT)
        assert refused.value.status_code == 422 and "LANNER_INFERENCE_MAX_PIXELS" in refused.value.message
    with pytest.raises(BadImage):
        decode_image(encoded(shapes_image()), max_pixels=100)  # the limit is the setting's


def test_an_empty_file_is_a_422() -> None:
    with pytest.raises(BadImage):
        decode_image(b"", max_pixels=LIMIT)
