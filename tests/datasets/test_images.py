"""Image probing: what counts as corrupt, trainer-visible sizes, thumbnails and the perceptual hash."""

from __future__ import annotations

import hashlib
import io
import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from lanner.datasets import images
from lanner.datasets.images import hamming, make_thumbnail, phash, probe_image
from lanner.datasets.records import CorruptImage


def scene(width: int = 640, height: int = 480, seed: int = 0) -> np.ndarray:
    """A BGR picture with structure (gradients and shapes), so phash has something to see."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 255, width, dtype=np.float32)
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None]
    img = np.dstack([np.broadcast_to(x, (height, width)), np.broadcast_to(y, (height, width)),
                     np.full((height, width), 128, np.float32)]).astype(np.uint8).copy()
    for _ in range(6):
        cx, cy = int(rng.integers(0, width)), int(rng.integers(0, height))
        color = tuple(int(c) for c in rng.integers(0, 256, 3))
        cv2.circle(img, (cx, cy), int(rng.integers(20, 120)), color, -1)
    return img


def write(path: Path, img: np.ndarray, *params: int) -> Path:
    assert cv2.imwrite(str(path), img, list(params))
    return path


def png_bytes(width: int, height: int) -> bytes:
    """A PNG with the given header size and no pixel data (for header-only checks)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


@pytest.fixture
def jpeg(tmp_path: Path) -> Path:
    return write(tmp_path / "scene.jpg", scene(), cv2.IMWRITE_JPEG_QUALITY, 90)


def corrupt_reason(path: Path, **kwargs: int) -> str:
    with pytest.raises(CorruptImage) as caught:
        probe_image(path, **kwargs)
    return str(caught.value)


# --- valid images ---------------------------------------------------------------------------------------------------


def test_probe_jpeg(jpeg: Path) -> None:
    info = probe_image(jpeg)
    data = jpeg.read_bytes()
    assert info.sha256 == hashlib.sha256(data).hexdigest()
    assert info.size == len(data)
    assert (info.width, info.height, info.format) == (640, 480, "jpeg")
    assert 0 <= info.phash < 2**64


@pytest.mark.parametrize(("suffix", "fmt"), [(".png", "png"), (".bmp", "bmp"), (".webp", "webp"), (".tiff", "tiff")])
def test_probe_other_formats(tmp_path: Path, suffix: str, fmt: str) -> None:
    info = probe_image(write(tmp_path / f"a{suffix}", scene(320, 200)))
    assert (info.width, info.height, info.format) == (320, 200, fmt)


def test_content_decides_the_format_not_the_name(tmp_path: Path) -> None:
    png = write(tmp_path / "real.png", scene(100, 80))
    misnamed = tmp_path / "misnamed.jpg"
    misnamed.write_bytes(png.read_bytes())
    assert probe_image(misnamed).format == "png"


