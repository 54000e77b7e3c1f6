"""Dataset health checks: each issue code flags exactly the images it should."""

from __future__ import annotations

import json
import random

import pytest

from lanner.datasets.health.checks import ISSUE_CODES, HealthImage, HealthReport, check_dataset
from lanner.datasets.records import Label

BASE = 0x9A3C_5F01_E2D4_7B68
NO_OBJECTS: list[Label] = []


def image(id: str, *, split: str = "train", sha256: str | None = None, phash: int | None = None,
          width: int | None = 640, height: int | None = 480, corrupt: str | None = None,
          labels: list[Label] | None = NO_OBJECTS, class_id: int | None = None) -> HealthImage:
    """A clean labelled record unless told otherwise; phash defaults to one far from every other default."""
    if phash is None:
        phash = random.Random(id).getrandbits(64)
    return HealthImage(id=id, name=f"{id}.jpg", split=split, sha256=sha256 or f"sha-{id}", phash=phash, width=width,
                       height=height, corrupt=corrupt, labels=None if labels is None else list(labels),
                       class_id=class_id)


def box(cx: float, cy: float, w: float, h: float, class_id: int = 0) -> Label:
    return Label(class_id=class_id, box=(cx, cy, w, h))


def flip(value: int, *bits: int) -> int:
    for bit in bits:
        value ^= 1 << bit
    return value


def flagged(report: HealthReport, code: str) -> set[str]:
    assert code in ISSUE_CODES
    return {id for id, codes in report.issues.items() if code in codes}


def check(images: list[HealthImage], task: str = "detect", names: list[str] | None = None, **kw: float) -> HealthReport:
    return check_dataset(images, task, names or ["a", "b"], **kw)


def test_clean_dataset_has_no_issues() -> None:
    report = check([image(f"i{k}", labels=[box(0.5, 0.5, 0.2, 0.2, k % 2)]) for k in range(5)])
    assert report.issues == {}
    assert report.summary["images_with_issues"] == 0
    assert set(report.summary["issue_counts"]) == set(ISSUE_CODES)


def test_corrupt() -> None:
    report = check([image("ok"), image("bad", corrupt="truncated JPEG", phash=None, width=None, height=None)])
    assert flagged(report, "corrupt") == {"bad"}
    assert report.issues["bad"] == ["corrupt"]


def test_duplicate_groups() -> None:
    report = check([image("a", sha256="x"), image("b", sha256="x"), image("c", sha256="x"),
                    image("d", sha256="y"), image("e", sha256="z"), image("f", sha256="z")])
    assert flagged(report, "duplicate") == {"a", "b", "c", "e", "f"}
    assert flagged(report, "leakage") == set()
    groups = report.summary["groups"]["duplicate"]
    assert groups == {"count": 2, "images": 5, "groups": [["a", "b", "c"], ["e", "f"]]}


def test_leakage_flags_every_copy_across_splits() -> None:
    report = check([image("a", sha256="x", split="train"), image("b", sha256="x", split="val"),
                    image("c", sha256="x", split="train"), image("d", sha256="y", split="train"),
                    image("e", sha256="y", split="train"), image("f", sha256="z", split="test")])
    assert flagged(report, "leakage") == {"a", "b", "c"}
    assert flagged(report, "duplicate") == {"a", "b", "c", "d", "e"}
    assert report.summary["groups"]["leakage"]["groups"] == [["a", "b", "c"]]


def test_near_duplicate() -> None:
    images = [
        image("a", sha256="s1", phash=BASE),
        image("b", sha256="s2", phash=flip(BASE, 0, 20, 63)),          # 3 bits from a, spread over bands
        image("copy_of_a", sha256="s1", phash=BASE),                    # exact duplicate of a, near b
        image("c", sha256="s3", phash=flip(BASE, 1, 2, 3, 4, 5, 6)),    # 6 bits from a, 7 from b
        image("e", sha256="s4", phash=~BASE & (2**64 - 1)),             # two copies of one file: not "near"
        image("f", sha256="s4", phash=~BASE & (2**64 - 1)),
        image("g", sha256="s5", phash=None, corrupt="not an image"),
    ]
    report = check(images)
    assert flagged(report, "near_duplicate") == {"a", "b", "copy_of_a"}
    assert report.summary["groups"]["near_duplicate"]["groups"] == [["a", "b", "copy_of_a"]]
    assert flagged(check(images, near_duplicate_bits=2), "near_duplicate") == set()
    assert flagged(check(images, near_duplicate_bits=6), "near_duplicate") == {"a", "b", "copy_of_a", "c"}


