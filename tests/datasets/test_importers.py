"""Importers: safe unpacking, and each upload format read into an ImportPlan (data made here, no downloads)."""

from __future__ import annotations

import io
import json
import os
import stat
import struct
import tarfile
import zipfile
from pathlib import Path

import cv2
import numpy as np
import pytest

from lanner.datasets.imports.formats import extract_archive, plan_import
from lanner.datasets.records import ImportLimits, ImportPlan, ImportRefused

JPG = cv2.imencode(".jpg", np.full((24, 32, 3), 127, np.uint8))[1].tobytes()
LIMITS = ImportLimits()


def put(path: Path, data: bytes | str = JPG) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def make_zip(path: Path, members: dict[str, bytes | str], compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def zip_folder(folder: Path, path: Path) -> Path:
    """Like the ``ul`` CLI's package_dataset: members relative to the dataset root."""
    return make_zip(path, {f.relative_to(folder).as_posix(): f.read_bytes() for f in sorted(folder.rglob("*"))
                           if f.is_file()})


def by_name(plan: ImportPlan) -> dict[str, object]:
    return {f"{im.split}/{im.name}": im for im in plan.images}


def issue_names(plan: ImportPlan) -> list[str]:
    return [issue.name for issue in plan.issues]


# ---------------------------------------------------------------- archives


def test_extract_zip_returns_wrapper_folder_and_skips_junk(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "up.zip", {
        "ds/data.yaml": "names: [cat]\ntrain: images/train\n",
        "ds/images/train/a.jpg": JPG,
        "ds/.DS_Store": b"x",
        "ds/images/train/.hidden.jpg": JPG,
        "__MACOSX/ds/images/train/._a.jpg": b"x",
    })
    root = extract_archive(archive, tmp_path / "out", LIMITS)
    assert root == tmp_path / "out" / "ds"
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file()) \
        == ["ds/data.yaml", "ds/images/train/a.jpg"]


def test_extract_keeps_a_lone_split_folder_as_layout(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "up.zip", {"train/cat/a.jpg": JPG, "train/dog/b.jpg": JPG})
    assert extract_archive(archive, tmp_path / "out", LIMITS) == tmp_path / "out"


def test_extract_tar_gz(tmp_path: Path) -> None:
    put(tmp_path / "src" / "pics" / "a.jpg")
    put(tmp_path / "src" / "pics" / "sub" / "b.png", b"png")
    with tarfile.open(tmp_path / "up.tar.gz", "w:gz") as tf:
        tf.add(tmp_path / "src" / "pics", arcname="pics")
    root = extract_archive(tmp_path / "up.tar.gz", tmp_path / "out", LIMITS)
    assert root == tmp_path / "out" / "pics"
    assert (root / "a.jpg").read_bytes() == JPG and (root / "sub" / "b.png").read_bytes() == b"png"


def test_extract_zip_with_windows_separators(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "up.zip", {"ds\\images\\a.jpg": JPG, "ds\\b.jpg": JPG})
    root = extract_archive(archive, tmp_path / "out", LIMITS)
    assert (root / "images" / "a.jpg").read_bytes() == JPG and (root / "b.jpg").is_file()


@pytest.mark.parametrize("name", ["../evil.txt", "ok/../../evil.txt", "..\\evil.txt", "/tmp/evil.txt", "C:/evil.txt"])
def test_zip_refuses_paths_outside(tmp_path: Path, name: str) -> None:
    archive = make_zip(tmp_path / "up.zip", {"fine.txt": "x", name: "evil"})
    with pytest.raises(ImportRefused, match="outside|absolute"):
        extract_archive(archive, tmp_path / "a" / "b" / "out", LIMITS)
    assert not list(tmp_path.rglob("evil.txt")) and not (tmp_path / "a" / "b" / "out" / "fine.txt").exists()


