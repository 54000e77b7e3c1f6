"""Dataset import into the bucket store vs the disk store (issue 30): the same ``lanner datasets import ZIP`` of
import_bench.py's synthetic 640x480 JPEGs, once with blobs under LANNER_HOME/blobs (``LANNER_BLOB_STORE=local``)
and once into an S3 bucket (``LANNER_BLOB_STORE=s3`` on moto's S3 server, started here), alternating in rounds.

    .venv/bin/python benchmarks/import_store_bench.py [--images 2000] [--rounds 3] [--archives DIR] [--no-doc]

Each import runs in a fresh LANNER_HOME (and, for the bucket, a fresh bucket: nothing dedups). The CLI's process
tree is sampled every 0.1 s for CPU time and bytes written to disk (``/proc/PID/io`` write_bytes, last value per
pid); moto's own CPU time over the run is its counter after minus before. What the store holds after the run is
summed from the blob folder or from the bucket's listing. The result digest (import_bench.result_digest) must be
the same for both stores. moto is a Python server on the same cores: its CPU is reported beside the import's.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import obstore
import psutil
from common import ROOT, run_cli, venv_bin, write_section
from import_bench import OWNER, TreeSampler, archives, machine, result_digest

sys.path.insert(0, str(ROOT))

from lanner.storage.s3 import S3BlobStore  # noqa: E402
from tests.storage.moto import CREDENTIALS, moto_server, new_bucket, s3_env  # noqa: E402

SECTION = "## Import into the bucket store vs the disk store (issue 30)"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Run:
    store: str  # "local" or "s3"
    images: int
    wall_s: float = 0.0
    ingest_s: float = 0.0
    cpu_s: float = 0.0        # the CLI's process tree
    moto_cpu_s: float = 0.0   # moto_server over the same run (s3 only)
    disk_written: int = 0     # write_bytes of the CLI's tree
    stored: int = 0           # bytes the blob store holds afterwards
    objects: int = 0          # blobs (files or objects) it holds
    digest: str = ""

    @property
    def images_per_s(self) -> float:
        return self.images / self.wall_s if self.wall_s else 0.0


class IoSampler(TreeSampler):
    """TreeSampler plus each process's bytes written to disk (the last value seen per pid)."""

    def __init__(self, root_pid: int) -> None:
        super().__init__(root_pid)
        self.written: dict[int, int] = {}

    def sample(self, t: float) -> None:
        super().sample(t)
        try:
            tree = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return
        for proc in tree:
            try:
                self.written[proc.pid] = proc.io_counters().write_bytes
            except psutil.Error:
                continue


