"""Where a shared-inference server spends its time under load (issue 16): py-spy samples ``lanner serve`` while
32 clients send images, and prints the functions with the most samples (own time and total).

    .venv/bin/python benchmarks/profile_predict.py --imgsz 640 [--max-batch 16] [--seconds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import inference_bench as bench
from common import venv_bin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--max-batch", default="16")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--clients", type=int, default=bench.CLIENTS)
    parser.add_argument("--native", action="store_true", help="C frames too (slower sampling)")
    parser.add_argument("--thread", default="", help="only stacks of threads whose name contains this")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lanner-inference-profile-"))
    home = work / "home"
    bench._cli(bench._env(home), "users", "create", bench.USER)
    key = bench._cli(bench._env(home), "keys", "create", bench.USER)
    models = {"yolo11n": bench._models(work)["yolo11n"]}
    image = work / "img.jpg"
    image.write_bytes(bench.encoded(bench.shapes_image(640, 480, seed=1)))
    server = bench._server("profiled", home, work, LANNER_INFERENCE_MAX_BATCH=args.max_batch)
    server.start()
    raw = work / "profile.txt"
    try:
        bench._upload(server.url, key, models)
        url, data = bench._predict_url(server, "yolo11n"), image.read_bytes()
        asyncio.run(bench._load(url, key, data, args.imgsz, 3.0))  # model loaded, lanes warm: not profiled
        load = threading.Thread(target=lambda: print(asyncio.run(bench._load(url, key, data, args.imgsz,
                                                                            args.seconds + 5, args.clients))))
        load.start()
        subprocess.run([venv_bin("py-spy"), "record", "--pid", str(server.proc.pid), "--duration",
                        str(int(args.seconds)), "--format", "raw", "--output", str(raw), "--threads",
                        "--rate", "200", *(["--native"] if args.native else ["--nonblocking"])], check=True,
                       capture_output=True)
        load.join()
    finally:
        server.stop()
    own, total = collections.Counter(), collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if args.thread and args.thread not in frames[0]:
            continue
        samples += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            total[frame] += int(count)
    print(f"{samples} samples (all threads)")
    for title, counter in (("own time", own), ("total time", total)):
        print(f"-- {title}")
        for frame, count in counter.most_common(25):
            print(f"{100 * count / samples:5.1f}%  {frame[:150]}")


if __name__ == "__main__":
    sys.exit(main())
