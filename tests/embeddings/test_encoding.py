"""The encoding on its own (issue 31): augmented copies (a flip, a crop, a colour jitter) of images hidden among
others are found among their originals' 5 nearest images, with weights a server without internet has; a mirror
image has the same vector; the vectors' key names the encoding; a worker refuses a job keyed otherwise.

The weights: ``yolo11n.yaml`` with random weights (seeded), what every install can make with nothing downloaded,
and the shape localizer (``tests.trained``), which stands in for the demo's starting model (``lanner demo``
trains yolo11n on 200 synthetic shapes of one class: a server's only weights until someone trains or installs
some). ``benchmarks/embeddings_quality.py`` measures the same at 2,000 images and 50 copies."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from lanner.embeddings import encoding, head, index, worker
from lanner.training.executors.worker_io import WorkerFailed
from tests.embeddings.near_duplicates import make_near_duplicates

IMGSZ = 128  # the demo's starting model's input size


def _model(which: str, localizer_weights: Path | None = None):
    import torch
    from ultralytics import YOLO

    if which == "random":
        torch.manual_seed(0)
        return YOLO("yolo11n.yaml")
    return YOLO(str(localizer_weights))


def _copies_embedded(model, root: Path, *, images: int, copies: int):
    """``images`` synthetic images and augmented copies of the first ``copies``, embedded as the worker embeds:
    (their names, their pixels, their vectors, {original: copy})."""
    pairs = make_near_duplicates(root, images=images, copies=copies, size=160)
    paths = sorted((root / "images" / "train").glob("*.jpg"))
    pixels = [cv2.imread(str(p)) for p in paths]
    vectors = [v for start in range(0, len(pixels), 32) for v in encoding.embed(model, pixels[start:start + 32], IMGSZ)]
    matrix = np.stack(vectors)
    assert matrix.dtype == np.float32 and np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    return [p.name for p in paths], pixels, matrix, pairs


def _found_in_top5(names: list[str], matrix: np.ndarray, pairs: dict[str, str], mapping=None) -> int:
    """How many copies are among their original's 5 nearest, through the head ``mapping`` when given."""
    found = index.DatasetIndex(names, *index.build(matrix, mapping), head=mapping)
    hits = 0
    for original, copy in pairs.items():
        nearest = [name for name, _ in found.search(matrix[names.index(original)], 6) if name != original]
        hits += copy in nearest[:5]
    return hits


@pytest.mark.parametrize("which", ["random", pytest.param("localizer", marks=pytest.mark.e2e)])
def test_augmented_copies_are_among_their_originals_five_nearest(which, request, tmp_path):
    weights = request.getfixturevalue("localizer_weights") if which == "localizer" else None
    names, _, matrix, pairs = _copies_embedded(_model(which, weights), tmp_path, images=300, copies=20)
    hits = _found_in_top5(names, matrix, pairs)
    assert hits >= 19, f"{hits}/20 augmented copies in their original's top 5"


@pytest.fixture
def flushed_denormals():
    """As the worker embeds: random and weakly trained weights are several times slower without it."""
    import torch

    encoding.flush_denormals()
    yield
    torch.set_flush_denormal(False)


@pytest.mark.e2e  # the demo-like weights are trained by the real trainer (tests.trained)
def test_a_copy_detection_head_finds_copies_the_backbone_alone_misses(localizer_weights, flushed_denormals,
                                                                        tmp_path):
    """60 copies among 600 images, the demo-like weights: the backbone's vectors alone miss some (55 of 60
    found when measured); through a head trained as the worker trains one (``worker.train_head``: edits of the
    dataset's images, copies included, as a real dataset would hold them; not the copies' own edits:
    ``head.augment`` crops wider and jitters more), at least 57 (the issue's 95 %: docs/benchmarks.md measures it
    at 2,000 images)."""
    model = _model("localizer", localizer_weights)
    names, pixels, matrix, pairs = _copies_embedded(model, tmp_path, images=600, copies=60)
    alone = _found_in_top5(names, matrix, pairs)
    mapping = head.train(head.views(pixels, lambda batch: encoding.embed(model, batch, IMGSZ)))
    with_head = _found_in_top5(names, matrix, pairs, mapping)
    assert with_head >= 57 and with_head > alone, f"{with_head}/60 with the head, {alone}/60 without"


def test_a_mirror_image_has_the_same_vector_and_a_brighter_one_nearly():
    model = _model("random")
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (96, 120, 3), dtype=np.uint8)
    brighter = np.clip(image.astype(np.float32) * 0.9 + 10, 0, 255).astype(np.uint8)
    plain, mirrored, lit = encoding.embed(model, [image, np.ascontiguousarray(image[:, ::-1]), brighter], IMGSZ)
    assert float(plain @ mirrored) == pytest.approx(1.0, abs=1e-5)
    assert float(plain @ lit) > 0.99


def test_an_object_crossing_the_middle_of_the_image_moves_its_summary_gradually():
    """A crop shifts content up or down: a channel active on one row just above the middle and the same one row
    below must summarise nearly alike (soft bands), not as opposite halves (hard ones: cosine 0)."""
    import torch

    def summary(row: int):
        features = torch.zeros(1, 1, 16, 8)
        features[0, 0, row, 2:5] = 1.0
        return encoding._summary(features)[0]

    above, below, far = summary(7), summary(8), summary(15)
    assert float(torch.nn.functional.cosine_similarity(above, below, dim=0)) > 0.95
    assert float(torch.nn.functional.cosine_similarity(above, far, dim=0)) < 0.9  # position still counts


def test_the_vector_key_names_the_encoding(monkeypatch):
    weights = "a" * 64
    key = encoding.vector_key(weights)
    assert len(key) == 64 and key != weights
    monkeypatch.setattr(encoding, "ENCODING", "another-encoding/2")
    assert encoding.vector_key(weights) != key


def test_a_worker_refuses_a_job_keyed_by_another_encoding(monkeypatch, tmp_path):
    spec = {"jobId": "j", "weightsSha256": "a" * 64, "vectorKey": encoding.vector_key("a" * 64),
            "weightsUrl": "http://127.0.0.1:9/never", "manifestUrl": "http://127.0.0.1:9/never?x=1",
            "vectorsUrl": "http://127.0.0.1:9/never", "imgsz": IMGSZ, "batch": 4}
    monkeypatch.setattr(encoding, "ENCODING", "another-encoding/2")  # a worker of another Lanner version
    with pytest.raises(WorkerFailed, match="not the ones the job wants"):
        worker.run(spec, tmp_path)
