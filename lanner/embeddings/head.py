"""The copy-detection head (issue 31): a small network, trained once per vector key (model and encoding), that
maps an image's stored vector (``encoding.embed``) to one in which an edited copy of the image lies next to it.

Why: the encoding's vectors come from a detector's backbone, trained (or, for a new model, not trained at all)
to find objects, not to recognise the same picture after a flip, a crop and a colour change. On 2,000 synthetic
images with 200 such copies, a copy was among its original's 5 nearest 74-80 % of the time, whatever pooling of
the backbone was tried (docs/benchmarks.md). The head learns, from the dataset's own images, which directions of
the vector such edits move and which they leave alone: each of up to ``IMAGES`` images is edited ``VIEWS`` times
at random (``augment``: a flip, a crop of 55-100 % of the area, hue, saturation, brightness and contrast), each
edit embedded as the worker embeds images, and the head is trained so that two edits of one image are nearer
each other than any edit of another image (the contrastive loss of SimCLR, with the KoLeo spreading term of
SSCD, Pizzi et al. 2022, the self-supervised copy-detection descriptor). No label and no download is needed:
the same self-supervision that copy-detection models are trained with, on the user's images, in about a minute.

The worker trains it (``views``, ``train``: torch) after the job's vectors are delivered, for a vector key that
has none yet; the server stores it (``EmbeddingHead``) and applies it (``apply``: numpy, no torch in the server)
to every vector a similar-images index holds and to each query. Stored vectors stay the encoding's, so a head
can be trained again (a bigger sample) without embedding anything again. Serialised as an ``.npz`` of arrays
(``to_bytes``), never a pickle."""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Callable

import cv2
import numpy as np

IMAGES = 2000  # at most this many of the dataset's images are edited: 16,000 embeddings, once per vector key
VIEWS = 8
OUT = 128  # the head's vector length
HIDDEN = 1024
EPOCHS = 60
BATCH = 256
TEMPERATURE = 0.1
KOLEO = 0.1
HEAD_WEIGHT = 0.7  # of the head's cosine in the similarity an index ranks by (``apply``)
ARRAYS = ("mean", "scale", "w1", "b1", "w2", "b2")


def augment(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """An edited copy of a BGR image, as people edit pictures: mirrored half the time, cropped to 55-100 % of its
    area (aspect 3:4 to 4:3) and resized back, its hue turned by up to 20 degrees, its saturation, contrast and
    brightness changed by up to 30 %, 25 % and 25 levels."""
    height, width = image.shape[:2]
    out = image[:, ::-1] if rng.random() < 0.5 else image
    area, aspect = rng.uniform(0.55, 1.0), float(np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3))))
    crop_w = max(1, min(width, round(width * np.sqrt(area * aspect))))
    crop_h = max(1, min(height, round(height * np.sqrt(area / aspect))))
    y0, x0 = int(rng.integers(0, height - crop_h + 1)), int(rng.integers(0, width - crop_w + 1))
    out = cv2.resize(np.ascontiguousarray(out[y0:y0 + crop_h, x0:x0 + crop_w]), (width, height))
    hsv = cv2.cvtColor(out, cv2.COLOR_BGR2HSV).astype(np.float32)
    hsv[..., 0] = (hsv[..., 0] + rng.uniform(-10, 10)) % 180
    hsv[..., 1] = np.clip(hsv[..., 1] * rng.uniform(0.7, 1.3), 0, 255)
    out = cv2.cvtColor(hsv.astype(np.uint8), cv2.COLOR_HSV2BGR).astype(np.float32)
    return np.clip(out * rng.uniform(0.75, 1.25) + rng.uniform(-25, 25), 0, 255).astype(np.uint8)


def views(images: list[np.ndarray], embed: Callable[[list[np.ndarray]], list[np.ndarray | None]], *,
          seed: int = 0, batch: int = 32) -> np.ndarray:
    """``VIEWS`` embedded edits of each image: n x VIEWS x dim, the images ``embed`` failed on left out. Edited a
    batch at a time: only one batch's edits are held at once."""
    rng = np.random.default_rng(seed)
    kept: list[np.ndarray] = []
    for start in range(0, len(images), batch):
        chunk = images[start:start + batch]
        per_view = [embed([augment(image, rng) for image in chunk]) for _ in range(VIEWS)]
        kept.extend(np.stack([view[i] for view in per_view]) for i in range(len(chunk))
                    if all(view[i] is not None for view in per_view))
    return np.stack(kept) if kept else np.zeros((0, VIEWS, 0), np.float32)


