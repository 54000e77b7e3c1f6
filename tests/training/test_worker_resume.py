"""A relaunched attempt resumes only from a checkpoint that is mid-training. The trainer strips the epoch and
optimizer state from ``last.pt`` when training ends; ``resume=True`` on such a file makes Ultralytics start a
*new* training with its own defaults (100 epochs, batch 16), not the run's: seen end to end when a trainer
finished but its server was killed before it could report (tests/test_e2e_leases.py's kill -9 tests)."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from lanner.training import worker
from tests.exports.test_worker import CutShortServer

SPEC = {"resume": True, "attempt": 2, "modelId": "m1", "project": "p", "name": "run-1", "device": "cpu",
        "trainArgs": {"model": "yolo11n.yaml", "data": "ul://alice/datasets/shapes", "epochs": 3, "imgsz": 64,
                      "batch": 4}}


def _placed(weights: Path, cwd: Path) -> Path:
    last = cwd / "runs" / "detect" / "p" / "run-1" / "weights" / "last.pt"
    last.parent.mkdir(parents=True)
    shutil.copyfile(weights, last)
    return last


def test_a_finished_trainings_last_checkpoint_is_trained_again_with_the_runs_settings(tiny_weights, tmp_path):
    last = _placed(tiny_weights, tmp_path)  # as the trainer leaves it: stripped at the end of training
    assert not worker.resumable(last)
    argv = worker.train_arguments(SPEC, tmp_path)
    assert "resume=True" not in argv and "epochs=3" in argv and "batch=4" in argv and "model=yolo11n.yaml" in argv


def test_a_checkpoint_saved_mid_training_is_resumed(tiny_weights, tmp_path):
    last = _placed(tiny_weights, tmp_path)
    ckpt = torch.load(last, map_location="cpu", weights_only=False)
    model = ckpt["model"].float()
    # What the trainer writes after an epoch: the epoch reached and its optimizer's state.
    ckpt.update(epoch=1, optimizer=torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9).state_dict())
    torch.save(ckpt, last)
    assert worker.resumable(last)
    assert worker.train_arguments(SPEC, tmp_path)[:3] == ["train", f"model={last}", "resume=True"]


def test_a_torn_checkpoint_is_not_resumed(tmp_path):
    last = tmp_path / "runs" / "detect" / "p" / "run-1" / "weights" / "last.pt"
    last.parent.mkdir(parents=True)
    last.write_bytes(b"PK\x03\x04 torn by a kill")
    assert not worker.resumable(last)
    assert "resume=True" not in worker.train_arguments(SPEC, tmp_path)


def test_a_checkpoint_cut_short_by_a_dying_server_is_not_kept(tmp_path):
    server = CutShortServer(bytes(range(256)) * 4096)
    try:
        assert not worker.fetch_checkpoint(server.url, tmp_path / "weights" / "last.pt")
    finally:
        server.listener.close()
    assert not (tmp_path / "weights" / "last.pt").exists() and not list((tmp_path / "weights").iterdir())
