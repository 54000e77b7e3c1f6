"""Export the nano model (YOLO11n, built from its YAML: random weights, nothing downloaded) to every format this
server offers, each in a fresh process with the export worker's clean environment, and record how long the
export took and how large the download is (a folder artefact zipped, as Lanner serves it). Formats this server
refuses are listed with the reason. Writes ``benchmarks/export_formats.json``; the README and
``docs/benchmarks.md`` quote it.

    PYTHONPATH=. .venv/bin/python benchmarks/export_formats.py [--imgsz 640] [--formats onnx,ncnn]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lanner.exports.formats import FORMATS, unavailable

OUT = Path(__file__).with_name("export_formats.json")

_CHILD = """
import json, sys, time
from pathlib import Path
from lanner.exports.worker import pack
from ultralytics import YOLO
weights, fmt, imgsz, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
started = time.perf_counter()
output = Path(YOLO(weights).export(format=fmt, imgsz=imgsz, device="cpu"))
seconds = time.perf_counter() - started
name = output.name + ".zip" if output.is_dir() else output.name
artefact = pack(output, folder, name)
print("RESULT " + json.dumps({"seconds": round(seconds, 2), "bytes": artefact.stat().st_size,
                              "folder": output.is_dir()}))
"""


def clean_env(home: Path) -> dict[str, str]:
    """What ``exports.queue`` gives a worker."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
           "YOLO_CONFIG_DIR": str(home / "config"), "YOLO_OFFLINE": "1", "PIP_NO_INDEX": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "2"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--formats", default="")
    options = parser.parse_args()
    wanted = [f for f in options.formats.split(",") if f] or list(FORMATS)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch)
        weights = home / "yolo11n.pt"
        build = f"from ultralytics import YOLO; YOLO('yolo11n.yaml').save({str(weights)!r})"
        subprocess.run([sys.executable, "-c", build], env=clean_env(home), cwd=home, check=True, capture_output=True)
        for fmt in wanted:
            reason = unavailable(fmt)
            if reason:
                results[fmt] = {"works": False, "reason": reason}
                continue
            folder = home / fmt
            folder.mkdir()
            started = time.perf_counter()
            child = subprocess.run([sys.executable, "-c", _CHILD, str(weights), fmt, str(options.imgsz), str(folder)],
                                   env=clean_env(home), cwd=folder, capture_output=True, text=True, check=False)
            line = next((ln for ln in child.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if child.returncode or line is None:
                results[fmt] = {"works": False, "reason": (child.stdout + child.stderr)[-800:]}
            else:
                results[fmt] = {"works": True, **json.loads(line[7:]),
                                "processSeconds": round(time.perf_counter() - started, 2)}
            print(fmt, results[fmt], flush=True)
    OUT.write_text(json.dumps({"machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
                               "date": time.strftime("%Y-%m-%d"), "model": "yolo11n.yaml (random weights)",
                               "imgsz": options.imgsz, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
