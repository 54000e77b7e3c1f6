"""``lanner gpus list``, ``lanner estimate`` and ``lanner gpus probe`` against a real database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from typer.testing import CliRunner


@pytest.fixture
def lanner_cli(app: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
    from lanner.cli import app as cli_app
    from lanner.config import get_settings

    settings = app.state.lanner.settings
    monkeypatch.setenv("LANNER_HOME", str(settings.home))
    monkeypatch.setenv("LANNER_DATABASE_URL", settings.resolved_database_url)
    monkeypatch.setenv("COLUMNS", "250")  # Rich would otherwise fold the tables to 80 columns
    get_settings.cache_clear()

    def invoke(*args: str) -> Any:
        return CliRunner().invoke(cli_app, list(args))

    yield invoke
    get_settings.cache_clear()


def test_gpus_list_shows_the_catalogue_with_its_specifications(lanner_cli: Callable[..., Any]) -> None:
    result = lanner_cli("gpus", "list", "--tier", "free")
    assert result.exit_code == 0, result.output
    header = result.output.splitlines()[1]
    for column in ("architecture", "VRAM GB", "GB/s", "FP32 TFLOPS", "FP16 TFLOPS", "$/h", "tier"):
        assert column in header
    h200 = next(line for line in result.output.splitlines() if "h200-sxm" in line)
    assert "Hopper" in h200 and "141" in h200 and "4800" in h200 and "✗" in h200  # free may not use it


def test_estimate_reads_the_dataset_as_its_owner_and_sorts_by_cost(lanner_cli: Callable[..., Any], sdk: Any,
                                                                   client: Any, alice: Any, tmp_path: Any) -> None:
    from lanner.synthetic import make_detection_dataset
    from tests.datasets.helpers import package, upload_dataset

    archive = package(make_detection_dataset(tmp_path / "d", train=10, val=5).parent, tmp_path / "zip")
    upload_dataset(sdk(alice), client, "alice", "shapes", archive)
    result = lanner_cli("estimate", "--model", "yolo11n.yaml", "--data", "ul://alice/datasets/shapes",
                        "--epochs", "20", "--imgsz", "320", "--batch", "8", "--deadline", "2h", "--budget", "5")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("cheapest") and lines[1].startswith("fastest") and lines[2].startswith("balanced")
    assert any("needs pro" in line for line in lines if "h200-sxm" in line)  # alice is on the free tier
    rows = [line for line in lines if line.startswith("│ ") and "GPU type" not in line]
    costs = [float(line.split("│")[9].split()[0]) for line in rows if " yes " in line]
    assert len(costs) > 10 and costs == sorted(costs)
    # The memory margin: the batch's planned peak of the card's usable memory, the % free, the largest batch.
    from lanner.gpus.memory import usable_gb

    l40s = next(line.split("│") for line in rows if line.startswith("│ l40s "))
    used, rest = l40s[4].split("/")
    assert float(used) > 0 and rest.split()[0] == f"{usable_gb(48):.1f}" and rest.split()[1].endswith("%)")
    assert int(l40s[5]) > 8


def test_estimate_errors_are_one_clear_line(lanner_cli: Callable[..., Any]) -> None:
    result = lanner_cli("estimate", "--model", "yolo11n.yaml", "--data", "ul://nobody/datasets/x")
    assert result.exit_code == 1 and "--data ul://nobody/datasets/x: user 'nobody' not found" in result.output
    result = lanner_cli("estimate", "--model", "ul://nobody/p/m", "--train-images", "100")
    assert result.exit_code == 1 and "--model ul://nobody/p/m: user 'nobody' not found" in result.output
    result = lanner_cli("estimate", "--model", "yolo11n.yaml", "--train-images", "100", "--owner", "nobody")
    assert result.exit_code == 1 and "--owner nobody: user 'nobody' not found" in result.output
    result = lanner_cli("estimate", "--model", "yolo11n.yaml", "--train-images", "100", "--imgsz", "0")
    assert result.exit_code == 1 and "trainArgs.imgsz" in result.output


def test_estimate_as_another_owner_cannot_read_a_private_dataset(lanner_cli: Callable[..., Any], sdk: Any,
                                                                 client: Any, alice: Any, bob: Any,
                                                                 tmp_path: Any) -> None:
    """--owner overrides the URI's owner, with that user's access: bob may not see alice's private data."""
    from lanner.synthetic import make_detection_dataset
    from tests.datasets.helpers import package, upload_dataset

    archive = package(make_detection_dataset(tmp_path / "d", train=4, val=2).parent, tmp_path / "zip")
    upload_dataset(sdk(alice), client, "alice", "private", archive)
    result = lanner_cli("estimate", "--model", "yolo11n.yaml", "--data", "ul://alice/datasets/private",
                        "--owner", "bob")
    assert result.exit_code == 1 and "dataset: 'ul://alice/datasets/private' not found" in result.output


def test_estimate_with_image_counts_and_no_owner_has_no_tier_limit(lanner_cli: Callable[..., Any]) -> None:
    """An operator's estimate without a user: every offered type is allowed (no tier applies)."""
    result = lanner_cli("estimate", "--model", "yolo11n.yaml", "--train-images", "500", "--val-images", "100",
                        "--epochs", "10", "--imgsz", "320", "--batch", "-1")
    assert result.exit_code == 0, result.output
    assert "h200-sxm" in result.output and "needs " not in result.output