@pytest.mark.parametrize("name", ["../evil.txt", "/tmp/evil.txt"])
def test_tar_refuses_paths_outside(tmp_path: Path, name: str) -> None:
    with tarfile.open(tmp_path / "up.tar", "w") as tf:
        info = tarfile.TarInfo(name)
        info.size = 4
        tf.addfile(info, io.BytesIO(b"evil"))
    with pytest.raises(ImportRefused, match="outside|absolute"):
        extract_archive(tmp_path / "up.tar", tmp_path / "a" / "out", LIMITS)
    assert not list(tmp_path.rglob("evil.txt"))


def test_zip_refuses_symlinks(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "up.zip", "w") as zf:
        info = zipfile.ZipInfo("images/link.jpg")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(ImportRefused, match="images/link.jpg is a symbolic link"):
        extract_archive(tmp_path / "up.zip", tmp_path / "out", LIMITS)


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE])
def test_tar_refuses_links_and_devices(tmp_path: Path, kind: bytes) -> None:
    with tarfile.open(tmp_path / "up.tar", "w") as tf:
        info = tarfile.TarInfo("ds/thing")
        info.type, info.linkname = kind, "/etc/passwd"
        tf.addfile(info)
    with pytest.raises(ImportRefused, match="ds/thing is a (link|device)"):
        extract_archive(tmp_path / "up.tar", tmp_path / "out", LIMITS)
    assert not (tmp_path / "out" / "ds" / "thing").exists()


def test_refuses_total_size_over_limit(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "up.zip", {"a.bin": os.urandom(600), "b.bin": os.urandom(600)})
    with pytest.raises(ImportRefused, match="more than 1000 bytes"):
        extract_archive(archive, tmp_path / "out", ImportLimits(max_total_bytes=1000))


def test_refuses_too_many_files(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "up.zip", {f"{i}.txt": "x" for i in range(3)})
    with pytest.raises(ImportRefused, match="more than 2 files"):
        extract_archive(archive, tmp_path / "out", ImportLimits(max_files=2))


def test_refuses_file_over_limit(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "up.zip", {"big.bin": os.urandom(200)})
    with pytest.raises(ImportRefused, match="big.bin unpacks to 200 bytes"):
        extract_archive(archive, tmp_path / "out", ImportLimits(max_file_bytes=100))


def test_refuses_high_compression_ratio(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "up.zip", {"ok.bin": os.urandom(1_500_000), "bomb.bin": bytes(2_000_000)})
    with pytest.raises(ImportRefused, match="bomb.bin is compressed more than 50:1"):
        extract_archive(archive, tmp_path / "out", ImportLimits(max_ratio=50))


def test_a_small_highly_compressible_file_is_not_a_bomb(tmp_path: Path) -> None:
    # A plain-colour image compresses far beyond any ratio limit; below the size floor that is harmless.
    archive = make_zip(tmp_path / "up.zip", {"noise.bin": os.urandom(200_000), "flat.bmp": bytes(300_000)})
    root = extract_archive(archive, tmp_path / "out", ImportLimits(max_ratio=50))
    assert (root / "flat.bmp").stat().st_size == 300_000


def test_refuses_tar_gz_bomb_by_overall_ratio(tmp_path: Path) -> None:
    with tarfile.open(tmp_path / "up.tar.gz", "w:gz") as tf:
        info = tarfile.TarInfo("zeros.bin")
        info.size = 2_000_000
        tf.addfile(info, io.BytesIO(bytes(info.size)))
    with pytest.raises(ImportRefused, match="more than 100 times its size"):
        extract_archive(tmp_path / "up.tar.gz", tmp_path / "out", ImportLimits(max_ratio=100))
    assert not (tmp_path / "out" / "zeros.bin").exists()


