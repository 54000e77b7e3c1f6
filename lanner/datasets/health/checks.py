"""Dataset health checks: pure functions over plain records, so they run anywhere (service, CLI, tests) without a DB.

Per-image issue codes (``ISSUE_CODES``; an image gets each code at most once):

- ``corrupt``         the image failed probing (``HealthImage.corrupt`` holds the reason).
- ``duplicate``       another image in the dataset has the same sha256 (any split).
- ``near_duplicate``  another image's phash is within ``near_duplicate_bits`` (Hamming) but its sha256 differs.
- ``leakage``         the same sha256 is in more than one split; every copy is flagged.
- ``unlabeled``       ``labels is None`` (detect/segment/pose/obb) or ``class_id is None`` (classify).
- ``unknown_class``   a label's class id is not an index of ``class_names``.
- ``box_outside``     a box edge, polygon point or OBB corner lies outside [0, 1] by more than ``box_epsilon``.
- ``tiny_box``        degenerate object: area < ``tiny_box_area`` of the image or a side < ``tiny_box_px`` pixels.
- ``tiny_object``     not degenerate, but area < ``tiny_object_fraction`` of the image.
- ``size_outlier``    pixel count or aspect ratio far from the dataset's median (rule in ``_size_outliers``).

Corrupt images are not special-cased: their sha256 and labels are still checked (the fix is the same file).
Dataset-level findings go to ``summary["dataset_issues"]``: ``class_imbalance`` when the ratio of the largest to
the smallest non-empty class exceeds ``imbalance_ratio``.

Near-duplicates are found without comparing all pairs (multi-index hashing): the 64-bit phash is cut into
``k + 1`` bands for a threshold of ``k`` bits. Two hashes within ``k`` bits differ in at most ``k`` bands, so by
pigeonhole they agree exactly on at least one band; only hashes sharing a band value are compared. With the default
k = 4 the bands are 12-13 bits wide, so random hashes share a bucket with ~n/8192 others: about 5 * n^2 / 16384
comparisons in vectorised NumPy, well under a second for 100k distinct images. Identical hashes are merged first, and
buckets over 256 hashes (e.g. thousands of frames from a static camera) use a breadth-first search that compares each
hash only with those not yet reached, so dense clusters stay linear.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from lanner.datasets.records import SPLITS, TASKS, Label

ISSUE_CODES = ("corrupt", "duplicate", "near_duplicate", "leakage", "unlabeled", "unknown_class", "box_outside",
               "tiny_box", "tiny_object", "size_outlier")
_MASK64 = (1 << 64) - 1
_MODIFIED_Z = 3.5 / 0.6745      # Iglewicz-Hoaglin: |x - median| > 3.5 * MAD / 0.6745 is an outlier
_MIN_SIZED_FOR_OUTLIERS = 3     # below this a "median size" means nothing
_BIG_BUCKET = 256               # near-duplicate buckets larger than this are searched, not compared pairwise


@dataclass
class HealthImage:
    """One image as the checks see it; build it from storage rows or from a fresh import."""

    id: str
    name: str
    split: str
    sha256: str
    phash: int | None
    width: int | None
    height: int | None
    corrupt: str | None                 # reason if the image failed probing
    labels: list[Label] | None          # None = unlabelled; classification datasets pass None and use class_id
    class_id: int | None = None


@dataclass
class HealthReport:
    issues: dict[str, list[str]] = field(default_factory=dict)   # image id -> issue codes (only images with issues)
    summary: dict = field(default_factory=dict)                   # JSON-ready; see check_dataset


def check_dataset(images: list[HealthImage], task: str, class_names: list[str], *,
                  near_duplicate_bits: int = 4, box_epsilon: float = 0.01, tiny_box_area: float = 1e-5,
                  tiny_box_px: float = 1.0, tiny_object_fraction: float = 1e-3, size_outlier_area_factor: float = 4.0,
                  size_outlier_aspect_factor: float = 2.0, imbalance_ratio: float = 10.0, max_groups: int = 50,
                  max_group_ids: int = 20) -> HealthReport:
    """Per-image issues and a JSON-ready summary of a whole dataset.

    Defaults: ``box_epsilon`` 0.01 is Ultralytics' own 1 % label tolerance; ``tiny_box_area`` 1e-5 of the image
    (4 px^2 at 640x640) or a side under 1 px is degenerate; ``tiny_object_fraction`` 1e-3 is 0.1 % of the image
    (~20x20 px at 640x640). Groups in the summary are the largest ``max_groups``, each cut to ``max_group_ids`` ids.

    Summary keys: ``images``, ``splits`` (count per split), ``labeled``, ``instances``, ``issue_counts`` (images per
    code, every code present), ``images_with_issues``, ``dataset_issues``, ``class_balance``, ``sizes``, ``groups``
    (``duplicate`` / ``near_duplicate`` / ``leakage``: ``{"count", "images", "groups": [[ids]]}``).
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    if not 0 <= near_duplicate_bits <= 31:
        raise ValueError("near_duplicate_bits must be between 0 and 31")
    flagged: dict[str, set[int]] = {code: set() for code in ISSUE_CODES}
    flagged["corrupt"] = {i for i, im in enumerate(images) if im.corrupt}

    sha_groups = _sha_groups(images)
    dup_groups = [g for g in sha_groups if len(g) > 1]
    leak_groups = [g for g in dup_groups if len({images[i].split for i in g}) > 1]
    flagged["duplicate"] = {i for g in dup_groups for i in g}
    flagged["leakage"] = {i for g in leak_groups for i in g}
    near_groups = _near_duplicate_groups(images, near_duplicate_bits)
    flagged["near_duplicate"] = {i for g in near_groups for i in g}

    if task == "classify":
        flagged["unlabeled"] = {i for i, im in enumerate(images) if im.class_id is None}
        class_ids = np.array([im.class_id for im in images if im.class_id is not None], dtype=np.int64)
        flagged["unknown_class"] = {i for i, im in enumerate(images)
                                    if im.class_id is not None and not 0 <= im.class_id < len(class_names)}
    else:
        flagged["unlabeled"] = {i for i, im in enumerate(images) if im.labels is None}
        class_ids = _check_labels(images, len(class_names), flagged, box_epsilon=box_epsilon,
                                  tiny_box_area=tiny_box_area, tiny_box_px=tiny_box_px,
                                  tiny_object_fraction=tiny_object_fraction)
    flagged["size_outlier"] = _size_outliers(images, size_outlier_area_factor, size_outlier_aspect_factor)

    issues: dict[str, list[str]] = {}
    for code in ISSUE_CODES:
        for i in sorted(flagged[code]):
            issues.setdefault(images[i].id, []).append(code)
    balance = _class_balance(class_ids, class_names, imbalance_ratio)
    splits = Counter(im.split for im in images)
    summary = {
        "images": len(images),
        "splits": {**{s: splits.get(s, 0) for s in SPLITS}, **{s: n for s, n in splits.items() if s not in SPLITS}},
        "labeled": len(images) - len(flagged["unlabeled"]),
        "instances": int(class_ids.size),
        "issue_counts": {code: len(flagged[code]) for code in ISSUE_CODES},
        "images_with_issues": len(issues),
        "dataset_issues": ["class_imbalance"] if balance["imbalanced"] else [],
        "class_balance": balance,
        "sizes": _size_stats(images),
        "groups": {name: _group_summary(groups, images, max_groups, max_group_ids)
                   for name, groups in (("duplicate", dup_groups), ("near_duplicate", near_groups),
                                        ("leakage", leak_groups))},
    }
    return HealthReport(issues=issues, summary=summary)


