"""What profiling found, kept on disk (``gpus.profile_cache``): a later process estimates without torch, and the
server prepares the first estimate at start-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPOSITORY

# What a warm `lanner estimate` (profiles on disk, database at head) has no use for (issue 27: under 2 s warm):
# torch and ultralytics (the profile cache answers), NumPy (only AutoBatch fits a line), OpenCV (only a probe
# draws images), Alembic (``migrate.ensure_migrated`` asks the database), the web stack, and the Ray executor's
# HTTP client.
UNNEEDED = ("torch", "ultralytics", "numpy", "cv2", "alembic", "fastapi", "starlette", "lanner.app", "httpx")
# One estimate as `lanner estimate` makes it, then which of those it imported.
ESTIMATE = ("import sys; from lanner.cli import app; app(['estimate', '--model', 'yolo11n.yaml', "
            "'--train-images', '500', *sys.argv[1:]], standalone_mode=False); "
            f"print('imported:', *[m for m in {UNNEEDED!r} if m in sys.modules], file=sys.stderr)")


def _estimate(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LANNER_HOME": str(home), "PYTHONPATH": str(REPOSITORY), "COLUMNS": "200"}
    env.pop("LANNER_DATABASE_URL", None)
    return subprocess.run([sys.executable, "-c", ESTIMATE, *args], env=env, capture_output=True, text=True,
                          timeout=600)


def _imported(done: subprocess.CompletedProcess) -> list[str]:
    assert done.returncode == 0, done.stderr
    return next(line for line in done.stderr.splitlines() if line.startswith("imported:")).split()[1:]


def test_a_second_estimate_imports_no_torch_and_answers_the_same(tmp_path: Path) -> None:
    first = _estimate(tmp_path / "home", "--batch", "-1")
    assert "torch" in _imported(first)  # the first profile builds the model
    second = _estimate(tmp_path / "home", "--batch", "-1")
    assert _imported(second) == ["numpy"]  # AutoBatch fits its line
    assert second.stdout == first.stdout  # AutoBatch, memory, time and cost from the stored figures
    assert _imported(_estimate(tmp_path / "home")) == []  # a fixed batch: nothing it does not use


def test_a_file_from_other_versions_is_not_read(tmp_path: Path) -> None:
    from lanner.gpus import profile_cache

    path = tmp_path / "profiles.json"
    key = ("made-up.yaml", None, 0.0)
    path.write_text(json.dumps({"versions": "lanner-model-profiles/0 torch 0 ultralytics 0",
                                "profiles": {json.dumps(list(key)): {"name": "x"}}, "activations": {}}))
    try:
        profile_cache.use_file(path)
        assert profile_cache.profile_fields(key) is None
        profile_cache.store_activation_bytes(key, 640, 123)
        stored = json.loads(path.read_text())  # rewritten for these versions (with what this process measured)
        assert stored["activations"][f"{json.dumps(list(key))} 640"] == 123
        assert json.dumps(list(key)) not in stored["profiles"] and stored["versions"].startswith(profile_cache.FORMAT)
    finally:
        profile_cache.use_file(None)


def test_the_served_app_prepares_the_first_estimate_in_the_background(settings: Any) -> None:
    from fastapi.testclient import TestClient

    from lanner.app import create_app

    app = create_app(settings, prepare_estimates=True)
    try:
        with TestClient(app) as client:
            assert client.get("/api/health").status_code == 200  # serving while it prepares
            assert app.state.training.estimates_ready.wait(timeout=300)
        stored = json.loads((settings.resolved_home / "cache" / "model-profiles.json").read_text())
        key = json.dumps(["yolo11n.yaml", None, 0.0])
        assert stored["profiles"][key]["family"] == "yolo11"
        assert stored["activations"][f"{key} 640"] > 0
    finally:
        from lanner.gpus import profile_cache

        profile_cache.use_file(None)
        app.state.lanner.db.dispose()