def test_lying_size_header_does_not_get_past(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "up.zip", {"a.bin": os.urandom(5000)}, zipfile.ZIP_STORED)
    data = bytearray(archive.read_bytes())
    local, central = data.find(b"PK\x03\x04"), data.find(b"PK\x01\x02")
    struct.pack_into("<I", data, local + 22, 10)  # declared uncompressed size: 10 bytes
    struct.pack_into("<I", data, central + 24, 10)
    archive.write_bytes(bytes(data))
    with pytest.raises(ImportRefused, match="a.bin"):
        extract_archive(archive, tmp_path / "out", LIMITS)
    out = tmp_path / "out" / "a.bin"
    assert not out.exists() or out.stat().st_size <= 10


def test_refuses_files_that_are_not_archives(tmp_path: Path) -> None:
    with pytest.raises(ImportRefused, match="not a zip or tar archive"):
        extract_archive(put(tmp_path / "up.zip", "hello, not a zip"), tmp_path / "out", LIMITS)
    with pytest.raises(ImportRefused, match="unpack it with extract_archive first"):
        plan_import(make_zip(tmp_path / "real.zip", {"a.jpg": JPG}))


# ---------------------------------------------------------------- YOLO


def yolo(root: Path, yaml: str, labels: dict[str, str], images: tuple[str, ...] = ()) -> Path:
    """A YOLO folder: ``labels`` maps image path → label text (None-less); ``images`` adds unlabelled ones."""
    put(root / "data.yaml", yaml)
    for image, text in labels.items():
        put(root / image)
        put(root / "labels" / Path(image).relative_to("images").with_suffix(".txt"), text)
    for image in images:
        put(root / image)
    return root


DETECT_YAML = "names: [cat, dog]\ntrain: images/train\n"


def test_yolo_detect_from_zip(tmp_path: Path) -> None:
    src = yolo(tmp_path / "src", DETECT_YAML + "val: images/val\n", {
        "images/train/a.jpg": "0 0.5 0.5 0.2 0.2\n1 0.25 0.75 0.1 0.3\n",
        "images/train/b.jpg": "",
        "images/val/d.jpg": "1 0.5 0.5 1 1\n",
    }, images=("images/train/c.jpg",))
    put(src / "images" / "train" / "notes.md", "not an image")
    root = extract_archive(zip_folder(src, tmp_path / "ds.zip"), tmp_path / "out", LIMITS)
    plan = plan_import(root)
    assert (plan.task, plan.class_names, plan.format, plan.issues) == ("detect", ["cat", "dog"], "yolo", [])
    images = by_name(plan)
    assert sorted(images) == ["train/a.jpg", "train/b.jpg", "train/c.jpg", "val/d.jpg"]
    a = images["train/a.jpg"]
    assert [(lb.class_id, lb.box) for lb in a.labels] == [(0, (0.5, 0.5, 0.2, 0.2)), (1, (0.25, 0.75, 0.1, 0.3))]
    assert a.path == root / "images" / "train" / "a.jpg" and a.name == "a.jpg"
    assert images["train/b.jpg"].labels == [] and images["train/c.jpg"].labels is None


def test_yolo_names_dict_any_yaml_name_and_foreign_path(tmp_path: Path) -> None:
    root = yolo(tmp_path / "ds", "path: /datasets/elsewhere\nnames: {0: cat, 1: dog}\ntrain: images/train\n",
                {"images/train/a.jpg": "1 0.5 0.5 0.2 0.2\n"})
    (root / "data.yaml").rename(root / "coco8.yaml")
    plan = plan_import(root)
    assert plan.class_names == ["cat", "dog"] and plan.images[0].labels[0].class_id == 1


def test_yolo_infers_segment(tmp_path: Path) -> None:
    plan = plan_import(yolo(tmp_path, DETECT_YAML, {"images/train/a.jpg": "1 0.1 0.2 0.5 0.2 0.3 0.6\n"}))
    label = plan.images[0].labels[0]
    assert plan.task == "segment" and label.polygon == [0.1, 0.2, 0.5, 0.2, 0.3, 0.6]
    assert label.box == pytest.approx((0.3, 0.4, 0.4, 0.4))


