"""The labelling assistant (issue 17) on this machine's CPU: how many of its proposals a person would accept
unchanged, and how long after the 20th label its first proposal arrives.

    PYTHONPATH=. .venv/bin/python -m benchmarks.assistant --runs 3 --write-doc

Each run is one labelling session (``tests/assistant/scenario.py``) against its own ``lanner serve`` from this
tree (local executor, CPU, supervisor and assistant polling every 0.5 s): a synthetic shapes dataset of 50
96-px images (40 train, 10 val) is uploaded without labels; the assistant is turned on (20 labels, 30 epochs,
imgsz 96, GPU type cpu; the round adds batch 4, no warm-up and no mosaic for its few images); a person labels
the 20 images "label next" offers, one by one in the annotate API, with the generator's labels; round 1
fine-tunes the operator's official yolo11n, here ``tests/trained.py``'s shape localizer (one class, "shape",
trained on 200 other synthetic images: it finds shapes but cannot tell a circle from a square; registered with
``lanner models add-official``; nothing is downloaded). Then:

- time to first proposal: from the answer to the 20th label's save to the first proposal served on an
  unlabelled image (the round's dataset build, queueing, the trainer's start-up, 30 epochs, upload of the
  weights, scoring of the 30 unlabelled images, and one call of the proposals API);
- accepted unchanged: of the proposals on the 30 unlabelled images (conf >= 0.25), the share with the right
  class and IoU >= 0.9 with a ground-truth box (each box accepts one proposal);
- mAP50 of the proposals (conf >= 0.05) on those images against the ground truth, and the run's own mAP50 on
  its labelled validation images.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, cpu_model, ram_bytes, write_section

TITLE = "## Labelling assistant (issue 17)"


def one_run(work: Path, base: Path) -> dict[str, Any]:
    from tests.assistant.scenario import session

    outcome = session(work, base)
    first = outcome.state["rounds"][0]
    return {"seconds": outcome.seconds_to_first_proposal, "shown": outcome.shown, "unchanged": outcome.unchanged,
            "map50": outcome.map50, "run_map50": first["mAP50"]}


def render(runs: list[dict[str, Any]], facts: dict[str, str]) -> str:
    lines = [TITLE, "", __doc__.split("\n\n", 2)[2].strip(), "",
             f"- Machine: {facts['cpu']}, {facts['cpus']} CPUs, {facts['ram']}; load average {facts['load']} "
             "before (other engineers' tests share it)",
             f"- Date: {facts['date']}; Lanner commit {facts['commit']}",
             f"- Command: `{facts['command']}`", "",
             "| run | 20th label to first proposal | accepted unchanged | proposals mAP50 (unlabelled images) "
             "| the run's mAP50 (labelled val) |", "|---|---|---|---|---|"]
    for i, r in enumerate(runs, start=1):
        share = r["unchanged"] / r["shown"] if r["shown"] else 0.0
        lines.append(f"| {i} | {r['seconds']:.1f} s | {share:.0%} ({r['unchanged']}/{r['shown']}) "
                     f"| {r['map50']:.3f} | {r['run_map50'] if r['run_map50'] is None else round(r['run_map50'], 3)} |")
    shown = sum(r["shown"] for r in runs)
    lines += ["", f"Median time to the first proposal {statistics.median(r['seconds'] for r in runs):.1f} s; "
                  f"accepted unchanged {sum(r['unchanged'] for r in runs) / max(shown, 1):.0%} of {shown} proposals; "
                  f"lowest proposals mAP50 {min(r['map50'] for r in runs):.3f}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write-doc", action="store_true")
    args = parser.parse_args()
    from tests.trained import shape_localizer

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    runs = []
    with tempfile.TemporaryDirectory(prefix="assistant-bench-") as folder:
        work = Path(folder)
        base = shape_localizer(work / "localizer-cache")
        for i in range(args.runs):
            result = one_run(work / f"run-{i}", base)
            print(result, flush=True)
            runs.append(result)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    facts = {"cpu": cpu_model(), "cpus": str(len(os.sched_getaffinity(0))), "ram": f"{ram_bytes() / 2**30:.1f} GiB",
             "load": load, "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit,
             "command": "PYTHONPATH=. python -m benchmarks.assistant " + " ".join(sys.argv[1:])}
    section = render(runs, facts)
    print(section)
    if args.write_doc:
        write_section(TITLE, section)


if __name__ == "__main__":
    main()