# --- duplicates -----------------------------------------------------------------------------------------------------


def _sha_groups(images: list[HealthImage]) -> list[list[int]]:
    by_sha: dict[str, list[int]] = defaultdict(list)
    for i, im in enumerate(images):
        if im.sha256:
            by_sha[im.sha256].append(i)
    return list(by_sha.values())


def _near_duplicate_groups(images: list[HealthImage], bits: int) -> list[list[int]]:
    """Connected components of "phash within ``bits``" that hold at least two different files (sha256)."""
    members = [i for i, im in enumerate(images) if im.phash is not None]
    if len(members) < 2:
        return []
    hashes = np.array([images[i].phash & _MASK64 for i in members], dtype=np.uint64)
    unique, node_of = np.unique(hashes, return_inverse=True)   # identical hashes are one node: no pairs to compare
    left, right = _close_pairs(unique, bits)
    component = _components(len(unique), left, right)[node_of.ravel()]
    by_component: dict[int, list[int]] = defaultdict(list)
    for i, c in zip(members, component.tolist(), strict=True):
        by_component[c].append(i)
    return [g for g in by_component.values() if len({images[i].sha256 for i in g}) > 1]


def _close_pairs(values: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs of distinct ``values`` (uint64) within ``bits`` Hamming distance, via pigeonhole banding."""
    n_bands = bits + 1
    edges = [round(b * 64 / n_bands) for b in range(n_bands + 1)]
    found_left: list[np.ndarray] = []
    found_right: list[np.ndarray] = []
    index = np.arange(values.size)
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        keys = (values >> np.uint64(lo)) & np.uint64((1 << (hi - lo)) - 1)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        # for each sorted position, the end of its run of equal keys (a bucket)
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        lengths = np.diff(np.r_[starts, values.size])
        run_end = np.repeat(np.r_[starts[1:], values.size], lengths)
        for start in starts[lengths > _BIG_BUCKET].tolist():  # dense buckets: a search that stops early
            members = order[start:run_end[start]]
            a, b = _bucket_edges(values, members, bits)
            found_left.append(a)
            found_right.append(b)
        small = np.repeat(lengths <= _BIG_BUCKET, lengths)
        active = index[(run_end - index > 1) & small]
        offset = 1
        while active.size:  # compare every position with the one `offset` further in its bucket
            a, b = order[active], order[active + offset]
            close = np.bitwise_count(values[a] ^ values[b]) <= bits
            found_left.append(a[close])
            found_right.append(b[close])
            offset += 1
            active = active[run_end[active] - active > offset]
    if not found_left:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(found_left), np.concatenate(found_right)


def _bucket_edges(values: np.ndarray, members: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Spanning edges of the "within ``bits``" graph inside one big bucket, by breadth-first search.

    Each reached member is compared only with members not reached yet, so a bucket of many near-identical frames
    (a static camera) costs O(m) comparisons per component instead of all m^2/2 pairs.
    """
    remaining = members
    left: list[np.ndarray] = []
    right: list[np.ndarray] = []
    while remaining.size:
        frontier = [int(remaining[0])]
        remaining = remaining[1:]
        while frontier and remaining.size:
            source = frontier.pop()
            close = np.bitwise_count(values[remaining] ^ values[source]) <= bits
            if close.any():
                found = remaining[close]
                left.append(np.full(found.size, source))
                right.append(found)
                remaining = remaining[~close]
                frontier.extend(found.tolist())
    if not left:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(left), np.concatenate(right)


def _components(n: int, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Component label per node for an edge list; vectorised hooking + pointer jumping (no Python loop per edge)."""
    parent = np.arange(n)
    while left.size:
        ra, rb = _roots(parent, left), _roots(parent, right)
        differ = ra != rb
        if not differ.any():
            break
        left, right = left[differ], right[differ]
        np.minimum.at(parent, np.maximum(ra[differ], rb[differ]), np.minimum(ra[differ], rb[differ]))
    return _roots(parent, np.arange(n))


def _roots(parent: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    while True:
        up = parent[parent]
        if np.array_equal(up, parent):
            return parent[nodes]
        parent[:] = up


# --- labels ---------------------------------------------------------------------------------------------------------


def _check_labels(images: list[HealthImage], num_classes: int, flagged: dict[str, set[int]], *, box_epsilon: float,
                  tiny_box_area: float, tiny_box_px: float, tiny_object_fraction: float) -> np.ndarray:
    """Flag label problems; returns the class id of every instance (for counts and class balance)."""
    owners: list[int] = []
    classes: list[int] = []
    rows: list[tuple[float, ...]] = []
    for i, im in enumerate(images):
        if not im.labels:
            continue
        for label in im.labels:
            owners.append(i)
            classes.append(label.class_id)
            rows.append(_geometry(label))
    class_ids = np.array(classes, dtype=np.int64)
    if not rows:
        return class_ids
    owner = np.array(owners, dtype=np.int64)
    x0, y0, x1, y1, e1x, e1y, e2x, e2y, area = np.array(rows, dtype=np.float64).T
    width = np.array([im.width or np.nan for im in images], dtype=np.float64)[owner]
    height = np.array([im.height or np.nan for im in images], dtype=np.float64)[owner]
    side_px = np.fmin(np.hypot(e1x * width, e1y * height), np.hypot(e2x * width, e2y * height))  # nan: size unknown
    with np.errstate(invalid="ignore"):
        outside = (x0 < -box_epsilon) | (y0 < -box_epsilon) | (x1 > 1 + box_epsilon) | (y1 > 1 + box_epsilon)
        tiny = (area < tiny_box_area) | (side_px < tiny_box_px)
        small = ~tiny & (area < tiny_object_fraction)
    unknown = (class_ids < 0) | (class_ids >= num_classes)
    for code, mask in (("box_outside", outside), ("tiny_box", tiny), ("tiny_object", small),
                       ("unknown_class", unknown)):
        flagged[code] = set(np.unique(owner[mask]).tolist())
    return class_ids


def _geometry(label: Label) -> tuple[float, ...]:
    """Extent (x0, y0, x1, y1), two edge vectors and area, all normalised; NaN when the label has no shape."""
    if label.obb is not None and len(label.obb) >= 8:
        xs, ys = label.obb[0:8:2], label.obb[1:8:2]
        shoelace = sum(xs[k] * ys[(k + 1) % 4] - xs[(k + 1) % 4] * ys[k] for k in range(4))
        return (min(xs), min(ys), max(xs), max(ys), xs[1] - xs[0], ys[1] - ys[0], xs[2] - xs[1], ys[2] - ys[1],
                abs(shoelace) / 2)
    if label.polygon is not None and len(label.polygon) >= 6:
        xs, ys = label.polygon[0::2], label.polygon[1::2]
        x0, y0, x1, y1 = min(xs), min(ys), max(xs), max(ys)
        return x0, y0, x1, y1, x1 - x0, 0.0, 0.0, y1 - y0, (x1 - x0) * (y1 - y0)
    if label.box is not None:
        cx, cy, w, h = label.box
        return cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, w, 0.0, 0.0, h, w * h
    return (math.nan,) * 9


# --- sizes ----------------------------------------------------------------------------------------------------------


def _sized(images: list[HealthImage]) -> list[int]:
    return [i for i, im in enumerate(images) if im.width and im.height and im.width > 0 and im.height > 0]


def _size_outliers(images: list[HealthImage], area_factor: float, aspect_factor: float) -> set[int]:
    """Images whose pixel count or aspect ratio is far from the dataset's median.

    Both are compared in log space (so 4x larger and 4x smaller are equally far). An image is an outlier when
    ``|log(x) - median| > max(log(factor), 3.5 * MAD / 0.6745)``: the fixed floor (area 4x, aspect 2x by default)
    keeps uniform datasets (MAD = 0) from flagging tiny differences, and the modified z-score (Iglewicz-Hoaglin)
    widens the band for datasets that legitimately mix sizes, so only the few odd ones out are flagged.
    Needs at least 3 sized images.
    """
    sized = _sized(images)
    if len(sized) < _MIN_SIZED_FOR_OUTLIERS:
        return set()
    w = np.array([images[i].width for i in sized], dtype=np.float64)
    h = np.array([images[i].height for i in sized], dtype=np.float64)
    out = np.zeros(len(sized), dtype=bool)
    for values, factor in ((np.log(w * h), area_factor), (np.log(w / h), aspect_factor)):
        deviation = np.abs(values - np.median(values))
        limit = max(math.log(factor), _MODIFIED_Z * float(np.median(deviation)))
        out |= deviation > limit + 1e-9
    return {sized[k] for k in np.flatnonzero(out).tolist()}


def _size_stats(images: list[HealthImage]) -> dict:
    sized = _sized(images)
    stats: dict = {"count": len(sized)}
    for key in ("width", "height"):
        values = np.array([getattr(images[i], key) for i in sized], dtype=np.int64)
        stats[key] = ({"median": float(np.median(values)), "min": int(values.min()), "max": int(values.max())}
                      if values.size else {"median": None, "min": None, "max": None})
    return stats


# --- summary --------------------------------------------------------------------------------------------------------


def _class_balance(class_ids: np.ndarray, class_names: list[str], threshold: float) -> dict:
    """Instances per class; ratio = largest / smallest over classes that have any; flagged above ``threshold``."""
    known = class_ids[(class_ids >= 0) & (class_ids < len(class_names))]
    counts = np.bincount(known, minlength=len(class_names))
    present = counts[counts > 0]
    ratio = float(present.max() / present.min()) if present.size else None
    return {
        "classes": [{"id": k, "name": name, "count": int(counts[k])} for k, name in enumerate(class_names)],
        "ratio": ratio,
        "zero_instance_classes": [k for k in range(len(class_names)) if counts[k] == 0],
        "unknown_class_instances": int(class_ids.size - known.size),
        "threshold": threshold,
        "imbalanced": ratio is not None and ratio > threshold,
    }


def _group_summary(groups: list[list[int]], images: list[HealthImage], max_groups: int, max_ids: int) -> dict:
    ordered = sorted(groups, key=lambda g: (-len(g), g[0]))
    return {
        "count": len(groups),
        "images": sum(len(g) for g in groups),
        "groups": [[images[i].id for i in g[:max_ids]] for g in ordered[:max_groups]],
    }