def test_yolo_infers_obb(tmp_path: Path) -> None:
    plan = plan_import(yolo(tmp_path, DETECT_YAML, {"images/train/a.jpg": "0 0.1 0.1 0.5 0.1 0.5 0.3 0.1 0.3\n"}))
    label = plan.images[0].labels[0]
    assert plan.task == "obb" and label.obb == [0.1, 0.1, 0.5, 0.1, 0.5, 0.3, 0.1, 0.3]
    assert label.box == pytest.approx((0.3, 0.2, 0.4, 0.2))


def test_yolo_pose_with_kpt_shape(tmp_path: Path) -> None:
    yaml = "names: [person]\nkpt_shape: [2, 3]\ntrain: images/train\n"
    plan = plan_import(yolo(tmp_path, yaml, {"images/train/a.jpg": "0 0.5 0.5 0.4 0.4 0.4 0.4 2 0 0 0\n"}))
    label = plan.images[0].labels[0]
    assert (plan.task, plan.kpt_shape) == ("pose", [2, 3])
    assert label.box == (0.5, 0.5, 0.4, 0.4) and label.keypoints == [0.4, 0.4, 2, 0, 0, 0]


def test_yolo_yaml_task_wins_over_row_shape(tmp_path: Path) -> None:
    yaml = DETECT_YAML + "task: segment\n"
    plan = plan_import(yolo(tmp_path, yaml, {"images/train/a.jpg": "0 0.1 0.1 0.5 0.1 0.5 0.3 0.1 0.3\n"}))
    assert plan.task == "segment" and plan.images[0].labels[0].polygon is not None
    assert plan.images[0].labels[0].obb is None


def test_yolo_roboflow_layout(tmp_path: Path) -> None:
    put(tmp_path / "data.yaml", "names: [cat]\ntrain: ../train/images\nval: ../valid/images\n")
    for split in ("train", "valid"):
        put(tmp_path / split / "images" / f"{split}.jpg")
        put(tmp_path / split / "labels" / f"{split}.txt", "0 0.5 0.5 0.2 0.2\n")
    plan = plan_import(tmp_path)
    assert sorted(by_name(plan)) == ["train/train.jpg", "val/valid.jpg"] and plan.issues == []
    assert all(im.labels for im in plan.images)


def test_yolo_split_as_image_list(tmp_path: Path) -> None:
    root = yolo(tmp_path, "names: [cat]\ntrain: train.txt\n", {"images/all/a.jpg": "0 0.5 0.5 0.2 0.2\n"},
                images=("images/all/b.jpg",))
    put(root / "train.txt", "./images/all/a.jpg\nimages/all/b.jpg\n./images/all/gone.jpg\n")
    plan = plan_import(root)
    assert sorted(by_name(plan)) == ["train/a.jpg", "train/b.jpg"]
    assert issue_names(plan) == ["train.txt"] and "gone.jpg" in plan.issues[0].reason


@pytest.mark.parametrize(("row", "reason"), [
    ("0 0.5 0.5 0.2", "need 5 values"),
    ("0 0.5 abc 0.2 0.2", "'abc' is not a number"),
    ("0 0.5 nan 0.2 0.2", "not a finite number"),
    ("2 0.5 0.5 0.2 0.2", "class id 2 is not in the class names"),
    ("-1 0.5 0.5 0.2 0.2", "class id -1 is not in the class names"),
    ("0.5 0.5 0.5 0.2 0.2", "not a whole number"),
    ("0 1.2 0.5 0.2 0.2", "outside 0-1"),
    ("0 0.5 -0.01 0.2 0.2", "outside 0-1"),
])
def test_yolo_bad_label_skips_the_image(tmp_path: Path, row: str, reason: str) -> None:
    plan = plan_import(yolo(tmp_path, DETECT_YAML, {
        "images/train/bad.jpg": f"0 0.5 0.5 0.2 0.2\n{row}\n",
        "images/train/good.jpg": "1 0.5 0.5 0.2 0.2\n",
    }))
    assert sorted(by_name(plan)) == ["train/good.jpg"]
    (issue,) = plan.issues
    assert issue.name == "labels/train/bad.txt" and reason in issue.reason and "Line 2" in issue.reason
    assert "images/train/bad.jpg was skipped" in issue.reason