def test_gpus_probe_measures_this_machine_and_stores_a_calibration_point(lanner_cli: Callable[..., Any],
                                                                        app: Any) -> None:
    from sqlalchemy import select

    from lanner.gpus.models import CalibrationPoint

    result = lanner_cli("gpus", "probe", "--model", "yolo11n.yaml", "--imgsz", "64", "--batch", "4",
                        "--images", "8")
    assert result.exit_code == 0, result.output
    assert any(line.startswith("cpu\t64\t") and line.endswith("img/s") for line in result.stdout.splitlines())
    with app.state.lanner.db.session() as session:
        [point] = session.scalars(select(CalibrationPoint)).all()
    assert point.source == "probe" and point.gpu_type == "cpu" and point.imgsz == 64 and point.batch == 4
    assert point.train_images == 8 and point.epoch_seconds > 0



def _estimate_at(lanner_cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, columns: int,
                 *extra: str) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    result = lanner_cli("estimate", "--model", "yolo11n.yaml", "--train-images", "1000", "--val-images", "100",
                        "--owner", "alice", *extra)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(len(line) <= columns for line in lines), max(lines, key=len)
    return [line.rstrip() for line in lines]


def test_estimate_fits_80_columns_with_every_gpu_type_whole_and_its_availability(
        lanner_cli: Callable[..., Any], alice: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from lanner.gpus.catalogue import load_catalogue

    lines = _estimate_at(lanner_cli, monkeypatch, 80)
    assert not any("…" in line for line in lines)  # no cut cell
    header = next(line for line in lines if line.startswith("GPU type"))
    assert header.split()[-1] == "available"
    rows = {line.split()[0]: line for line in lines[lines.index(header) + 1:] if line.split()
            and line.split()[0] in {gpu.id for gpu in load_catalogue().offered()}}
    assert set(rows) == {gpu.id for gpu in load_catalogue().offered()}
    # The local executor runs one CPU run at a time and finds no NVIDIA GPU here: what gpu-availability says.
    assert rows["cpu"].endswith("free now") and rows["h200-sxm"].endswith("not offered")
    assert "needs the pro tier: " in "\n".join(lines) and "h200-sxm" in next(
        line for line in lines if line.startswith("needs the pro tier"))  # alice is on the free tier


def test_estimate_with_autobatch_fits_80_columns_with_each_types_batch(
        lanner_cli: Callable[..., Any], alice: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _estimate_at(lanner_cli, monkeypatch, 80, "--batch", "-1", "--epochs", "300")
    assert not any("…" in line for line in lines)
    header = next(line for line in lines if line.startswith("GPU type"))
    assert header.split()[:4] == ["GPU", "type", "$/h", "batch"] and header.split()[-1] == "available"
    assert int(next(line for line in lines if line.startswith("b300 ")).split()[2]) > 16  # AutoBatch's own batch


def test_estimate_narrower_than_any_table_shows_one_block_per_gpu_type(
        lanner_cli: Callable[..., Any], alice: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _estimate_at(lanner_cli, monkeypatch, 60)
    assert not any("…" in line for line in lines)
    cpu = lines.index(next(line for line in lines if line.startswith("cpu ")))
    assert lines[cpu].endswith("free now") and lines[cpu + 1].startswith("  batch 16, memory ")
    assert "total " in " ".join(lines[cpu + 1:cpu + 5]) and " min, cost $" in " ".join(lines[cpu + 1:cpu + 5])


def test_estimate_counts_runs_the_database_knows_as_busy(lanner_cli: Callable[..., Any], app: Any, alice: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI launched no worker: a run the server launched on the CPU (in the database) makes the CPU busy."""
    from sqlalchemy import update

    from lanner.training.models import Run
    from tests.ledger import make_run

    run_id, _ = make_run(app.state.lanner.db, alice.user_id, gpu="cpu")
    lines = _estimate_at(lanner_cli, monkeypatch, 80)
    assert next(line for line in lines if line.startswith("cpu ")).endswith("free now")  # not launched
    with app.state.lanner.db.session() as session:
        session.execute(update(Run).where(Run.id == run_id).values(executor="local", external_id="1:2:3:1:cpu:"))
    lines = _estimate_at(lanner_cli, monkeypatch, 80)
    assert next(line for line in lines if line.startswith("cpu ")).endswith("queued: all busy")


def test_estimate_on_several_gpus_prices_them_all_and_states_the_assumption(lanner_cli: Callable[..., Any]) -> None:
    one = lanner_cli("estimate", "--model", "yolo11n.yaml", "--train-images", "2000", "--epochs", "5", "--imgsz",
                     "320", "--batch", "16")
    two = lanner_cli("estimate", "--model", "yolo11n.yaml", "--train-images", "2000", "--epochs", "5", "--imgsz",
                     "320", "--batch", "16", "--gpus", "2")
    assert one.exit_code == 0 and two.exit_code == 0, two.output
    assert "2 GPUs of each type: $/h and cost are for all 2" in two.output
    assert "0.8 or 0.85 per GPU" in two.output and "an assumption until measured" in two.output

    def price(output: str, gpu: str) -> str:
        return next(line.split("│")[2].strip() for line in output.splitlines() if line.startswith(f"│ {gpu} "))

    assert (price(one.output, "h100-sxm"), price(two.output, "h100-sxm")) == ("3.29", "6.58")
    assert "│ cpu " not in two.output  # the host trains on one device
    assert lanner_cli("estimate", "--model", "yolo11n.yaml", "--train-images", "10", "--gpus", "9").exit_code == 2
