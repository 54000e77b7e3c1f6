"""What an image's vector is (issue 31): the one function that turns pixels into vectors, which the embedding
worker runs and the quality benchmark measures, and the key its vectors are stored under.

The encoding (``ENCODING``), in order:

- the image is resized to the model's input size and standardised (its mean and standard deviation over all
  pixels), so a brightness or contrast change is undone before any layer sees it;
- only the backbone runs (no neck, no head: cheaper than a prediction), on the image and on its mirror image;
- every resolution of the backbone contributes (the last layer at each stride, and the first convolution, whose
  filters see colours): each channel is summarised by its standard deviation (how much it varies, which a
  uniform background adds nothing to, whatever its level) in two *soft* horizontal bands, top and bottom, each
  row weighted by its distance to the band's centre (``_summary``): where things are up or down survives a
  mirror image, and a crop's vertical shift moves the summary in proportion instead of flipping an object from
  one hard half to the other;
- the image's and the mirror's summaries are added (a flipped copy has the same vector by construction),
  square-rooted (power normalisation: no channel dominates) and L2-normalised per layer;
- a fixed random projection brings the result to ``DIM`` numbers, whatever the model's width.

Measured (``benchmarks/embeddings_quality.py``, docs/benchmarks.md "Embedding throughput and near-duplicates"):
an augmented copy (flip, 80-90 % crop at a random offset, hue/brightness/contrast jitter) is among its
original's 5 nearest of 2,050 images 88 % of the time with the demo-like weights and 92 % with random yolo11n
weights (86 % and 84 % with hard halves), 20 of 20 at 300 images, at 240-270 images/s at 128 px on two shared
cores (load 3). What fails is a crop's vertical shift on images whose identity is one object's colour, size and
place (a crop that moves content only sideways: 98 %, only vertically: 82 %, with hard halves); squares are then
confused with circles of a nearby colour. Tried on the same images and worse or no better (docs/benchmarks.md):
regional max pooling (R-MAC), GeM, global max, the whole and a centre crop averaged, a second input size added,
no bands, three or four bands, bands centred on the image's centre of activity, per-dataset PCA-whitening, other
powers than the square root. What closes the gap is learnt, not pooled: the copy-detection head
(``embeddings.head``), trained on edits of the dataset's images, through which similar-images indexes search
(96-98 % with the demo-like weights at 2,000 images).

A vector from this encoding means nothing next to one of another encoding of the same weights, so vectors are
stored under ``vector_key(weights digest)``, which names ``ENCODING``: changing the encoding changes its name, and
every dataset's vectors become stale (``embeddings.service.freshness``) instead of being mixed with new ones."""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import cv2
import numpy as np

ENCODING = "backbone-softbands-std-flip-rp512/2"
BANDS = 2
DIM = 512  # a vector's length, whatever the model: what the database and the index hold per image


def vector_key(weights_sha256: str) -> str:
    """What vectors are stored under (``ImageEmbedding.model_sha256``, ``EmbeddingJob.model_sha256``): a digest
    of the weights' digest and ``ENCODING``."""
    return hashlib.sha256(f"{ENCODING}:{weights_sha256}".encode("ascii")).hexdigest()


def _pixels(images: list[np.ndarray], imgsz: int) -> Any:
    """The images as one RGB batch, each resized to ``imgsz`` square and standardised over all its pixels."""
    import torch  # start-up cost: the server imports this module (vector_key) and never embeds

    batch = np.stack([cv2.resize(image, (imgsz, imgsz), interpolation=cv2.INTER_AREA) for image in images])
    x = torch.from_numpy(np.ascontiguousarray(batch[..., ::-1])).permute(0, 3, 1, 2).float()
    mean, std = x.mean((1, 2, 3), keepdim=True), x.std((1, 2, 3), keepdim=True)
    return (x - mean) / (std + 1.0) * 0.25 + 0.5  # about the 0-1 range the network was made for


def _backbone(net: Any) -> list[Any]:
    """The layers of the network before its neck (the ``backbone`` of its YAML definition)."""
    layers = list(net.model)
    length = len((getattr(net, "yaml", None) or {}).get("backbone") or layers[:-1])
    return layers[:length]