def test_near_duplicate_threshold_is_inclusive_and_transitive() -> None:
    images = [image("a", phash=BASE), image("b", phash=flip(BASE, 10, 30, 50, 60)),   # 4 bits: in
              image("c", phash=flip(BASE, 10, 30, 50, 60, 5, 15, 25, 35)),            # 4 from b, 8 from a: chained
              image("d", phash=flip(BASE, 1, 11, 21, 31, 41))]                        # 5 bits from a: out
    report = check(images)
    assert flagged(report, "near_duplicate") == {"a", "b", "c"}
    assert report.summary["groups"]["near_duplicate"]["count"] == 1


def test_same_phash_different_files_are_near_duplicates() -> None:
    report = check([image("a", phash=BASE), image("b", phash=BASE), image("c")])
    assert flagged(report, "near_duplicate") == {"a", "b"}


def test_signed_phash_storage_is_understood() -> None:
    unsigned = BASE | 2**63
    report = check([image("a", phash=unsigned), image("b", phash=unsigned - 2**64)])  # same bits as a signed BIGINT
    assert flagged(report, "near_duplicate") == {"a", "b"}


def test_unlabeled_detect() -> None:
    report = check([image("none", labels=None), image("empty", labels=[]), image("one", labels=[box(.5, .5, .2, .2)])])
    assert flagged(report, "unlabeled") == {"none"}
    assert report.summary["labeled"] == 2


def test_unlabeled_classify() -> None:
    images = [image("cat", class_id=0, labels=None), image("dog", class_id=1, labels=None),
              image("unknown", class_id=None, labels=None)]
    report = check(images, "classify", ["cat", "dog"])
    assert flagged(report, "unlabeled") == {"unknown"}
    assert [c["count"] for c in report.summary["class_balance"]["classes"]] == [1, 1]


def test_unknown_class() -> None:
    report = check([image("ok", labels=[box(.5, .5, .2, .2, 1)]), image("high", labels=[box(.5, .5, .2, .2, 2)]),
                    image("negative", labels=[box(.5, .5, .2, .2, -1)])])
    assert flagged(report, "unknown_class") == {"high", "negative"}
    assert report.summary["class_balance"]["unknown_class_instances"] == 2
    assert report.summary["instances"] == 3
    classify = check([image("x", class_id=7, labels=None), image("y", class_id=0, labels=None)], "classify")
    assert flagged(classify, "unknown_class") == {"x"}


def test_box_outside() -> None:
    report = check([
        image("inside", labels=[box(0.5, 0.5, 0.2, 0.2)]),
        image("edge", labels=[box(0.9, 0.5, 0.2, 0.2)]),                   # right edge exactly 1.0
        image("within_epsilon", labels=[box(0.905, 0.5, 0.2, 0.2)]),       # 1.005: rounding, tolerated
        image("right", labels=[box(0.5, 0.5, 0.2, 0.2), box(0.95, 0.5, 0.2, 0.2)]),
        image("top", labels=[box(0.5, 0.05, 0.2, 0.2)]),
        image("polygon", labels=[Label(0, box=(0.1, 0.5, 0.2, 0.2), polygon=[-0.1, 0.4, 0.2, 0.4, 0.2, 0.6])]),
        image("obb", labels=[Label(0, box=(0.9, 0.5, 0.2, 0.2), obb=[0.8, 0.4, 1.2, 0.4, 1.2, 0.6, 0.8, 0.6])]),
    ])
    assert flagged(report, "box_outside") == {"right", "top", "polygon", "obb"}
    assert check([image("x", labels=[box(0.95, 0.5, 0.2, 0.2)])], box_epsilon=0.1).issues == {}


def test_tiny_box_and_tiny_object() -> None:
    report = check([
        image("normal", labels=[box(0.5, 0.5, 0.05, 0.05)]),               # 0.25 % of the image
        image("degenerate", labels=[box(0.5, 0.5, 0.001, 0.001)]),         # area 1e-6
        image("zero", labels=[box(0.5, 0.5, 0.0, 0.3)]),
        image("sliver", labels=[box(0.5, 0.5, 0.001, 0.5)]),               # 0.64 px wide at 640 px
        image("sliver_size_unknown", width=None, height=None, labels=[box(0.5, 0.5, 0.001, 0.5)]),
        image("small", labels=[box(0.5, 0.5, 0.02, 0.02)]),                # 0.04 %
        image("mixed", labels=[box(0.5, 0.5, 0.3, 0.3), box(0.2, 0.2, 0.02, 0.03)]),
        image("thin_obb", labels=[Label(0, box=(0.5, 0.5, 0.4, 0.4), obb=[0.3, 0.3, 0.7, 0.7, 0.7005, 0.6995,
                                                                          0.3005, 0.2995])]),
    ])
    assert flagged(report, "tiny_box") == {"degenerate", "zero", "sliver", "thin_obb"}
    assert flagged(report, "tiny_object") == {"small", "mixed", "sliver_size_unknown"}
    relaxed = check([image("small", labels=[box(0.5, 0.5, 0.02, 0.02)])], tiny_object_fraction=1e-4)
    assert relaxed.issues == {}