def test_yolo_segment_rejects_box_rows(tmp_path: Path) -> None:
    plan = plan_import(yolo(tmp_path, DETECT_YAML, {
        "images/train/a.jpg": "0 0.1 0.2 0.5 0.2 0.3 0.6\n", "images/train/b.jpg": "0 0.5 0.5 0.2 0.2\n"}))
    assert plan.task == "segment" and sorted(by_name(plan)) == ["train/a.jpg"]
    assert issue_names(plan) == ["labels/train/b.txt"]


def test_yolo_clips_coordinates_within_epsilon(tmp_path: Path) -> None:
    plan = plan_import(yolo(tmp_path, DETECT_YAML, {"images/train/a.jpg": "0 1.0005 -0.0005 0.2 0.2\n"}))
    assert plan.issues == [] and plan.images[0].labels[0].box == (1.0, 0.0, 0.2, 0.2)


def test_yolo_layout_without_yaml_is_refused(tmp_path: Path) -> None:
    root = yolo(tmp_path / "ds", DETECT_YAML, {"images/train/a.jpg": "0 0.5 0.5 0.2 0.2\n"})
    (root / "data.yaml").unlink()
    with pytest.raises(ImportRefused, match="missing data.yaml"):
        plan_import(root)


def test_yolo_duplicate_names_in_a_split(tmp_path: Path) -> None:
    images = ("images/train/a.jpg", "images/train/sub/a.jpg", "images/val/a.jpg")
    plan = plan_import(yolo(tmp_path, DETECT_YAML + "val: images/val\n", {}, images=images))
    assert sorted(by_name(plan)) == ["train/a.jpg", "val/a.jpg"]
    assert by_name(plan)["train/a.jpg"].path == tmp_path / "images" / "train" / "a.jpg"
    (issue,) = plan.issues
    assert issue.name == "images/train/sub/a.jpg" and "already in the train split" in issue.reason


def test_yolo_split_outside_the_upload_is_ignored(tmp_path: Path) -> None:
    put(tmp_path / "outside" / "images" / "x.jpg")
    root = yolo(tmp_path / "ds", "names: [cat]\ntrain: images/train\nval: ../../outside/images\ntest: images/nope\n",
                {"images/train/a.jpg": ""})
    plan = plan_import(root)
    assert sorted(by_name(plan)) == ["train/a.jpg"]
    assert issue_names(plan) == ["data.yaml", "data.yaml"]
    assert "outside the upload" in plan.issues[0].reason and "not in the upload" in plan.issues[1].reason


@pytest.mark.parametrize(("text", "reason"), [
    ("names: [cat\ntrain: images/train\n", "not valid YAML"),
    ("train: images/train\n", "has no names"),
    ("names: {0: cat, 2: dog}\ntrain: images/train\n", "without gaps"),
    ("names: [cat]\n", "lists no train, val or test"),
    ("names: [cat]\ntask: pose\ntrain: images/train\n", "no kpt_shape"),
])
def test_yolo_bad_yaml_is_refused(tmp_path: Path, text: str, reason: str) -> None:
    put(tmp_path / "data.yaml", text)
    put(tmp_path / "images" / "train" / "a.jpg")
    with pytest.raises(ImportRefused, match=reason):
        plan_import(tmp_path)


# ---------------------------------------------------------------- classification