def _features(net: Any, x: Any) -> list[Any]:
    """Per image, the chosen layers' summaries (``_summary``): the first layer's, and the last one at each
    resolution (stride) of the backbone."""
    outputs: list[Any] = []
    for layer in _backbone(net):
        source = layer.f if isinstance(layer.f, int) else layer.f[0]
        x = layer(x if source == -1 else outputs[source])
        outputs.append(x)
    chosen = [0] + [i for i in range(len(outputs))
                    if i + 1 == len(outputs) or outputs[i + 1].shape[-2:] != outputs[i].shape[-2:]]
    return [_summary(outputs[i]) for i in sorted(set(chosen))]


def _summary(features: Any) -> Any:
    """Each channel's standard deviation in each of ``BANDS`` soft horizontal bands (top to bottom: where things
    are up or down survives a mirror image); n x (channels x bands). A row belongs to the bands on either side of
    it in proportion to its distance from their centres (tent weights, the bilinear spatial binning of SIFT's
    cells): content moved up or down by a crop shifts the summary in proportion, where hard halves flip a whole
    object from one half to the other once it crosses the middle."""
    import torch  # start-up cost: the server imports this module (vector_key) and never embeds

    height = features.shape[2]
    rows = (torch.arange(height, dtype=features.dtype, device=features.device) + 0.5) / height  # row centres
    centres = torch.linspace(0, 1, BANDS, dtype=features.dtype, device=features.device)
    weights = (1 - (rows[None, :] - centres[:, None]).abs() * (BANDS - 1)).clamp(min=0)  # bands x rows
    weights = weights / weights.sum(1, keepdim=True)
    mean = features.mean(3) @ weights.T  # n x channels x bands: each band's weighted mean
    square = (features * features).mean(3) @ weights.T
    return (square - mean * mean).clamp(min=0).sqrt().flatten(1)


@functools.lru_cache(maxsize=8)
def _projection(features: int) -> Any:
    """A fixed random projection (seeded Gaussian, the same on every machine for a given length) from the
    summaries' length (1,776 for yolo11n, over 4,000 for larger models) to ``DIM``: cosines are kept closely
    (Johnson-Lindenstrauss) while what is stored and searched per image stays 2 KB."""
    import torch  # start-up cost: the server imports this module (vector_key) and never embeds

    generator = torch.Generator().manual_seed(features)
    return torch.randn(features, DIM, generator=generator) / DIM ** 0.5


def flush_denormals() -> None:
    """For a process that embeds (the worker, the benchmark): random or weakly trained weights leave denormal
    numbers (below 1e-38) in the features, which the CPU computes on many times slower; flushed to zero, yolo11n
    with random weights went from 28-36 to 259 images/s at 128 px. A process-wide setting that torch cannot
    read back, so ``embed`` itself leaves it alone (a test process keeps IEEE arithmetic)."""
    import torch  # start-up cost: the server imports this module (vector_key) and never embeds

    torch.set_flush_denormal(True)


def embed(model: Any, images: list[np.ndarray], imgsz: int) -> list[np.ndarray | None]:
    """One L2-normalised float32 vector per BGR image (see the module's docstring) from an Ultralytics ``YOLO``
    model's PyTorch network; a batch the model fails on is retried image by image, so one bad image costs only
    itself (None)."""
    import torch  # start-up cost: the server imports this module (vector_key) and never embeds

    try:
        net = model.model.float().eval()
        device = next(net.parameters()).device
        x = _pixels(images, imgsz).to(device)
        with torch.inference_mode():
            parts = _features(net, torch.cat([x, x.flip(3)]))
        n = len(images)
        pooled = [torch.nn.functional.normalize((p[:n] + p[n:]).sqrt(), dim=1) for p in parts]
        joined = torch.cat(pooled, 1)
        vectors = torch.nn.functional.normalize(joined @ _projection(joined.shape[1]).to(joined.device), dim=1)
        vectors = vectors.cpu().numpy().astype(np.float32)
    except Exception:
        if len(images) == 1:
            return [None]
        return [embed(model, [image], imgsz)[0] for image in images]
    return list(vectors)