def test_size_outlier() -> None:
    images = [image(f"n{k}") for k in range(10)]                            # 640x480
    images += [image("double", width=1280, height=960),                     # 4x the pixels: on the limit, kept
               image("huge", width=2000, height=1500),                      # ~10x
               image("tiny", width=160, height=120),                        # 1/16
               image("panorama", width=640, height=100),                    # aspect 6.4 vs 1.33
               image("portrait", width=480, height=640),                    # aspect 0.75: within 2x
               image("broken", width=None, height=None, corrupt="x", phash=None)]
    assert flagged(check(images), "size_outlier") == {"huge", "tiny", "panorama"}


def test_size_outlier_is_robust_to_mixed_datasets() -> None:
    phone = [image(f"p{k}", width=4000, height=3000) for k in range(10)]
    webcam = [image(f"w{k}", width=640, height=480) for k in range(10)]
    assert flagged(check(phone + webcam), "size_outlier") == set()
    assert flagged(check(phone + webcam + [image("odd", width=20000, height=200)]), "size_outlier") == {"odd"}
    assert flagged(check([image("a"), image("b", width=6400, height=4800)]), "size_outlier") == set()  # too few


def test_class_imbalance() -> None:
    names = ["person", "car", "bike"]
    images = [image(f"p{k}", labels=[box(0.5, 0.5, 0.1, 0.1, 0)] * 10) for k in range(10)]
    images += [image(f"c{k}", labels=[box(0.5, 0.5, 0.1, 0.1, 1)]) for k in range(5)]
    balance = check(images, names=names).summary["class_balance"]
    assert [c["count"] for c in balance["classes"]] == [100, 5, 0]
    assert balance["ratio"] == 20.0
    assert balance["zero_instance_classes"] == [2]
    assert balance["imbalanced"] is True
    assert check(images, names=names).summary["dataset_issues"] == ["class_imbalance"]
    balanced = check(images[5:], names=names)
    assert balanced.summary["class_balance"]["ratio"] == 10.0
    assert balanced.summary["dataset_issues"] == []
    empty = check([image("x")], names=names).summary["class_balance"]
    assert (empty["ratio"], empty["imbalanced"], empty["zero_instance_classes"]) == (None, False, [0, 1, 2])


def test_summary_is_json_ready() -> None:
    images = [image("a", split="train", width=640, height=480, labels=[box(.5, .5, .2, .2)]),
              image("b", split="train", width=800, height=600, labels=None),
              image("c", split="val", width=1024, height=768, labels=[box(.5, .5, .2, .2, 1)]),
              image("d", split="test", width=None, height=None, corrupt="truncated", phash=None)]
    summary = check(images).summary
    assert json.loads(json.dumps(summary)) == summary
    assert summary["images"] == 4
    assert summary["splits"] == {"train": 2, "val": 1, "test": 1}
    assert summary["labeled"] == 3
    assert summary["instances"] == 2
    assert summary["sizes"] == {"count": 3, "width": {"median": 800.0, "min": 640, "max": 1024},
                                "height": {"median": 600.0, "min": 480, "max": 768}}
    assert summary["issue_counts"]["corrupt"] == 1 and summary["issue_counts"]["unlabeled"] == 1


def test_groups_are_capped() -> None:
    images = [image(f"i{g}-{k}", sha256=f"s{g}") for g in range(30) for k in range(2 + (g == 7) * 5)]
    groups = check(images, max_groups=5, max_group_ids=3).summary["groups"]["duplicate"]
    assert groups["count"] == 30 and groups["images"] == 65
    assert len(groups["groups"]) == 5
    assert groups["groups"][0] == ["i7-0", "i7-1", "i7-2"]                  # largest first, cut to 3 ids


def test_unknown_task() -> None:
    with pytest.raises(ValueError):
        check([], "tracking")


def test_many_records_run() -> None:
    """20k records with every kind of problem go through (speed is measured separately, not asserted)."""
    rng = random.Random(0)
    images = []
    for k in range(20_000):
        labels = [box(rng.random(), rng.random(), rng.random() * 0.3, rng.random() * 0.3, rng.randrange(3))
                  for _ in range(rng.randrange(6))]
        phash = flip(BASE, rng.randrange(64)) if k % 100 == 0 else rng.getrandbits(64)
        images.append(image(f"i{k}", split=rng.choice(["train", "train", "val"]), sha256=f"s{k % 19_000}",
                            phash=phash, width=rng.choice([640, 640, 1280]), height=480,
                            labels=None if k % 50 == 0 else labels))
    report = check_dataset(images, "detect", ["a", "b", "c"])
    counts = report.summary["issue_counts"]
    assert counts["duplicate"] == 2_000
    assert counts["near_duplicate"] == 200
    assert counts["unlabeled"] == 400
    assert counts["box_outside"] > 0 and counts["tiny_object"] > 0
    assert json.dumps(report.summary)