def test_classification_folders(tmp_path: Path) -> None:
    for path in ("train/cat/a.jpg", "train/dog/b.jpg", "valid/cat/c.jpg", "test/bird/d.png", "train/stray.jpg"):
        put(tmp_path / "up" / "pets" / path)
    put(tmp_path / "up" / "pets" / "train" / "cat" / "info.txt", "not an image")
    root = extract_archive(zip_folder(tmp_path / "up", tmp_path / "pets.zip"), tmp_path / "out", LIMITS)
    plan = plan_import(root)
    assert (plan.task, plan.class_names, plan.format) == ("classify", ["bird", "cat", "dog"], "yolo")
    assert {k: (im.class_id, im.labels) for k, im in by_name(plan).items()} == {
        "train/a.jpg": (1, None), "train/b.jpg": (2, None), "val/c.jpg": (1, None), "test/d.png": (0, None)}
    assert issue_names(plan) == ["train/stray.jpg"]


# ---------------------------------------------------------------- COCO


def coco_doc(images: list[tuple[int, str]], annotations: list[dict]) -> str:
    return json.dumps({
        "images": [{"id": i, "file_name": name, "width": 200, "height": 100} for i, name in images],
        "annotations": [{"id": n, "iscrowd": 0, **a} for n, a in enumerate(annotations, start=1)],
        "categories": [{"id": 7, "name": "dog"}, {"id": 3, "name": "cat"}],
    })


def test_coco_annotations_folder_layout(tmp_path: Path) -> None:
    put(tmp_path / "annotations" / "instances_train.json", coco_doc([(1, "a.jpg"), (2, "b.jpg"), (3, "gone.jpg")], [
        {"image_id": 1, "category_id": 7, "bbox": [20, 10, 40, 20]},
        {"image_id": 1, "category_id": 3, "bbox": [0, 0, 100, 50],
         "segmentation": [[0, 0, 10, 0, 10, 10], [0, 0, 100, 0, 100, 50, 0, 50]]},
        {"image_id": 1, "category_id": 3, "segmentation": {"counts": "abc", "size": [100, 200]}},
        {"image_id": 9, "category_id": 3, "bbox": [0, 0, 1, 1]},
    ]))
    put(tmp_path / "annotations" / "instances_val.json", coco_doc([(1, "c.jpg")], []))
    for path in ("images/train/a.jpg", "images/train/b.jpg", "images/val/c.jpg"):
        put(tmp_path / path)
    plan = plan_import(tmp_path)
    assert (plan.task, plan.class_names, plan.format) == ("segment", ["cat", "dog"], "coco")
    images = by_name(plan)
    assert sorted(images) == ["train/a.jpg", "train/b.jpg", "val/c.jpg"]
    box_only, polygon = images["train/a.jpg"].labels
    assert box_only.class_id == 1 and box_only.box == pytest.approx((0.2, 0.2, 0.2, 0.2))
    assert box_only.polygon == pytest.approx([0.1, 0.1, 0.3, 0.1, 0.3, 0.3, 0.1, 0.3])  # box-shaped, as convert_coco
    assert polygon.class_id == 0 and polygon.polygon == [0, 0, 0.5, 0, 0.5, 0.5, 0, 0.5]  # the larger polygon
    assert images["train/b.jpg"].labels == [] and images["val/c.jpg"].labels == []
    reasons = {issue.name: issue.reason for issue in plan.issues}
    assert set(reasons) == {"gone.jpg", "annotations/instances_train.json"}
    assert "not in the upload" in reasons["gone.jpg"]
    assert [i.reason.split(" ", 1)[1][:20] for i in plan.issues if i.name.endswith(".json")] == [
        "annotation(s) are RL", "annotation(s) refer "]