def test_hash_is_streamed_in_chunks(jpeg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = probe_image(jpeg)
    monkeypatch.setattr(images, "HASH_CHUNK", 7)  # many chunks: head, tail and digest must not depend on chunking
    assert probe_image(jpeg) == whole
    cut = jpeg.with_name("cut.jpg")
    cut.write_bytes(jpeg.read_bytes()[:-1])
    assert "truncated" in corrupt_reason(cut)


def test_exif_rotated_jpeg_reports_upright_size_and_thumbnail(tmp_path: Path) -> None:
    stored = np.zeros((480, 640, 3), np.uint8)
    stored[:120, :160] = (255, 255, 255)           # white block at the stored top-left
    path = tmp_path / "rotated.jpg"
    exif = Image.Exif()
    exif[274] = 6                                   # "rotate 90 CW to display": stored top-left ends top-right
    Image.fromarray(stored).save(path, exif=exif, quality=95)

    info, thumb = probe_image(path, thumbnail=True)
    assert (info.width, info.height) == (480, 640)  # what Ultralytics' exif_size and cv2.imread see
    view = np.asarray(Image.open(io.BytesIO(thumb)).convert("L"))
    assert view.shape == (256, 192)
    assert view[10, -10] > 200 and view[10, 10] < 50 and view[-10, -10] < 50

    plain = tmp_path / "plain.jpg"
    Image.fromarray(np.ascontiguousarray(np.rot90(stored, -1))).save(plain, quality=95)
    assert hamming(info.phash, probe_image(plain).phash) <= 4  # phash is taken from the upright picture


@pytest.mark.parametrize("suffix", [".png", ".tiff", ".webp"])
def test_exif_rotation_in_other_formats(tmp_path: Path, suffix: str) -> None:
    # Pillow turns TIFFs upright itself while loading; the others must be turned once, never twice
    path = tmp_path / f"rotated{suffix}"
    exif = Image.Exif()
    exif[274] = 6
    Image.fromarray(cv2.cvtColor(scene(), cv2.COLOR_BGR2RGB)).save(path, exif=exif)
    info, thumb = probe_image(path, thumbnail=True)
    assert (info.width, info.height) == (480, 640)
    assert Image.open(io.BytesIO(thumb)).size == (192, 256)
    assert hamming(info.phash, phash(np.ascontiguousarray(np.rot90(scene(), -1)))) <= 6


def test_16_bit_png_keeps_its_picture(tmp_path: Path) -> None:
    img8 = scene(320, 240)
    path16 = write(tmp_path / "deep.png", img8.astype(np.uint16) * 257)
    info = probe_image(path16)
    assert (info.width, info.height, info.format) == (320, 240, "png")
    assert hamming(info.phash, phash(img8)) <= 4
    assert make_thumbnail(path16)


# --- corrupt images -------------------------------------------------------------------------------------------------


def test_text_named_jpg_is_not_an_image(tmp_path: Path) -> None:
    path = tmp_path / "notes.jpg"
    path.write_text("hello, I am not a picture\n" * 20)
    assert "not an image" in corrupt_reason(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jpg"
    path.write_bytes(b"")
    assert "empty" in corrupt_reason(path)


def test_jpeg_cut_in_half(jpeg: Path) -> None:
    path = jpeg.with_name("half.jpg")
    path.write_bytes(jpeg.read_bytes()[: jpeg.stat().st_size // 2])
    assert "truncated" in corrupt_reason(path)


def test_jpeg_without_end_marker_is_truncated(jpeg: Path) -> None:
    # decodes fine apart from the missing FFD9; Ultralytics would silently re-save it, we report it
    path = jpeg.with_name("noeoi.jpg")
    path.write_bytes(jpeg.read_bytes()[:-2])
    assert "end-of-image" in corrupt_reason(path)
    trailing = jpeg.with_name("trailing.jpg")
    trailing.write_bytes(jpeg.read_bytes() + b"junk")
    assert "end-of-image" in corrupt_reason(trailing)


def test_png_cut_in_half(tmp_path: Path) -> None:
    full = write(tmp_path / "full.png", scene())
    half = tmp_path / "half.png"
    half.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    assert "truncated" in corrupt_reason(half)


def test_png_without_iend_or_with_bad_crc(tmp_path: Path) -> None:
    data = write(tmp_path / "full.png", scene(200, 100)).read_bytes()
    no_end = tmp_path / "no_end.png"
    no_end.write_bytes(data[:-12])                  # all pixels there, IEND chunk missing: OpenCV rejects it
    assert "truncated" in corrupt_reason(no_end)
    flipped = bytearray(data)
    flipped[60] ^= 0xFF                             # inside the first IDAT chunk
    bad_crc = tmp_path / "bad_crc.png"
    bad_crc.write_bytes(bytes(flipped))
    with pytest.raises(CorruptImage):
        probe_image(bad_crc)


def test_unsupported_format(tmp_path: Path) -> None:
    path = tmp_path / "anim.gif"
    Image.fromarray(scene(64, 64)).save(path)
    assert "unsupported image format GIF" in corrupt_reason(path)


def test_zero_size_image(tmp_path: Path) -> None:
    path = tmp_path / "zero.png"
    path.write_bytes(png_bytes(0, 10))
    assert "zero-size" in corrupt_reason(path)


def test_too_small_for_the_trainer(tmp_path: Path) -> None:
    path = write(tmp_path / "tiny.png", scene(9, 40))
    assert "too small" in corrupt_reason(path)
    assert probe_image(path, min_side=1).width == 9


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_decompression_bomb_guard(tmp_path: Path, jpeg: Path) -> None:
    assert "too large" in corrupt_reason(jpeg, max_pixels=640 * 480 - 1)
    assert probe_image(jpeg, max_pixels=640 * 480).width == 640
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png_bytes(30_000, 30_000))     # 900 MP declared in a few bytes
    assert "too large" in corrupt_reason(bomb)
    huge = tmp_path / "huge.png"
    huge.write_bytes(png_bytes(12_000, 10_000))     # 120 MP: over our default, under Pillow's own limit
    assert "too large" in corrupt_reason(huge)


# --- thumbnails -----------------------------------------------------------------------------------------------------


def test_thumbnail_keeps_aspect_and_never_upscales(tmp_path: Path, jpeg: Path) -> None:
    assert Image.open(io.BytesIO(make_thumbnail(jpeg))).size == (256, 192)
    assert Image.open(io.BytesIO(make_thumbnail(jpeg, 100))).size == (100, 75)
    small = write(tmp_path / "small.png", scene(120, 60))
    thumb = Image.open(io.BytesIO(make_thumbnail(small)))
    assert (thumb.format, thumb.size) == ("JPEG", (120, 60))


def test_probe_with_thumbnail_matches_probe(jpeg: Path) -> None:
    info, thumb = probe_image(jpeg, thumbnail=True)
    assert info == probe_image(jpeg)
    assert Image.open(io.BytesIO(thumb)).size == (256, 192)
    big_info, big = probe_image(jpeg, thumbnail=True, thumbnail_side=400)
    assert big_info == info
    assert Image.open(io.BytesIO(big)).size == (400, 300)


def test_thumbnail_of_transparent_png(tmp_path: Path) -> None:
    rgba = np.zeros((50, 80, 4), np.uint8)          # fully transparent: shows as white, not black
    path = tmp_path / "clear.png"
    Image.fromarray(rgba, "RGBA").save(path)
    view = np.asarray(Image.open(io.BytesIO(make_thumbnail(path))).convert("L"))
    assert view.min() > 240


def test_thumbnail_of_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.jpg"
    path.write_text("not an image")
    with pytest.raises(CorruptImage):
        make_thumbnail(path)


# --- phash ----------------------------------------------------------------------------------------------------------


def test_phash_survives_resizing_and_recompression(tmp_path: Path) -> None:
    img = scene()
    base = phash(img)
    assert hamming(base, phash(cv2.resize(img, (320, 240), interpolation=cv2.INTER_AREA))) <= 4
    low = write(tmp_path / "low.jpg", img, cv2.IMWRITE_JPEG_QUALITY, 30)
    assert hamming(base, probe_image(low).phash) <= 4
    assert hamming(base, phash(Image.fromarray(cv2.cvtColor(img, cv2.COLOR_BGR2RGB)))) <= 2


def test_phash_tells_different_pictures_apart() -> None:
    hashes = [phash(scene(seed=s)) for s in range(6)]
    for i in range(len(hashes)):
        for j in range(i + 1, len(hashes)):
            assert hamming(hashes[i], hashes[j]) > 10


def test_phash_accepts_gray_and_bgra() -> None:
    img = scene()
    base = phash(img)
    assert hamming(base, phash(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY))) <= 1
    assert hamming(base, phash(cv2.cvtColor(img, cv2.COLOR_BGR2BGRA))) == 0


def test_hamming() -> None:
    assert hamming(0, 0) == 0
    assert hamming(0b1011, 0b0001) == 2
    assert hamming(0, 2**64 - 1) == 64
    signed = (2**64 - 1) - 2**64                    # the same 64 bits stored as a signed BIGINT
    assert hamming(signed, 2**64 - 1) == 0


def test_thumbnails_have_the_sizes_pillows_thumbnail_gives() -> None:
    """The import resizes thumbnails with OpenCV (lanner/datasets/images.py ``_shrunk``), sized as Pillow's
    ``thumbnail`` sizes them: checked against Pillow over a spread of shapes, both filters, both modes."""
    import random

    from PIL import Image

    from lanner.datasets.images import _shrunk, _thumbnail_size

    rng = random.Random(7)
    shapes = [(640, 480), (480, 640), (256, 256), (257, 3), (3, 257), (1, 5000), (5000, 1), (4000, 3000)]
    shapes += [(rng.randint(1, 6000), rng.randint(1, 6000)) for _ in range(2000)]
    for width, height in shapes:
        for side in (64, 256, 1024):
            pillow = Image.new("1", (width, height))
            pillow.thumbnail((side, side))
            assert _thumbnail_size(width, height, side) == pillow.size, (width, height, side)
    for mode, (width, height) in (("RGB", (320, 240)), ("L", (4000, 3000)), ("RGB", (200, 100))):
        color = 128 if mode == "L" else (128, 128, 128)
        small = _shrunk(Image.new(mode, (width, height), color), 256)
        pillow = Image.new(mode, (width, height))
        pillow.thumbnail((256, 256))
        assert small.mode == mode and small.size == pillow.size
        assert small.getpixel((0, 0)) == color  # a flat image stays flat through either filter
