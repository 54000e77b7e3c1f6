"""How long an estimate takes when a process starts (issue 27): ``lanner estimate`` cold (a fresh LANNER_HOME)
and warm (run again), and the first estimate a freshly started server computes (what ``training.start``'s first
call pays), with and without the start-up warm-up.

    .venv/bin/python benchmarks/estimate_startup.py --checkout /path/to/old/checkout --runs 5

Each checkout's ``lanner`` package is imported from that checkout (PYTHONPATH), with this interpreter, so the
same script measures "before" on an older checkout (which has no warm-up: its server case runs without it).
Checkouts alternate run by run, so a machine whose load changes hurts both alike. Wall time and the CPU time
(user + system) of each child process are reported; on a shared machine the CPU time is the steadier figure.
``--warm-only`` skips the cold runs and the server case: each checkout's home is migrated and warmed once
(unmeasured), then only warm ``lanner estimate`` runs are timed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ESTIMATE = ["estimate", "--model", "yolo11n.yaml", "--train-images", "1000", "--val-images", "100"]
# The first estimate of a started server, timed in the process: the app starts (lifespan), waits for its
# start-up warm-up where it has one, then estimates as training.start does.
SERVER = """
import inspect, sys, time
from fastapi.testclient import TestClient
from lanner.app import create_app
from lanner.config import get_settings
from lanner.gpus import advisor
from lanner.gpus.catalogue import get_catalogue
from lanner.training.estimates import advise
warm = "prepare_estimates" in inspect.signature(create_app).parameters
app = create_app(**({"prepare_estimates": True} if warm else {}))
with TestClient(app):
    if warm:
        app.state.training.estimates_ready.wait(600)
    ctx = app.state.lanner
    request = advisor.Request(model="yolo11n.yaml", train_images=1000, val_images=100, train_args={}, tier="free")
    started = time.perf_counter()
    with ctx.db.session() as session:
        advise(session, get_catalogue(ctx.settings), request)
    print(f"{time.perf_counter() - started:.3f}")
"""


def child(checkout: Path, home: Path, args: list[str]) -> tuple[float, float, str]:
    """(wall s, CPU s, stdout) of one child process."""
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(checkout), "LANNER_HOME": str(home), "COLUMNS": "80"}
    env.pop("LANNER_DATABASE_URL", None)
    # Bytecode caches written and read, as an installed lanner has them (pip compiles at install), whatever the
    # calling shell sets: every checkout is measured the same way.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # cwd: the home, not a checkout (``python -m`` and ``-c`` put the working folder first on sys.path)
    done = subprocess.run([sys.executable, *args], env=env, cwd=home, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{checkout}: {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, action="append", default=[],
                        help="another checkout to measure (repeatable); this one is always measured")
    parser.add_argument("--runs", type=int, default=5, help="warm runs per checkout")
    parser.add_argument("--warm-only", action="store_true", help="time only the warm runs (no cold, no server)")
    options = parser.parse_args()
    checkouts = [*options.checkout, ROOT]
    results: dict[Path, dict[str, list[tuple[float, float]]]] = {c: {} for c in checkouts}
    print(f"load average at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(options.runs + 1):
            for checkout in checkouts:
                home = Path(scratch) / f"{checkouts.index(checkout)}"
                if run == 0:  # a fresh home: migrate first, so the cold estimate measures the estimate
                    child(checkout, home, ["-m", "lanner.cli", "db", "upgrade"])
                case = "cli cold" if run == 0 else "cli warm"
                wall, cpu, _ = child(checkout, home, ["-m", "lanner.cli", *ESTIMATE])
                if run or not options.warm_only:
                    results[checkout].setdefault(case, []).append((wall, cpu))
            if run == 0 and not options.warm_only:
                for checkout in checkouts:
                    home = Path(scratch) / f"server-{checkouts.index(checkout)}"
                    child(checkout, home, ["-m", "lanner.cli", "db", "upgrade"])
                    _, _, out = child(checkout, home, ["-c", SERVER])
                    results[checkout]["server first estimate"] = [(float(out.split()[-1]), 0.0)]
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for checkout, cases in results.items():
        for case, values in cases.items():
            wall = statistics.median(v[0] for v in values)
            cpu = statistics.median(v[1] for v in values)
            each = f" ({' / '.join(f'{v[0]:.2f}' for v in sorted(values))})" if len(values) > 1 else ""
            print(f"{checkout}\t{case}\tmedian of {len(values)}: {wall:.2f} s wall{each}" +
                  (f", {cpu:.2f} s CPU" if cpu else " (in the process, after start-up)"))

if __name__ == "__main__":
    main()