def test_coco_detect_roboflow_layout_and_bad_annotations(tmp_path: Path) -> None:
    put(tmp_path / "train" / "_annotations.coco.json", coco_doc([(1, "a.jpg"), (2, "b.jpg"), (3, "c.jpg")], [
        {"image_id": 1, "category_id": 3, "bbox": [50, 25, 100, 50]},
        {"image_id": 2, "category_id": 99, "bbox": [0, 0, 10, 10]},
        {"image_id": 3, "category_id": 3, "bbox": [250, 0, 100, 10]},
    ]))
    put(tmp_path / "valid" / "_annotations.coco.json", coco_doc([(1, "d.jpg")], []))
    for path in ("train/a.jpg", "train/b.jpg", "train/c.jpg", "valid/d.jpg"):
        put(tmp_path / path)
    plan = plan_import(tmp_path)
    assert plan.task == "detect" and sorted(by_name(plan)) == ["train/a.jpg", "val/d.jpg"]
    assert by_name(plan)["train/a.jpg"].labels[0].box == (0.5, 0.5, 0.5, 0.5)
    reasons = {issue.name: issue.reason for issue in plan.issues}
    assert "category_id 99" in reasons["train/b.jpg"] and "outside 0-1" in reasons["train/c.jpg"]


def test_coco_single_json_upload(tmp_path: Path) -> None:
    path = put(tmp_path / "labels.json", coco_doc([(1, "a.jpg"), (2, "b.jpg")], [
        {"image_id": 1, "category_id": 3, "bbox": [0, 0, 10, 10]}]))
    put(tmp_path / "a.jpg")
    plan = plan_import(path)
    assert plan.class_names == ["cat", "dog"] and [im.name for im in plan.images] == ["a.jpg"]
    assert issue_names(plan) == ["b.jpg"]
    with pytest.raises(ImportRefused, match="not COCO JSON"):
        plan_import(put(tmp_path / "other.json", '{"hello": 1}'))


# ---------------------------------------------------------------- NDJSON


def ndjson(path: Path, header: dict, records: list[dict]) -> Path:
    return put(path, "\n".join(json.dumps(r) for r in [{"type": "dataset", **header}, *records]) + "\n")


def image_record(file: str, split: str = "train", **annotations: list) -> dict:
    return {"type": "image", "file": file, "url": f"https://example.invalid/{file}", "width": 32, "height": 24,
            "split": split, "annotations": annotations}


def test_ndjson_detect_with_local_images(tmp_path: Path) -> None:
    ndjson(tmp_path / "ds.ndjson", {"task": "detect", "class_names": {"0": "cat", "2": "bird"}}, [
        image_record("a.jpg", boxes=[[2, 0.5, 0.5, 0.2, 0.2]]),
        image_record("b.jpg", "val", boxes=[]),
        {**image_record("c.jpg"), "annotations": None},
        image_record("remote.jpg", boxes=[]),
        image_record("bad.jpg", boxes=[[5, 0.5, 0.5, 0.2, 0.2]]),
        image_record("b.jpg", "test", boxes=[[0, 0.5, 0.5, 0.2]]),
    ])
    for path in ("images/train/a.jpg", "images/val/b.jpg", "images/train/c.jpg", "bad.jpg", "images/test/b.jpg"):
        put(tmp_path / path)
    plan = plan_import(tmp_path)
    assert (plan.task, plan.class_names, plan.format) == ("detect", ["cat", "class1", "bird"], "ndjson")
    images = by_name(plan)
    assert sorted(images) == ["train/a.jpg", "train/c.jpg", "val/b.jpg"]
    assert images["train/a.jpg"].labels[0].class_id == 2 and images["val/b.jpg"].labels == []
    assert images["val/b.jpg"].path == tmp_path / "images" / "val" / "b.jpg" and images["train/c.jpg"].labels is None
    reasons = [(i.name, i.reason) for i in plan.issues]
    assert reasons[0][0] == "remote.jpg" and "URLs are not downloaded" in reasons[0][1]
    assert reasons[1][0] == "ds.ndjson" and "Line 6 (bad.jpg)" in reasons[1][1] and "class id 5" in reasons[1][1]
    assert "Line 7 (b.jpg)" in reasons[2][1] and "need 5 values" in reasons[2][1] and len(reasons) == 3