def train(edits: np.ndarray, *, seed: int = 0, epochs: int = EPOCHS) -> dict[str, np.ndarray]:
    """The head's arrays, trained on ``edits`` (``views``' n x VIEWS x dim): a two-layer network (standardised
    input, ``HIDDEN`` units with batch normalisation and ReLU, ``OUT`` outputs) whose outputs of two edits of one
    image are pulled together and pushed from every other image's in the batch (InfoNCE at ``TEMPERATURE``),
    plus KoLeo (the log distance to each output's nearest other, maximised) so the vectors spread over the
    sphere instead of crowding. Seeded: the same edits give the same head on one machine."""
    import torch  # the worker's: the server only applies a head (numpy)

    torch.manual_seed(seed)
    count, view_count, dim = edits.shape
    flat = torch.from_numpy(np.ascontiguousarray(edits, dtype=np.float32))
    mean, scale = flat.reshape(-1, dim).mean(0), flat.reshape(-1, dim).std(0) + 1e-6
    data = (flat - mean) / scale
    net = torch.nn.Sequential(torch.nn.Linear(dim, HIDDEN), torch.nn.BatchNorm1d(HIDDEN), torch.nn.ReLU(),
                              torch.nn.Linear(HIDDEN, OUT))
    optimiser = torch.optim.AdamW(net.parameters(), 1e-3, weight_decay=1e-4)
    normalise, cross_entropy = torch.nn.functional.normalize, torch.nn.functional.cross_entropy
    net.train()
    for _ in range(epochs):
        order = torch.randperm(count)
        for start in range(0, count - 1, BATCH):
            rows = order[start:start + BATCH]
            if len(rows) < 2:
                continue
            first = torch.randint(0, view_count, (len(rows),))
            second = (first + torch.randint(1, view_count, (len(rows),))) % view_count
            a, b = normalise(net(data[rows, first]), dim=1), normalise(net(data[rows, second]), dim=1)
            logits, target = a @ b.T / TEMPERATURE, torch.arange(len(rows))
            loss = (cross_entropy(logits, target) + cross_entropy(logits.T, target)) / 2
            nearest = (torch.cdist(a, a) + torch.eye(len(rows)) * 4).min(1).values
            loss = loss - KOLEO * torch.log(nearest + 1e-8).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    first_layer, norm, _, second_layer = net
    bn_scale = norm.weight / torch.sqrt(norm.running_var + norm.eps)  # batch norm folded into the first layer
    with torch.no_grad():
        arrays = {"mean": mean, "scale": scale, "w1": first_layer.weight.T * bn_scale,
                  "b1": (first_layer.bias - norm.running_mean) * bn_scale + norm.bias,
                  "w2": second_layer.weight.T, "b2": second_layer.bias}
        return {name: value.detach().numpy().astype(np.float32) for name, value in arrays.items()}


def apply(arrays: dict[str, np.ndarray], matrix: np.ndarray) -> np.ndarray:
    """What an index holds for stored vectors (n x dim), in numpy: the head's output and the stored vector
    (centred on the edits' mean), each L2-normalised, weighted ``HEAD_WEIGHT`` and 1 - ``HEAD_WEIGHT`` in their
    cosine (n x (dim + OUT), L2-normalised float32). The stored vector keeps what the head, trained on a few
    thousand edits, did not learn to keep: at 2,000 synthetic images with 200 copies the sum found 94.5-97.5 %
    where the head alone found 93.5-95 % (docs/benchmarks.md)."""
    x = np.asarray(matrix, dtype=np.float32).reshape(-1, arrays["mean"].shape[0]) - arrays["mean"]
    hidden = np.maximum((x / arrays["scale"]) @ arrays["w1"] + arrays["b1"], 0)
    out = _unit(hidden @ arrays["w2"] + arrays["b2"]) * np.sqrt(HEAD_WEIGHT)
    return np.hstack([_unit(x) * np.sqrt(1 - HEAD_WEIGHT), out]).astype(np.float32)


def _unit(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


def to_bytes(arrays: dict[str, np.ndarray], images: int) -> bytes:
    """The head as an ``.npz``, with how many images it was trained on."""
    out = io.BytesIO()
    np.savez(out, images=np.int64(images), **{name: arrays[name] for name in ARRAYS})
    return out.getvalue()


def images_of(data: bytes) -> int:
    """How many images a serialised head was trained on (0 when it does not say)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as saved:
        return int(saved["images"]) if "images" in saved.files else 0


def from_bytes(data: bytes) -> dict[str, np.ndarray]:
    """The arrays of a serialised head; ValueError when ``data`` is not one (shapes checked against each other)."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as saved:
            arrays = {name: np.asarray(saved[name], dtype=np.float32) for name in ARRAYS}
    except (KeyError, OSError, EOFError, ValueError, zipfile.BadZipFile) as exc:  # ValueError: a pickle refused
        raise ValueError(f"not a head: {type(exc).__name__}") from None
    dim, hidden = arrays["w1"].shape if arrays["w1"].ndim == 2 else (0, 0)
    if (not 0 < dim <= 4096 or not 0 < hidden <= 4096 or arrays["mean"].shape != (dim,)
            or arrays["scale"].shape != (dim,) or arrays["b1"].shape != (hidden,) or arrays["w2"].ndim != 2
            or arrays["w2"].shape[0] != hidden or not 0 < arrays["w2"].shape[1] <= 4096
            or arrays["b2"].shape != (arrays["w2"].shape[1],)
            or not all(np.isfinite(a).all() for a in arrays.values()) or (arrays["scale"] <= 0).any()):
        raise ValueError("not a head: its arrays' shapes do not fit together")
    return arrays


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
