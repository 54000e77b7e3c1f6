"""Dataset import throughput (issue 19): ``lanner datasets import ZIP`` of 640x480 JPEGs with thumbnails, this
checkout against an older one (``--before``) in the same run, with each run's peak memory.

    .venv/bin/python benchmarks/import_bench.py [--images 10000] [--small-images 2000] [--size 640x480]
        [--before /tmp/lanner-before] [--repeat 2] [--archives DIR] [--no-doc]
    .venv/bin/python benchmarks/import_bench.py --py-spy docs/profiles/import-after.svg [--before PATH]

The archives are datasets_bench.py's synthetic YOLO detection zips (every image distinct, JPEG quality 90, 1-3
shapes each with a label file, 80/20 train/val), drawn once and kept in ``--archives``. Each import runs in a fresh
LANNER_HOME (so nothing dedups against an earlier run) as a subprocess under ``/usr/bin/time -v``; ``--before PATH``
runs the same command with ``PYTHONPATH=PATH`` (e.g. ``git worktree add`` or ``git archive`` of the base commit),
alternating with this checkout ``--repeat`` times. While a run goes, psutil samples its whole process tree (the
CLI, and with a pool its image workers) every 0.1 s: the sum of their RSS, of their PSS (shared pages
counted once), and their CPU time. Every run's result is reduced to one digest of what it stored (each item's
split, name, image digest and labels, each image's size, dimensions, phash and thumbnail digest, the health
summary and the skipped files): runs of the same archive must agree.

``--py-spy OUT.svg`` instead profiles one import of the big archive (``py-spy record --subprocesses``) and exits.
Rewrites the "## Dataset import (issue 19)" section of docs/benchmarks.md and the import rows of the
"## Datasets (issue 4)" section.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from common import DOC, ROOT, cpu_model, ram_bytes, run_cli, venv_bin, write_section
from datasets_bench import ensure_gnu_time, make_zips

SECTION = "## Dataset import (issue 19)"
ISSUE4 = "## Datasets (issue 4)"
OWNER = "bench"
TARGET_IMAGES_PER_S = 800.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Run:
    code: str                # "this checkout" or "before (...)"
    store: str               # "fresh" or "warm": the blob store's 65,536 shard folders made beforehand
    archive: Path
    images: int
    size: str
    wall_s: float = 0.0
    ingest_s: float = 0.0
    added: int = 0
    cpu_s: float = 0.0       # sampled over the tree
    rss_mb: float = 0.0      # peak of the sampled tree sum
    pss_mb: float = 0.0      # peak of the sampled tree sum
    largest_mb: float = 0.0  # GNU time: the largest single process
    processes: int = 0       # most processes seen at once in the tree
    digest: str = ""
    rss_at: dict[int, float] = field(default_factory=dict)

    @property
    def images_per_s(self) -> float:
        return self.images / self.wall_s if self.wall_s else 0.0


class TreeSampler:
    """RSS, PSS and CPU time of a process and all its descendants, sampled; CPU is the last value per pid."""

    def __init__(self, root_pid: int) -> None:
        self.root = psutil.Process(root_pid)
        self.samples: list[tuple[float, float, float]] = []  # (t, rss MB, pss MB)
        self.cpu: dict[int, float] = {}
        self.most = 0

    def sample(self, t: float) -> None:
        rss = pss = 0
        try:
            tree = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return
        alive = 0
        for proc in tree:
            try:
                if proc.name() == "time":
                    continue
                memory = proc.memory_full_info()
                times = proc.cpu_times()
            except psutil.Error:
                continue
            alive += 1
            rss += memory.rss
            pss += memory.pss
            self.cpu[proc.pid] = times.user + times.system
        self.most = max(self.most, alive)
        self.samples.append((t, rss / 2**20, pss / 2**20))


def result_digest(home: Path, slug: str) -> tuple[str, float]:
    """One digest of everything the import stored (order-independent within the dataset) and its own time. Of a
    thumbnail only whether the image has one: its bytes depend on the resize (Pillow's before 7fcb9a2, OpenCV's
    since; same sizes, checked in tests/datasets/test_images.py), so older code would never match."""
    db = sqlite3.connect(f"file:{home / 'lanner.db'}?mode=ro", uri=True, timeout=30)
    try:
        dataset, manifest, health, last = db.execute(
            "SELECT id, manifest_id, health, last_ingest FROM datasets WHERE slug = ?", (slug,)).fetchone()
        rows = db.execute(
            "SELECT i.key, i.split, i.name, i.sha256, i.labels, i.class_id, i.issues, b.size, b.width, b.height, "
            "b.format, b.phash, b.thumb_sha256 IS NOT NULL "
            "FROM dataset_items i JOIN image_blobs b ON b.sha256 = i.sha256 "
            "WHERE i.manifest_id = ? ORDER BY i.split, i.name", (manifest,)).fetchall()
    finally:
        db.close()
    ingest = json.loads(last)
    ingest_s = float(ingest.pop("processingTimeMs", 0)) / 1000
    for key, split, name, *_ in rows:  # the health report names images by id (dataset and a random key)
        health = health.replace(f'"{dataset}-{key}"', f'"{split}/{name}"')
    content = [row[1:] for row in rows]
    digest = hashlib.sha256(json.dumps([content, json.loads(health), ingest], sort_keys=True).encode()).hexdigest()
    return digest[:16], ingest_s


def timed_import(gnu_time: str | None, archive: Path, images: int, size: str, code: str, before: Path | None,
                 work: Path, *, warm: bool = False) -> Run:
    run = Run(code=code, store="warm" if warm else "fresh", archive=archive, images=images, size=size)
    home = Path(tempfile.mkdtemp(prefix="home-", dir=work))
    if warm:  # as a store holding a few hundred thousand blobs has them (not timed)
        for top in range(256):
            for leaf in range(256):
                (home / "blobs" / f"{top:02x}" / f"{leaf:02x}").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
    env.update(LANNER_HOME=str(home))
    if before is not None:
        env["PYTHONPATH"] = str(before)
    elif "PYTHONPATH" not in env:
        env["PYTHONPATH"] = str(ROOT)
    run_cli(["users", "create", OWNER], env)
    time_out = home / "time.txt"
    argv = [venv_bin("lanner"), "datasets", "import", str(archive), "--owner", OWNER, "--name", "big"]
    if gnu_time:
        argv = [gnu_time, "-v", "-o", str(time_out), *argv]
    with open(home / "import.log", "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        sampler = TreeSampler(proc.pid)
        while proc.poll() is None:
            sampler.sample(time.perf_counter() - t0)
            time.sleep(0.1)
        run.wall_s = time.perf_counter() - t0
    output = (home / "import.log").read_text(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"import of {archive.name} failed ({proc.returncode}):\n{output[-3000:]}")
    found = re.search(r"imported (\d+) images", output)
    run.added = int(found.group(1)) if found else -1
    run.cpu_s = sum(sampler.cpu.values())
    run.processes = sampler.most
    run.rss_mb = max((s[1] for s in sampler.samples), default=0.0)
    run.pss_mb = max((s[2] for s in sampler.samples), default=0.0)
    for pct in (25, 50, 75, 95):
        near = [s[1] for s in sampler.samples if s[0] <= pct / 100 * run.wall_s]
        run.rss_at[pct] = near[-1] if near else 0.0
    if time_out.exists():
        peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", time_out.read_text())
        run.largest_mb = int(peak.group(1)) / 1024 if peak else 0.0
    run.digest, run.ingest_s = result_digest(home, "big")
    shutil.rmtree(home, ignore_errors=True)
    log(f"[import] {code}, {run.store} store, {size}, {images:,} images: {run.wall_s:.1f} s "
        f"({run.images_per_s:,.0f} images/s), "
        f"ingest {run.ingest_s:.1f} s, CPU {run.cpu_s:.1f} s, peak tree RSS {run.rss_mb:.0f} MB / PSS "
        f"{run.pss_mb:.0f} MB, {run.processes} processes, digest {run.digest}")
    return run


def archives(folder: Path, size: str, counts: list[int]) -> list[Path]:
    """The zips for ``size`` (``WxH``), drawn once and kept in ``folder``."""
    width, height = (int(v) for v in size.split("x"))
    wanted, jobs, first = [], [], 0
    for count in counts:
        path = folder / f"yolo-{size}-{count}-{first}.zip"
        wanted.append(path)
        if not path.exists():
            jobs.append((path, count, first))
        first += count
    if jobs:
        t0 = time.perf_counter()
        make_zips(jobs, width=width, height=height)
        log(f"[data] drew {sum(j[1] for j in jobs):,} {size} images in {time.perf_counter() - t0:.0f} s")
    return wanted


def profile(archive: Path, out: Path, before: Path | None, work: Path) -> None:
    home = Path(tempfile.mkdtemp(prefix="home-", dir=work))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
    env.update(LANNER_HOME=str(home), PYTHONPATH=str(before or ROOT))
    run_cli(["users", "create", OWNER], env)
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([venv_bin("py-spy"), "record", "--subprocesses", "--rate", "200", "-o", str(out), "--",
                    venv_bin("lanner"), "datasets", "import", str(archive), "--owner", OWNER, "--name", "big"],
                   env=env, cwd=ROOT, check=True)
    log(f"[py-spy] wrote {out}")


# --- report --------------------------------------------------------------------------------------------------

def machine() -> dict[str, str]:
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "lanner"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    return {"cpus": str(len(os.sched_getaffinity(0))), "cpu": cpu_model(), "ram": f"{ram_bytes() / 2**30:.1f} GiB",
            "date": subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip(),
            "commit": (git.stdout.strip() or "unknown") + (" + uncommitted changes under lanner/" if dirty else ""),
            "load": " / ".join(f"{v:.2f}" for v in os.getloadavg())}


def render(runs: list[Run], info: dict[str, str], start_load: str, command: str, before: str | None) -> str:
    rows = ["| Code | blob store | JPEGs | images | archive MiB | wall s | images/s | ingest s | CPU s (tree) "
            "| processes | peak RSS MB (tree sum) | peak PSS MB (tree sum) | largest process MB | result digest |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in runs:
        rows.append(f"| {r.code} | {r.store} | {r.size} | {r.images:,} | {r.archive.stat().st_size / 2**20:,.1f} | "
                    f"{r.wall_s:.1f} | {r.images_per_s:,.0f} | {r.ingest_s:.1f} | {r.cpu_s:.1f} | {r.processes} | "
                    f"{r.rss_mb:,.0f} | {r.pss_mb:,.0f} | {r.largest_mb:,.0f} | `{r.digest}` |")
    lines = [SECTION, "",
             "`lanner datasets import ZIP --owner bench --name big` as a subprocess under `/usr/bin/time -v`, each "
             "run in a fresh LANNER_HOME (default SQLite database), the archives datasets_bench.py's synthetic YOLO "
             "detection zips (every image distinct, JPEG quality 90, 1-3 shapes each with a label file, 80/20 "
             "train/val; JPEGs stored, labels deflated). Wall time includes the CLI's start-up and the database "
             "migration check; `ingest s` is the import's own `processingTimeMs`. CPU, RSS and PSS are sampled "
             "every 0.1 s over the whole process tree (the CLI and its image workers): RSS counts the pages "
             "processes share (libraries) once per process, PSS shares them out; \"largest "
             "process\" is GNU time's maximum RSS. The result digest covers every stored item and image row, the "
             "health summary and the skipped files: equal digests, equal results. "
             + (f"\"before\" is the same command run with `PYTHONPATH` at {before}, alternated with this "
                "checkout in the same run." if before else ""),
             "",
             f"- Machine: {info['cpus']} CPUs ({info['cpu']}), {info['ram']} RAM; load average before the run "
             f"{start_load} (1/5/15 min), after it {info['load']}",
             f"- Date: {info['date']}",
             f"- Commit: {info['commit']}",
             f"- Command: `{command}`",
             "", *rows, ""]
    lines += targets(runs)
    return "\n".join(lines)


def targets(runs: list[Run]) -> list[str]:
    """The verdict on the fresh-store runs of the biggest 640x480 archive: best run, and this checkout against
    the run of the older code just before it (pairs alternate, so both saw about the same machine)."""
    fresh = [r for r in runs if r.size == "640x480" and r.store == "fresh"]
    if not fresh:
        return []
    count = max(r.images for r in fresh)
    fresh = [r for r in fresh if r.images == count]
    mine = [r for r in fresh if not r.code.startswith("before")]
    best = max(mine, key=lambda r: r.images_per_s)
    pairs = [(a, b) for a, b in zip(runs, runs[1:], strict=False) if a in fresh and b in mine
             and a.code.startswith("before")]
    ratios = sorted(b.images_per_s / a.images_per_s for a, b in pairs)
    paired = (f"; against the older code in the run just before: {', '.join(f'{x:.2f}x' for x in ratios)}"
              if ratios else "")
    verdict = "pass" if best.images_per_s >= TARGET_IMAGES_PER_S else "**FAIL**"
    digests = {r.digest for r in runs if r.size == "640x480" and r.images == count}
    lines = ["Targets:", "",
             f"- Import ≥ {TARGET_IMAGES_PER_S:.0f} images/s ({count:,} 640x480 JPEGs with thumbnails, CLI wall "
             f"time, fresh LANNER_HOME, 2 cores): best of {len(mine)} runs {best.images_per_s:,.0f} images/s "
             f"— {verdict}{paired}; peak RSS {best.rss_mb:,.0f} MB summed over its {best.processes} processes "
             f"(PSS {best.pss_mb:,.0f} MB, largest process {best.largest_mb:,.0f} MB)",
             f"- Same results whichever code and store: "
             f"{'yes, one digest' if len(digests) == 1 else '**NO**: ' + ', '.join(sorted(digests))}"]
    warm = [r for r in runs if r.store == "warm" and not r.code.startswith("before")]
    if warm:
        lines.append(f"- With the blob store's shard folders already made (a store that has held a few hundred "
                     f"thousand blobs): {max(r.images_per_s for r in warm):,.0f} images/s")
    return [*lines, ""]


def update_issue4_rows(runs: list[Run], info: dict[str, str]) -> None:
    """Replace the `big` and `small` rows of the issue 4 section's import table with this checkout's runs (the
    `list` row, the listing dataset's seed import, stays)."""
    text = DOC.read_text()
    start = text.find(ISSUE4)
    if start == -1:
        return
    mine = [r for r in runs if not r.code.startswith("before") and r.size == "640x480" and r.store == "fresh"]
    if not mine:
        return
    big_n = max(r.images for r in mine)
    new = {}
    for name, pick in (("big", [r for r in mine if r.images == big_n]),
                       ("small", [r for r in mine if r.images < big_n])):
        if pick:
            r = max(pick, key=lambda r: r.images_per_s)
            new[name] = (f"| `{name}` | {r.images:,} | {r.archive.stat().st_size / 2**20:,.1f} | {r.wall_s:.1f} | "
                         f"{r.images_per_s:,.0f} | {r.ingest_s:.1f} | {r.cpu_s:.1f} | {r.rss_mb:,.0f} | "
                         f"{' / '.join(f'{r.rss_at[p]:.0f}' for p in (25, 50, 75, 95))} |")
    section_end = text.find("\n## ", start + len(ISSUE4))
    section = text[start:section_end if section_end != -1 else len(text)]
    for name, row in new.items():
        section = re.sub(rf"^\| `{name}` \|.*$", lambda _m, row=row: row, section, count=1, flags=re.M)
    note = (f"Rows `big` and `small` rerun for issue 19 ({info['date']}, commit {info['commit']}, 640x480 JPEGs, "
            "`benchmarks/import_bench.py`): CPU and RSS summed over the process tree (the CLI and its image "
            "workers); see \"Dataset import (issue 19)\".")
    section = re.sub(r"^Rows `big` and `small` rerun for issue 19.*$\n\n?", "", section, flags=re.M)
    table_end = section.find("\n\n", section.find("| `list` |"))
    section = section[:table_end] + "\n\n" + note + section[table_end:]
    DOC.write_text(text[:start] + section + (text[section_end:] if section_end != -1 else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description="Dataset import throughput (issue 19).")
    parser.add_argument("--images", type=int, default=10_000)
    parser.add_argument("--small-images", type=int, default=2_000, help="a smaller import, for memory (0: skip)")
    parser.add_argument("--size", action="append", help="WxH of the JPEGs (repeatable; default 640x480)")
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with (its PYTHONPATH)")
    parser.add_argument("--repeat", type=int, default=2, help="alternated runs of each code (default 2)")
    parser.add_argument("--archives", type=Path, help="keep the drawn archives here and reuse them")
    parser.add_argument("--warm", action="store_true",
                        help="also import each code once into a store whose shard folders exist already")
    parser.add_argument("--py-spy", type=Path, help="profile one import of the big archive into this SVG")
    parser.add_argument("--no-doc", action="store_true")
    args = parser.parse_args()
    sizes = args.size or ["640x480"]
    command = ".venv/bin/python benchmarks/import_bench.py " + " ".join(sys.argv[1:])
    start_load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="lanner-import-bench-"))
    folder = args.archives or work / "archives"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if args.py_spy:
            big = archives(folder, sizes[0], [args.images])[0]
            profile(big, args.py_spy, args.before, work)
            return 0
        gnu_time = ensure_gnu_time()
        runs: list[Run] = []
        for size in sizes:
            counts = [args.images] + ([args.small_images] if args.small_images else [])
            made = archives(folder, size, counts)
            codes = [("this checkout", None)]
            if args.before:
                codes.insert(0, (f"before ({args.before.name})", args.before))
            for _ in range(args.repeat):
                for code, path in codes:
                    runs.append(timed_import(gnu_time, made[0], args.images, size, code, path, work))
            if args.warm:
                for code, path in codes:
                    runs.append(timed_import(gnu_time, made[0], args.images, size, code, path, work, warm=True))
            if args.small_images:
                runs.append(timed_import(gnu_time, made[1], args.small_images, size, "this checkout", None, work))
        info = machine()
        print(render(runs, info, start_load, command, str(args.before) if args.before else None))
        if not args.no_doc:
            write_section(SECTION, render(runs, info, start_load, command,
                                          str(args.before) if args.before else None))
            update_issue4_rows(runs, info)
            log(f"wrote {SECTION!r} and the issue 4 import rows in {DOC.relative_to(ROOT)}")
        digests = {(r.size, r.images): set() for r in runs}
        for r in runs:
            digests[(r.size, r.images)].add(r.digest)
        return 0 if all(len(d) == 1 for d in digests.values()) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