def test_ndjson_segment_and_pose(tmp_path: Path) -> None:
    put(tmp_path / "a.jpg")
    seg = ndjson(tmp_path / "seg.ndjson", {"task": "segment", "class_names": {"0": "cat"}},
                 [image_record("a.jpg", segments=[[0, 0.1, 0.1, 0.5, 0.1, 0.3, 0.5]])])
    assert plan_import(seg).images[0].labels[0].polygon == [0.1, 0.1, 0.5, 0.1, 0.3, 0.5]
    pose = ndjson(tmp_path / "pose.ndjson", {"task": "pose", "class_names": {"0": "person"}},
                  [image_record("a.jpg", pose=[[0, 0.5, 0.5, 0.2, 0.2, 0.4, 0.4, 2, 0.6, 0.6, 1]])])
    plan = plan_import(pose)
    assert plan.kpt_shape == [2, 3] and plan.images[0].labels[0].keypoints == [0.4, 0.4, 2, 0.6, 0.6, 1]


def test_ndjson_classify(tmp_path: Path) -> None:
    ndjson(tmp_path / "up" / "c.ndjson", {"task": "classify", "class_names": {"0": "cat", "1": "dog"}}, [
        image_record("a.jpg", classification=[1]), image_record("b.jpg", "val"),
        image_record("c.jpg", classification=[4])])
    for name in ("a.jpg", "b.jpg", "c.jpg"):
        put(tmp_path / "up" / "pics" / name)
    plan = plan_import(tmp_path / "up")
    assert plan.task == "classify" and {k: im.class_id for k, im in by_name(plan).items()} == {
        "train/a.jpg": 1, "val/b.jpg": None}
    assert all(im.labels is None for im in plan.images) and "classification 4" in plan.issues[0].reason


def test_ndjson_without_dataset_record_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImportRefused, match="dataset record"):
        plan_import(put(tmp_path / "x.ndjson", json.dumps(image_record("a.jpg")) + "\n"))


# ---------------------------------------------------------------- plain images


def test_raw_images_folder_zip_and_single_file(tmp_path: Path) -> None:
    for path in ("pics/a.jpg", "pics/b.PNG", "pics/more/c.webp", "pics/more/a.jpg"):
        put(tmp_path / "src" / path)
    put(tmp_path / "src" / "pics" / "readme.txt", "hello")
    root = extract_archive(zip_folder(tmp_path / "src", tmp_path / "pics.zip"), tmp_path / "out", LIMITS)
    plan = plan_import(root)
    assert (plan.task, plan.class_names, plan.format) == ("detect", [], "raw")
    assert sorted(by_name(plan)) == ["train/a.jpg", "train/b.PNG", "train/c.webp"]
    assert all(im.labels is None for im in plan.images) and issue_names(plan) == ["more/a.jpg"]
    single = plan_import(tmp_path / "src" / "pics" / "b.PNG")
    assert [(im.name, im.split) for im in single.images] == [("b.PNG", "train")] and single.format == "raw"


def test_plain_folder_does_not_follow_symlinks(tmp_path: Path) -> None:
    put(tmp_path / "secret" / "x.jpg")
    put(tmp_path / "up" / "a.jpg")
    (tmp_path / "up" / "link.jpg").symlink_to(tmp_path / "secret" / "x.jpg")
    (tmp_path / "up" / "linkdir").symlink_to(tmp_path / "secret", target_is_directory=True)
    assert [im.name for im in plan_import(tmp_path / "up").images] == ["a.jpg"]


def test_empty_or_unknown_uploads_are_refused(tmp_path: Path) -> None:
    put(tmp_path / "empty" / "notes.txt", "nothing here")
    with pytest.raises(ImportRefused, match="no images"):
        plan_import(tmp_path / "empty")
    with pytest.raises(ImportRefused, match="not a supported upload"):
        plan_import(tmp_path / "empty" / "notes.txt")
