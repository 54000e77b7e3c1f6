"""What an executor runs for one attempt: ``python -m lanner.training.worker``, which replaces itself with the
real ``yolo train`` (same pid, so stopping the worker stops the trainer).

Everything comes from the environment the executor built: ``LANNER_WORKER_SPEC`` (JSON, below) plus
``ULTRALYTICS_PLATFORM_URL`` and a run-scoped ``ULTRALYTICS_API_KEY``, so the trainer reports through the same
protocol as any other trainer. A relaunch after a lost attempt resumes from ``weights/last.pt`` in the run's
folder when this node still has it, otherwise from the checkpoint the run last uploaded to Lanner.

Spec: ``{"runId", "modelId", "attempt", "resume", "trainArgs", "project", "name", "device", "checkpointUrl"}``.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

SPEC_ENV = "LANNER_WORKER_SPEC"


def cli_value(value: Any) -> str:
    """A value as ``yolo`` parses it back on its command line."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, list | tuple):
        return "[" + ",".join(cli_value(v) for v in value) + "]"
    return str(value)


def resolve_device(device: str | None) -> str:
    if device and device != "auto":
        return device
    try:
        import torch

        return "0" if torch.cuda.is_available() else "cpu"
    except Exception:
        return "cpu"


def configure_trainer(cwd: Path) -> None:
    """Keep everything the trainer writes (runs, downloaded datasets, weights) inside the run's folder, and
    turn off analytics. Written through the trainer's own settings manager (``YOLO_CONFIG_DIR`` is per run)."""
    from ultralytics.utils import SETTINGS

    SETTINGS.update(runs_dir=str(cwd / "runs"), datasets_dir=str(cwd / "datasets"), weights_dir=str(cwd / "weights"),
                    sync=False)


def save_dir(spec: dict[str, Any], cwd: Path) -> Path:
    """Where ``yolo train project=P name=N exist_ok=True`` writes: ``runs/<task>/P/N`` under the run's folder."""
    found = sorted(cwd.glob(f"runs/*/{spec['project']}/{spec['name']}/weights/last.pt"))
    if found:
        return found[0].parent.parent
    task = str(spec["trainArgs"].get("task") or "detect")
    return cwd / "runs" / task / spec["project"] / spec["name"]


def fetch_checkpoint(url: str, target: Path) -> bool:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    try:
        with urllib.request.urlopen(url, timeout=120) as response, partial.open("wb") as out:
            while chunk := response.read(1 << 20):
                out.write(chunk)
    except OSError as exc:
        print(f"lanner worker: could not fetch the last uploaded checkpoint: {exc}", file=sys.stderr)
        partial.unlink(missing_ok=True)
        return False
    partial.replace(target)
    return True


def train_arguments(spec: dict[str, Any], cwd: Path) -> list[str]:
    """The ``yolo`` argv (after the program name) for this attempt."""
    device = resolve_device(spec.get("device"))
    args = dict(spec["trainArgs"])
    if spec.get("resume"):
        run_dir = save_dir(spec, cwd)
        last = run_dir / "weights" / "last.pt"
        if not last.exists() and spec.get("checkpointUrl"):
            fetch_checkpoint(spec["checkpointUrl"], last)
        if last.exists():
            # The trainer continues the Platform model recorded here (its resume path).
            (run_dir / "platform_model_id.txt").write_text(spec["modelId"])
            print(f"lanner worker: attempt {spec.get('attempt')} resumes from {last}", flush=True)
            return ["train", f"model={last}", "resume=True", f"data={cli_value(args['data'])}", f"device={device}"]
        print("lanner worker: no checkpoint to resume from; training again from the start", flush=True)
    args.update(project=spec["project"], name=spec["name"], exist_ok=True, device=device)
    return ["train", *(f"{key}={cli_value(value)}" for key, value in args.items() if value is not None)]


def main() -> None:
    raw = os.environ.get(SPEC_ENV)
    if not raw:
        sys.exit(f"lanner worker: {SPEC_ENV} is not set")
    spec = json.loads(raw)
    if os.environ.get("LANNER_WORKER_DIR"):  # Ray nodes: the run's folder on this node
        Path(os.path.expanduser(os.environ["LANNER_WORKER_DIR"])).mkdir(parents=True, exist_ok=True)
        os.chdir(os.path.expanduser(os.environ["LANNER_WORKER_DIR"]))
    cwd = Path.cwd()
    configure_trainer(cwd)
    argv = train_arguments(spec, cwd)
    yolo = Path(sys.executable).with_name("yolo")
    program = str(yolo) if yolo.exists() else "yolo"
    print(f"lanner worker: run {spec['runId']} attempt {spec.get('attempt')}: yolo {' '.join(argv)}", flush=True)
    env = {k: v for k, v in os.environ.items() if k != SPEC_ENV and not k.startswith("PYTEST")}
    os.execvpe(program, [program, *argv], env)


if __name__ == "__main__":
    main()
