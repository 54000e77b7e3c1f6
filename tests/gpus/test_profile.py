"""Model facts from YAMLs and local checkpoints: sizes, FLOPs, tasks, errors; never a download."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from lanner.gpus.profile import ModelProfile, meta_model, model_profile


@pytest.fixture(scope="module", autouse=True)
def no_downloads() -> Iterator[None]:
    """Any attempt to fetch weights or files fails the test."""
    from ultralytics.utils import downloads

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"download attempted: {args}")

    with pytest.MonkeyPatch.context() as mp:
        for name in ("safe_download", "attempt_download_asset", "get_github_assets"):
            mp.setattr(downloads, name, refuse)
        yield


def test_yolo11n_matches_the_published_model_card(n: ModelProfile) -> None:
    # Ultralytics docs: YOLO11n 2.6M params, 6.5 GFLOPs at 640 (thop counts the head's DFL too: 6.7)
    assert (n.name, n.family, n.scale, n.task, n.nc, n.strides) == ("yolo11n.yaml", "yolo11", "n", "detect", 80,
                                                                     (8, 16, 32))
    assert 2.5e6 < n.params < 2.7e6
    assert 6.3 < n.gflops_640 < 7.0


def test_flops_scale_with_the_pixel_count(n: ModelProfile) -> None:
    from ultralytics.nn.tasks import DetectionModel, yaml_model_load
    from ultralytics.utils.torch_utils import get_flops

    assert n.gflops(640) == n.gflops_640
    assert n.gflops(320) == pytest.approx(n.gflops_640 / 4)
    assert n.gflops(1280) == pytest.approx(n.gflops_640 * 4)
    measured = get_flops(DetectionModel(yaml_model_load("yolo11n.yaml"), verbose=False), 320)
    assert n.gflops(320) == pytest.approx(measured, rel=0.02)  # thop itself agrees with the (imgsz/640)**2 rule


def test_bigger_scale_has_more_params_and_flops(n: ModelProfile, s: ModelProfile) -> None:
    assert n.params < s.params and n.gflops_640 < s.gflops_640
    assert 3 < s.params / n.params < 4.5


@pytest.mark.parametrize("name", ["yolo99z.yaml", "yolo11q.yaml", "not-a-model", "https://example.com/yolo11n.pt",
                                  "missing/custom.pt"])
def test_unknown_models_raise_value_error(name: str) -> None:
    with pytest.raises(ValueError, match=r"unknown model '"):
        model_profile(name)


def test_nc_changes_the_head_and_is_cached_per_nc(n: ModelProfile) -> None:
    three = model_profile("yolo11n.yaml", nc=3)
    assert three.nc == 3 and three.params < n.params and three.gflops_640 < n.gflops_640
    assert model_profile("yolo11n.yaml", nc=3) is three
    assert model_profile("yolo11n.yaml") is n
    with pytest.raises(ValueError):
        model_profile("yolo11n.yaml", nc=0)


def test_names_without_suffix_and_official_weights_names_use_the_yaml(n: ModelProfile, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert model_profile("yolo11n") is n
    assert model_profile("yolo11n.pt") is n  # no local file: same architecture as the YAML, nothing downloaded
    assert not list(tmp_path.iterdir())


def test_local_checkpoint_is_read_for_its_yaml(tmp_path: Path) -> None:
    from ultralytics.nn.tasks import DetectionModel, yaml_model_load

    net = DetectionModel(yaml_model_load("yolov8n.yaml"), nc=2, verbose=False).half()
    path = tmp_path / "best.pt"
    torch.save({"model": net, "ema": None, "train_args": {}}, path)
    profile = model_profile(path)
    assert (profile.name, profile.family, profile.scale, profile.task, profile.nc) == ("best.pt", "yolov8", "n",
                                                                                       "detect", 2)
    assert profile.params == sum(p.numel() for p in net.parameters())
    assert 0.85 < profile.gflops_640 / model_profile("yolov8n.yaml").gflops_640 < 1  # 2 classes, not 80


def test_not_a_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "junk.pt"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not an Ultralytics checkpoint"):
        model_profile(path)


@pytest.mark.parametrize(("name", "task", "family"), [
    ("yolo11n-seg.yaml", "segment", "yolo11"), ("yolo11n-pose.yaml", "pose", "yolo11"),
    ("yolo11n-obb.yaml", "obb", "yolo11"), ("yolov8n.yaml", "detect", "yolov8"), ("yolo26n.yaml", "detect", "yolo26"),
])
def test_tasks_and_families(name: str, task: str, family: str) -> None:
    profile = model_profile(name)
    assert (profile.task, profile.family, profile.scale) == (task, family, "n")


def test_classify_is_profiled_at_224() -> None:
    cls = model_profile("yolo11n-cls.yaml")
    assert cls.task == "classify" and cls.base_imgsz == 224 and cls.strides == () and cls.anchors(224) == 0
    assert 0.3 < cls.gflops(224) < 0.7  # docs: YOLO11n-cls 0.5 GFLOPs at 224 (thop: 0.40)
    assert cls.gflops(448) == pytest.approx(4 * cls.gflops_640)


def test_the_kept_model_is_storage_free_and_in_training_mode(n: ModelProfile) -> None:
    module = meta_model(n)
    assert module.training and all(p.device.type == "meta" for p in module.parameters())
    assert n.anchors(640) == 8400