def folder_bytes(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []
    return sum(p.stat().st_size for p in files), len(files)


def bucket_bytes(endpoint: str, bucket: str, scratch: Path) -> tuple[int, int]:
    store = S3BlobStore(bucket=bucket, endpoint=endpoint, region="us-east-1", path_style=True, allow_http=True,
                        scratch=scratch, **CREDENTIALS)
    sizes = [meta["size"] for batch in obstore.list(store.store, None, chunk_size=1000) for meta in batch]
    return sum(sizes), len(sizes)


def timed_import(archive: Path, images: int, store: str, work: Path, endpoint: str, moto: psutil.Process) -> Run:
    run = Run(store=store, images=images)
    home = Path(tempfile.mkdtemp(prefix="home-", dir=work))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
    env.update(LANNER_HOME=str(home), PYTHONPATH=env.get("PYTHONPATH", str(ROOT)))
    bucket = ""
    if store == "s3":
        bucket = new_bucket(endpoint)
        env.update(s3_env(endpoint, bucket))
    run_cli(["users", "create", OWNER], env)
    argv = [venv_bin("lanner"), "datasets", "import", str(archive), "--owner", OWNER, "--name", "big"]
    moto_before = sum(moto.cpu_times()[:2])
    with open(home / "import.log", "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        sampler = IoSampler(proc.pid)
        while proc.poll() is None:
            sampler.sample(time.perf_counter() - t0)
            time.sleep(0.1)
        run.wall_s = time.perf_counter() - t0
    run.moto_cpu_s = sum(moto.cpu_times()[:2]) - moto_before
    output = (home / "import.log").read_text(errors="replace")
    if proc.returncode != 0 or not re.search(r"imported (\d+) images", output):
        raise RuntimeError(f"{store} import failed ({proc.returncode}):\n{output[-3000:]}")
    run.cpu_s = sum(sampler.cpu.values())
    run.disk_written = sum(sampler.written.values())
    if store == "s3":
        run.stored, run.objects = bucket_bytes(endpoint, bucket, work / "scratch")
    else:
        run.stored, run.objects = folder_bytes(home / "blobs")
    run.digest, run.ingest_s = result_digest(home, "big")
    shutil.rmtree(home, ignore_errors=True)
    log(f"[import] {store}: {run.wall_s:.1f} s ({run.images_per_s:,.0f} images/s), CPU {run.cpu_s:.1f} s + moto "
        f"{run.moto_cpu_s:.1f} s, disk written {run.disk_written / 2**20:,.1f} MiB, stored {run.stored / 2**20:,.1f} "
        f"MiB in {run.objects:,} blobs, digest {run.digest}")
    return run


def render(runs: list[Run], info: dict[str, str], start_load: str, command: str, archive: Path) -> str:
    rows = ["| round | store | wall s | images/s | ingest s | CPU s (import tree) | CPU ms / image (import) "
            "| moto CPU s | CPU ms / image (all) | moto share of CPU | disk written MiB | stored MiB (blobs) "
            "| result digest |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for index, r in enumerate(runs):
        total = r.cpu_s + r.moto_cpu_s
        rows.append(f"| {index // 2 + 1} | {r.store} | {r.wall_s:.1f} | {r.images_per_s:,.0f} | {r.ingest_s:.1f} | "
                    f"{r.cpu_s:.1f} | {1000 * r.cpu_s / r.images:.1f} | {r.moto_cpu_s:.1f} | "
                    f"{1000 * total / r.images:.1f} | {100 * r.moto_cpu_s / total:.0f} % | "
                    f"{r.disk_written / 2**20:,.1f} | {r.stored / 2**20:,.1f} ({r.objects:,}) | `{r.digest}` |")
    summary = []
    for store in ("local", "s3"):
        mine = [r for r in runs if r.store == store]
        best = max(mine, key=lambda r: r.images_per_s)
        mean_cpu = sum(r.cpu_s + r.moto_cpu_s for r in mine) / len(mine) / mine[0].images
        summary.append(f"- {store}: best {best.images_per_s:,.0f} images/s, median "
                       f"{sorted(r.images_per_s for r in mine)[len(mine) // 2]:,.0f} images/s; "
                       f"{1000 * mean_cpu:.1f} ms CPU per image with moto (mean of {len(mine)})")
    local = [r for r in runs if r.store == "local"]
    s3 = [r for r in runs if r.store == "s3"]
    ratios = sorted(b.images_per_s / a.images_per_s for a, b in zip(local, s3, strict=False))
    digests = {r.digest for r in runs}
    summary.append(f"- Bucket / disk images/s, one ratio per round (sorted): {', '.join(f'{x:.2f}x' for x in ratios)}")
    cores = len(os.sched_getaffinity(0))
    moto_cpu = sum(r.moto_cpu_s for r in s3)
    summary.append(f"- moto in the bucket runs: {moto_cpu / sum(r.cpu_s + r.moto_cpu_s for r in s3):.0%} of all their "
                   f"CPU time, {moto_cpu / sum(cores * r.wall_s for r in s3):.0%} of the {cores} cores' time over "
                   "those runs (the rest went to the import and to other work on the machine)")
    summary.append("- Disk written in the bucket runs is mostly the import's own scratch (the archive unpacked under "
                   "LANNER_HOME, then each file put in the bucket) and the SQLite database; the disk store "
                   "also writes the thumbnails and its shard folders")
    summary.append(f"- Same result from both stores: {'yes, one digest' if len(digests) == 1 else '**NO**'}")
    lines = [SECTION, "",
             f"`benchmarks/import_store_bench.py`: `lanner datasets import ZIP --owner bench --name big` of "
             f"{runs[0].images:,} 640x480 JPEGs ({archive.stat().st_size / 2**20:,.1f} MiB archive, "
             "import_bench.py's synthetic YOLO zips), each run in a fresh LANNER_HOME on the default SQLite "
             "database, alternating the disk store (`LANNER_BLOB_STORE=local`) and the bucket store "
             "(`LANNER_BLOB_STORE=s3`, a fresh bucket each run on one moto 5 `moto_server` started by the bench, "
             "`LANNER_S3_PATH_STYLE=true`, `LANNER_S3_ALLOW_HTTP=true`). Wall time includes CLI start-up; CPU "
             "and disk bytes written (`/proc/PID/io` write_bytes) are sampled every 0.1 s over the CLI's process "
             "tree (the import and its image workers); moto's CPU is its own process's, over the same run. moto "
             "keeps objects in memory and runs in Python on the same 2 cores: a real S3 costs the host nothing "
             "of that CPU, but adds network latency moto does not have. Odd rounds import into the disk store "
             "first, even rounds into the bucket first. \"Stored\" is what the blob folder or the bucket holds "
             "afterwards (images and thumbnails).",
             "",
             f"- Machine: {info['cpus']} CPUs ({info['cpu']}), {info['ram']} RAM, shared with other work; load "
             f"average before the run {start_load} (1/5/15 min), after it {info['load']}",
             f"- Date: {info['date']}",
             f"- Commit: {info['commit']}",
             f"- Command: `{command}`",
             "", *rows, "", *summary, ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description="Dataset import into the bucket store vs the disk store.")
    parser.add_argument("--images", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of one import into each store")
    parser.add_argument("--archives", type=Path, help="keep the drawn archives here and reuse them")
    parser.add_argument("--no-doc", action="store_true")
    args = parser.parse_args()
    command = ".venv/bin/python benchmarks/import_store_bench.py " + " ".join(sys.argv[1:])
    start_load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="lanner-import-store-bench-"))
    folder = args.archives or work / "archives"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        archive = archives(folder, "640x480", [args.images])[0]
        runs: list[Run] = []
        with moto_server(work / "moto.log") as endpoint:
            moto = next(p for p in psutil.Process().children() if "moto_server" in " ".join(p.cmdline()))
            for index in range(args.rounds):
                order = ("local", "s3") if index % 2 == 0 else ("s3", "local")
                pair = {store: timed_import(archive, args.images, store, work, endpoint, moto) for store in order}
                runs += [pair["local"], pair["s3"]]
        info = machine()
        section = render(runs, info, start_load, command, archive)
        print(section)
        if not args.no_doc:
            write_section(SECTION, section)
            log(f"wrote {SECTION!r} in docs/benchmarks.md")
        return 0 if len({r.digest for r in runs}) == 1 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
