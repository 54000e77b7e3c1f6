"""Finding faces and blurring them: the pixel half of ``operation: blur``, shared by the worker (which finds the
faces of a run's images) and the server (which blurs them, and runs a preview's six in the request).

The detector is a Haar cascade, never a download: the operator's own (``LANNER_FACE_CASCADE``, a cascade XML
path readable wherever the worker runs) or the frontal-face cascade that OpenCV 4 bundles with its wheel
(``cv2.data.haarcascades``). OpenCV 5 dropped both ``CascadeClassifier`` and the bundled files, which is why
``opencv-python`` is pinned below 5 (pyproject.toml); with neither, blurring is refused (422) before anything
runs. A cascade gives no per-face score, so the SDK's ``confidence`` (0-1) sets how many overlapping
detections a face needs (``min_neighbors``, 4 to 12): 0.25, the SDK's default, is 6, one more than OpenCV's
usual 5, which finds a second "face" in the helmet beside the astronaut's in tests/fixtures/astronaut.jpg."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np

BUNDLED = "haarcascade_frontalface_default.xml"
# The format each stored image is written back in (cv2's extension); any other becomes a PNG (lossless).
EXTENSIONS = {"jpeg": ".jpg", "png": ".png", "webp": ".webp", "bmp": ".bmp", "tiff": ".tiff"}
JPEG_QUALITY = 95


def cascade_path(configured: Path | str | None) -> str | None:
    """The cascade to use: ``configured`` when set (None when that file is missing: never another one in its
    place), else OpenCV's bundled frontal-face cascade, else None (this OpenCV has no cascades)."""
    if not hasattr(cv2, "CascadeClassifier"):
        return None
    if configured:
        return str(configured) if Path(configured).is_file() else None
    folder = getattr(getattr(cv2, "data", None), "haarcascades", None)
    bundled = Path(folder) / BUNDLED if folder else None
    return str(bundled) if bundled is not None and bundled.is_file() else None


def min_neighbors(confidence: float) -> int:
    """The SDK's 0-1 ``confidence`` as the cascade's ``minNeighbors`` (4 to 12; 0.25 is 6)."""
    return 4 + round(confidence * 8)


def load(path: str) -> Any:
    cascade = cv2.CascadeClassifier(path)
    if cascade.empty():
        raise ValueError(f"{path} is not a cascade OpenCV can read")
    return cascade


def detect(cascade: Any, image: Any, confidence: float) -> list[list[float]]:
    """The faces in ``image`` (BGR) as normalised ``[x, y, w, h]`` (top-left corner, 0-1)."""
    height, width = image.shape[:2]
    gray = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    side = max(20, min(width, height) // 40)  # smaller faces are not recognisable anyway
    boxes = cascade.detectMultiScale(gray, scaleFactor=1.1, minNeighbors=min_neighbors(confidence),
                                     minSize=(side, side))
    return [[float(x) / width, float(y) / height, float(w) / width, float(h) / height] for x, y, w, h in boxes]


def blur(image: Any, faces: list[list[float]], box_scale: float) -> Any:
    """A copy of ``image`` with each face box (scaled ``box_scale`` times around its centre, clipped to the
    image) blurred past recognition: a Gaussian as wide as the box, twice."""
    out = image.copy()
    height, width = image.shape[:2]
    for x, y, w, h in faces:
        cx, cy, half_w, half_h = (x + w / 2) * width, (y + h / 2) * height, w * width * box_scale / 2, \
            h * height * box_scale / 2
        x0, y0 = max(0, int(cx - half_w)), max(0, int(cy - half_h))
        x1, y1 = min(width, int(round(cx + half_w))), min(height, int(round(cy + half_h)))
        if x1 - x0 < 2 or y1 - y0 < 2:
            continue
        kernel = max(3, (max(x1 - x0, y1 - y0) // 2) * 2 + 1)
        region = out[y0:y1, x0:x1]
        for _ in range(2):
            region = cv2.GaussianBlur(region, (kernel, kernel), 0)
        out[y0:y1, x0:x1] = region
    return out


def decode(data: bytes) -> Any:
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError("the image could not be decoded")
    return image


def encode(image: Any, fmt: str) -> bytes:
    """``image`` in the stored image's format (JPEG at quality 95), so its name's extension stays true."""
    extension = EXTENSIONS.get(fmt.lower(), ".png")
    params = [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY] if extension == ".jpg" else []
    ok, buffer = cv2.imencode(extension, image, params)
    if not ok:
        raise ValueError(f"the blurred image could not be encoded as {extension}")
    return bytes(buffer.tobytes())
