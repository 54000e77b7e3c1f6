"""What an executor runs for one attempt: ``python -m lanner.training.worker``, which runs the real
``yolo train`` as its child (same process group, so stopping the worker stops the trainer) and exits the way
the trainer did (a trainer killed by a signal kills the worker with the same signal, so the executor sees it).

Everything comes from the environment the executor built: ``LANNER_WORKER_SPEC`` (JSON, below) plus
``ULTRALYTICS_PLATFORM_URL`` and a run-scoped ``ULTRALYTICS_API_KEY``, so the trainer reports through the same
protocol as any other trainer. While it trains, the worker uploads ``weights/last.pt`` as the run's resume
checkpoint whenever it changed and ``checkpointEverySeconds`` have passed (the trainer's own uploads come every 15
minutes): to Lanner's signed route, or, with blobs in a bucket, straight into the bucket by a presigned URL,
then confirmed so the server reads it back and records it (``training.checkpoints``). A relaunch after a lost
attempt resumes from ``weights/last.pt`` in the run's folder when this node still has it, otherwise from that
uploaded checkpoint.

Spec: ``{"runId", "modelId", "attempt", "resume", "trainArgs", "project", "name", "device", "checkpointUrl",
"checkpointEverySeconds"}``; ``device`` is "cpu", "auto" (one GPU if there is one) or "0,1,..." for a run on several
GPUs (``trainer_device``), which the trainer then trains with DDP.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
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


def trainer_device(gpu_count: int) -> str:
    """The spec's ``device`` for a GPU run on ``gpu_count`` GPUs: "auto" for one, else "0,1,...", the indices of
    the GPUs the executor made visible (``CUDA_VISIBLE_DEVICES``: Ray sets it on its node, the local executor to the
    devices it reserved), so they always count from 0."""
    return "auto" if gpu_count <= 1 else ",".join(str(index) for index in range(gpu_count))


def resolve_device(device: str | None) -> str:
    if device and device != "auto":
        return device
    try:
        import torch  # the worker imports only the standard library at start; torch may be absent

        return "0" if torch.cuda.is_available() else "cpu"
    except Exception:
        return "cpu"


def configure_trainer(cwd: Path, yolo: str, env: dict[str, str]) -> None:
    """Keep everything the trainer writes (runs, downloaded datasets, weights) inside the run's folder, and
    turn analytics off, through the trainer's own settings command (``YOLO_CONFIG_DIR`` is per run). A child
    process: importing the trainer here would keep a second copy of torch in memory for the whole run."""
    subprocess.run([yolo, "settings", f"runs_dir={cwd / 'runs'}", f"datasets_dir={cwd / 'datasets'}",
                    f"weights_dir={cwd / 'weights'}", "sync=False"], env=env, check=False,
                   stdout=subprocess.DEVNULL)


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
            if missing := getattr(response, "length", None):  # http.client ends a cut-short body silently
                raise ConnectionError(f"the answer ended {missing} bytes short")
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
        if not last.exists() and spec.get("checkpointUrl") and fetch_checkpoint(spec["checkpointUrl"], last):
            print("lanner worker: no local checkpoint on this node; fetched the run's uploaded one", flush=True)
        if last.exists() and not resumable(last):
            print(f"lanner worker: {last} is a finished training's (no epoch or optimizer state: its reports never "
                  "reached Lanner); training again from the start with the run's settings", flush=True)
        elif last.exists():
            # The trainer continues the Platform model recorded here (its resume path).
            (run_dir / "platform_model_id.txt").write_text(spec["modelId"])
            print(f"lanner worker: attempt {spec.get('attempt')} resumes from {last}", flush=True)
            return ["train", f"model={last}", "resume=True", f"data={cli_value(args['data'])}", f"device={device}"]
        print("lanner worker: no checkpoint to resume from; training again from the start", flush=True)
    args.update(project=spec["project"], name=spec["name"], exist_ok=True, device=device)
    return ["train", *(f"{key}={cli_value(value)}" for key, value in args.items() if value is not None)]


def resumable(last: Path) -> bool:
    """Whether ``last.pt`` is mid-training: the trainer keeps the epoch and optimizer state in it each epoch and
    strips both once training ends. ``resume=True`` on a finished one starts a *new* training with the trainer's
    defaults (100 epochs, batch 16), not the run's settings: so a run whose trainer finished but could not report
    (its server gone) must train again as the run says, not resume."""
    import torch  # only on a resume: the worker imports only the standard library at start

    try:
        ckpt = torch.load(last, map_location="cpu", weights_only=False)
    except Exception as exc:  # a torn file from a killed trainer: nothing to resume from
        print(f"lanner worker: {last} cannot be read ({exc.__class__.__name__}: {exc})", file=sys.stderr)
        return False
    return isinstance(ckpt, dict) and ckpt.get("epoch", -1) >= 0 and ckpt.get("optimizer") is not None


def upload_resume_checkpoint(spec: dict[str, Any], last: Path) -> bool:
    """Stage ``last.pt`` as this run's resume checkpoint: not promoted onto the model, only kept for a relaunch.
    A ``direct`` slot (blobs in a bucket) is a presigned PUT: no Lanner key goes with it, and the upload counts
    only once confirmed (the server reads it back then); a confirmation that fails leaves the previous one."""
    import httpx  # the worker imports only the standard library at start (it runs in LANNER_WORKER_PYTHON)

    base = os.environ.get("ULTRALYTICS_PLATFORM_URL", "").rstrip("/")
    key = os.environ.get("ULTRALYTICS_API_KEY", "")
    if not base or not key:
        return False
    copy = last.with_name("last.lanner-upload.pt")  # the trainer rewrites last.pt each epoch: upload a snapshot
    try:
        shutil.copyfile(last, copy)
        with httpx.Client(timeout=120) as client:
            auth = {"Authorization": f"Bearer {key}"}
            slot = client.post(f"{base}/api/webhooks/models/upload", headers=auth, json={
                "modelId": spec["modelId"], "runId": spec["runId"], "filename": "last.pt", "direct": True})
            slot.raise_for_status()
            answer = slot.json()
            with copy.open("rb") as body:
                client.put(answer["uploadUrl"], content=body).raise_for_status()
            if answer.get("direct"):
                client.post(f"{base}/api/webhooks/models/upload/complete", headers=auth, json={
                    "modelId": answer["modelId"], "uploadPath": answer["uploadPath"]}).raise_for_status()
        return True
    except (OSError, httpx.HTTPError, KeyError, ValueError) as exc:
        print(f"lanner worker: resume checkpoint upload failed: {exc}", file=sys.stderr, flush=True)
        return False
    finally:
        copy.unlink(missing_ok=True)


def supervise(child: subprocess.Popen, spec: dict[str, Any], cwd: Path, every: float) -> int:
    """Wait for the trainer, uploading its ``last.pt`` when it changed and ``every`` seconds have passed."""
    uploaded: tuple[float, int] | None = None
    seen: tuple[float, int] | None = None
    uploaded_at = 0.0
    while child.poll() is None:
        time.sleep(min(5.0, max(0.2, every / 4)))
        last = save_dir(spec, cwd) / "weights" / "last.pt"
        try:
            stat = last.stat()
        except OSError:
            continue
        current, previous, seen = (stat.st_mtime, stat.st_size), seen, (stat.st_mtime, stat.st_size)
        if current != previous:
            continue  # changed since the last look: it may still be being written
        if current != uploaded and time.monotonic() - uploaded_at >= every and child.poll() is None:
            if upload_resume_checkpoint(spec, last):
                uploaded, uploaded_at = current, time.monotonic()
                print(f"lanner worker: uploaded the resume checkpoint ({stat.st_size} bytes)", flush=True)
    return child.returncode


def main() -> None:
    raw = os.environ.get(SPEC_ENV)
    if not raw:
        sys.exit(f"lanner worker: {SPEC_ENV} is not set")
    spec = json.loads(raw)
    if os.environ.get("LANNER_WORKER_DIR"):  # Ray nodes: the run's folder on this node
        Path(os.path.expanduser(os.environ["LANNER_WORKER_DIR"])).mkdir(parents=True, exist_ok=True)
        os.chdir(os.path.expanduser(os.environ["LANNER_WORKER_DIR"]))
    cwd = Path.cwd()
    yolo_path = Path(sys.executable).with_name("yolo")
    program = str(yolo_path) if yolo_path.exists() else "yolo"
    env = {k: v for k, v in os.environ.items() if k != SPEC_ENV and not k.startswith("PYTEST")}
    configure_trainer(cwd, program, env)
    argv = train_arguments(spec, cwd)
    print(f"lanner worker: run {spec['runId']} attempt {spec.get('attempt')}: yolo {' '.join(argv)}", flush=True)
    child = subprocess.Popen([program, *argv], env=env)
    for sig in (signal.SIGTERM, signal.SIGINT):  # pass a polite stop on; the group's SIGKILL needs no help
        signal.signal(sig, lambda number, _frame: child.send_signal(number))
    code = supervise(child, spec, cwd, float(spec.get("checkpointEverySeconds") or 600))
    if code < 0:  # die the way the trainer died, so the executor tells a kill from an error
        if -code in (signal.SIGTERM, signal.SIGINT):
            signal.signal(-code, signal.SIG_DFL)  # the pass-on handler set above
        os.kill(os.getpid(), -code)
        time.sleep(5)  # a signal whose default is not to terminate: fall through to a plain failure
        sys.exit(128 - code)
    sys.exit(code)


if __name__ == "__main__":
    main()
