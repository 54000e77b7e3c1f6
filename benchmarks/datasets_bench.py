"""Datasets benchmark (issue 4): import throughput and memory, image listing at depth, clone and copy-on-write.

    .venv/bin/python benchmarks/datasets_bench.py [--images 10000] [--list-images 100000]
    .venv/bin/python benchmarks/datasets_bench.py --listing-only [...]   (benchmarks/image_listing.py: listing only)

What it does, all on 127.0.0.1 with a throw-away LANNER_HOME (default SQLite database):

1. Draws synthetic YOLO detection datasets with OpenCV (640x480 JPEGs since issue 19, 320x240 before; 1-3 random
   rectangles/circles each with the matching label file, 80/20 train/val, data.yaml; every image distinct, so
   nothing dedups) and zips them (JPEGs stored, labels deflated). Drawing and zipping are not measured.
2. Times ``lanner datasets import ZIP --owner bench --name big`` (the real CLI path, which calls
   ``lanner.datasets.imports.ingest.ingest_path``) under ``/usr/bin/time -v`` for its peak RSS, also sampling the RSS
   with psutil while it runs; a smaller import (``--small-images``) shows whether peak memory follows the archive.
3. Imports a small real dataset (``--seed-images``) through the CLI, then, in one transaction, replaces its items
   with ``--list-images`` ``dataset_items`` rows that reuse those image blobs under unique names with realistic
   labels and derived columns (SQLAlchemy Core executemany in chunks).
4. Starts ``lanner serve`` and times ``GET /api/datasets/bench/list/images`` (one keep-alive httpx client, one
   request at a time) at page 1 and page 500, the val split at page 100 and a class filter at page 1.
5. Clones the listing dataset over HTTP (``POST .../clone``) and times the first write into a clone
   (``PATCH /api/images/{id}``: the copy-on-write copy of every row), and a second write for comparison.
6. Prints the results and rewrites the "## Datasets (issue 4)" section of docs/benchmarks.md.

Every subprocess it starts is stopped and the temporary folder removed on exit.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import httpx
import numpy as np
import psutil
from common import (
    DOC,
    HOST,
    ROOT,
    Server,
    cpu_model,
    free_port,
    local_client,
    ram_bytes,
    run_cli,
    seed_items,
    venv_bin,
    verdict,
    write_section,
)

SECTION = "## Datasets (issue 4)"
OWNER = "bench"
CLASSES = ["box", "ring", "disc"]  # filled rectangle, circle outline, filled circle
WIDTH, HEIGHT = 640, 480  # issue 19's target size (issue 4 measured 320x240)

# Targets (issue 4).
TARGET_IMPORT_IPS = 300.0
TARGET_LIST_P95_MS = 50.0
TARGET_CLONE_S = 1.0
PROFILE_RUNS = 10


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


# --- subprocesses --------------------------------------------------------------------------------------------

def ensure_gnu_time() -> str | None:
    """GNU time (Debian package ``time``) for the peak RSS; installed with apt-get if missing. None: use psutil."""
    if Path("/usr/bin/time").exists():
        return "/usr/bin/time"
    log("/usr/bin/time not found; installing Debian's 'time' package with apt-get")
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    try:
        subprocess.run([*sudo, "apt-get", "install", "-y", "time"], check=True, capture_output=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        log(f"could not install GNU time ({exc}); peak RSS comes from psutil sampling only")
    return "/usr/bin/time" if Path("/usr/bin/time").exists() else None


# --- synthetic datasets --------------------------------------------------------------------------------------

def draw_image(index: int, width: int = WIDTH, height: int = HEIGHT) -> tuple[bytes, str]:
    """A distinct JPEG (gradient, smooth noise, 1-3 shapes, its index printed) and its YOLO label text."""
    rng = np.random.default_rng(1_000_003 + index)
    c0, c1 = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
    ramp = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
    image = np.repeat(c0 * (1 - ramp) + c1 * ramp, height, axis=0)
    noise = rng.integers(-14, 15, (height // 4, width // 4, 3)).astype(np.float32)
    image = np.clip(image + cv2.resize(noise, (width, height), interpolation=cv2.INTER_LINEAR), 0, 255)
    image = np.ascontiguousarray(image.astype(np.uint8))
    lines = []
    for _ in range(int(rng.integers(1, 4))):
        cls = int(rng.integers(0, len(CLASSES)))
        side = int(rng.integers(20, 110))
        x0, y0 = int(rng.integers(0, width - side)), int(rng.integers(0, height - side))
        color = tuple(int(v) for v in rng.integers(0, 256, 3))
        if cls == 0:
            cv2.rectangle(image, (x0, y0), (x0 + side - 1, y0 + side - 1), color, -1)
        else:
            cv2.circle(image, (x0 + side // 2, y0 + side // 2), side // 2, color, 3 if cls == 1 else -1)
        cx, cy = (x0 + side / 2) / width, (y0 + side / 2) / height
        lines.append(f"{cls} {cx:.6f} {cy:.6f} {side / width:.6f} {side / height:.6f}")
    cv2.putText(image, f"#{index:07d}", (6, height - 8), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1)
    ok, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 90])
    if not ok:
        raise RuntimeError("OpenCV could not encode a JPEG")
    return jpeg.tobytes(), "\n".join(lines) + "\n"


def make_zips(jobs: list[tuple[Path, int, int]], *, width: int = WIDTH, height: int = HEIGHT) -> None:
    """YOLO detection zips, one per ``(path, count, first_index)`` (80/20 train/val); images drawn on all cores."""
    from concurrent.futures import ProcessPoolExecutor
    from functools import partial
    from multiprocessing import get_context

    names = "\n".join(f"  {i}: {n}" for i, n in enumerate(CLASSES))
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 2, mp_context=get_context("spawn")) as pool:
        for path, count, first_index in jobs:
            with zipfile.ZipFile(path, "w") as archive:
                archive.writestr("data.yaml", f"train: images/train\nval: images/val\nnames:\n{names}\n",
                                 compress_type=zipfile.ZIP_DEFLATED)
                drawn = pool.map(partial(draw_image, width=width, height=height),
                                 range(first_index, first_index + count), chunksize=64)
                for i, (jpeg, label) in enumerate(drawn):
                    split = "val" if i % 5 == 4 else "train"
                    stem = f"img_{first_index + i:07d}"
                    archive.writestr(f"images/{split}/{stem}.jpg", jpeg, compress_type=zipfile.ZIP_STORED)
                    archive.writestr(f"labels/{split}/{stem}.txt", label, compress_type=zipfile.ZIP_DEFLATED)


# --- 1. import -----------------------------------------------------------------------------------------------

@dataclass
class ImportRun:
    name: str
    images: int
    archive_bytes: int
    wall_s: float = 0.0
    ingest_s: float = 0.0            # ingest_path's own processingTimeMs (no CLI start-up, no migrations check)
    added: int = 0
    peak_rss_mb: float = 0.0         # GNU time's maximum resident set size (else the psutil peak)
    peak_source: str = ""
    sampled_peak_mb: float = 0.0
    rss_at: dict[int, float] = field(default_factory=dict)  # % of wall time -> sampled RSS (MB)
    user_s: float = 0.0
    sys_s: float = 0.0

    @property
    def images_per_s(self) -> float:
        return self.images / self.wall_s if self.wall_s else 0.0

    @property
    def ingest_images_per_s(self) -> float:
        return self.images / self.ingest_s if self.ingest_s else 0.0


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            if p.name() != "time":  # GNU time's own few hundred KB would only blur the picture
                total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def timed_import(gnu_time: str | None, env: dict[str, str], archive: Path, name: str, images: int,
                 home: Path) -> ImportRun:
    run = ImportRun(name=name, images=images, archive_bytes=archive.stat().st_size)
    time_out = home / f"time-{name}.txt"
    argv = [venv_bin("lanner"), "datasets", "import", str(archive), "--owner", OWNER, "--name", name]
    if gnu_time:
        argv = [gnu_time, "-v", "-o", str(time_out), *argv]
    log(f"[import] lanner datasets import {archive.name} --owner {OWNER} --name {name} "
        f"({images:,} images, {run.archive_bytes / 2**20:.0f} MiB)")
    samples: list[tuple[float, int]] = []
    with open(home / f"import-{name}.log", "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        watched = psutil.Process(proc.pid)
        try:
            while proc.poll() is None:
                try:
                    samples.append((time.perf_counter() - t0, _tree_rss(watched)))
                except psutil.Error:
                    pass
                time.sleep(0.1)
            proc.wait()
        except BaseException:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise
        run.wall_s = time.perf_counter() - t0
    output = (home / f"import-{name}.log").read_text(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"import of {archive.name} failed ({proc.returncode}):\n{output[-3000:]}")
    found = re.search(r"imported (\d+) images", output)
    run.added = int(found.group(1)) if found else -1
    run.sampled_peak_mb = max((rss for _, rss in samples), default=0) / 2**20
    for pct in (25, 50, 75, 95):
        at = pct / 100 * run.wall_s
        near = [rss for t, rss in samples if t <= at]
        run.rss_at[pct] = (near[-1] if near else 0) / 2**20
    if gnu_time and time_out.exists():
        report = time_out.read_text()
        peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", report)
        user = re.search(r"User time \(seconds\): ([\d.]+)", report)
        system = re.search(r"System time \(seconds\): ([\d.]+)", report)
        run.peak_rss_mb = int(peak.group(1)) / 1024 if peak else run.sampled_peak_mb
        run.peak_source = "GNU time" if peak else "psutil"
        run.user_s = float(user.group(1)) if user else 0.0
        run.sys_s = float(system.group(1)) if system else 0.0
    else:
        run.peak_rss_mb, run.peak_source = run.sampled_peak_mb, "psutil"
    db = sqlite3.connect(f"file:{home / 'lanner.db'}?mode=ro", uri=True, timeout=30)
    try:
        row = db.execute("SELECT last_ingest FROM datasets WHERE slug = ?", (name,)).fetchone()
    finally:
        db.close()
    if row and row[0]:
        run.ingest_s = float(json.loads(row[0]).get("processingTimeMs", 0)) / 1000
    log(f"[import] {name}: {run.added:,} added in {run.wall_s:.1f}s ({run.images_per_s:,.0f} images/s), "
        f"peak RSS {run.peak_rss_mb:.0f} MB")
    return run


# --- 2. listing a 100k-image dataset (seeded by common.seed_items) --------------------------------------------

_LIST_BASE = f"/api/datasets/{OWNER}/list/images"
# (label, path): the target cases, then the one that shows what the total count costs (not a target).
LISTING_CASES = [
    ("page 1", f"{_LIST_BASE}?limit=50&offset=0"),
    ("page 500", f"{_LIST_BASE}?limit=50&offset={499 * 50}"),
    ("split=val, page 100", f"{_LIST_BASE}?limit=50&offset={99 * 50}&split=val"),
    ("classIds=1, page 1", f"{_LIST_BASE}?limit=50&offset=0&classIds=1"),
    ("page 500, includeTotal=false", f"{_LIST_BASE}?limit=50&offset={499 * 50}&includeTotal=false"),
]
PROFILED_CASES = [LISTING_CASES[0], LISTING_CASES[1], LISTING_CASES[3]]

@dataclass
class Timing:
    label: str
    path: str
    samples_ms: list[float]
    total: int | None = None
    returned: int = 0

    @property
    def p50(self) -> float:
        return percentile(self.samples_ms, 50)

    @property
    def p95(self) -> float:
        return percentile(self.samples_ms, 95)

    @property
    def max(self) -> float:
        return max(self.samples_ms)


def time_get(client: httpx.Client, label: str, path: str, requests: int, warmup: int = 3) -> Timing:
    timing = Timing(label, path, [])
    for i in range(warmup + requests):
        t0 = time.perf_counter()
        resp = client.get(path)
        elapsed = (time.perf_counter() - t0) * 1000
        if resp.status_code != 200:
            raise RuntimeError(f"GET {path}: HTTP {resp.status_code} {resp.text[:500]}")
        if i >= warmup:
            timing.samples_ms.append(elapsed)
    body = resp.json()
    timing.total, timing.returned = body.get("total"), len(body["images"])
    total = "?" if timing.total is None else f"{timing.total:,}"
    log(f"[list] {label}: p50 {timing.p50:.1f} ms, p95 {timing.p95:.1f} ms ({timing.returned} of {total} images)")
    return timing


@dataclass
class Profile:
    """Where one listing request's time goes: every SQL statement it runs, timed in-process."""
    label: str
    path: str
    request_ms: float
    statements: list[tuple[str, float, int]]  # (SQL, mean ms per request, executions per request)


def _short_sql(statement: str) -> str:
    text = " ".join(statement.split())
    text = re.sub(r"\b(?:dataset_items|image_blobs|datasets)\.", "", text)
    return text if len(text) <= 150 else text[:147] + "..."


def profile_listing(env: dict[str, str], api_key: str, cases: list[tuple[str, str]], runs: int) -> list[Profile]:
    """Runs this script in ``--profile-sql`` mode: a fresh process with the same LANNER_HOME that serves the
    requests through the real app in-process (Starlette's TestClient) with an SQLAlchemy cursor hook."""
    spec = json.dumps({"key": api_key, "cases": cases, "runs": runs})
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--profile-sql", spec], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"SQL profile failed ({done.returncode}):\n{done.stderr[-3000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("PROFILE "))
    profiles = [Profile(p["label"], p["path"], p["request_ms"], [tuple(x) for x in p["statements"]])
                for p in json.loads(line.removeprefix("PROFILE "))]
    for prof in profiles:
        log(f"[sql] {prof.label}: {prof.request_ms:.1f} ms per request in-process")
        for sql, ms, n in prof.statements[:4]:
            log(f"[sql]   {ms:7.1f} ms x{n}  {sql[:110]}")
    return profiles


def _profile_sql_main(spec_json: str) -> int:
    """``--profile-sql``: the in-process half of ``profile_listing`` (prints one ``PROFILE <json>`` line)."""
    import logging
    import threading
    import warnings

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    spec = json.loads(spec_json)
    seen: dict[str, list[Any]] = {}  # statement -> [executions, hook ms, parameters of the first execution]
    started: dict[int, float] = {}

    def _background() -> bool:
        """The app's own pollers (threads named ``lanner-*``: imports, exports, assistant, deployments) run SQL
        meanwhile; their statements, and their waits for the write lock, are not the requests'."""
        return threading.current_thread().name.startswith("lanner-")

    @event.listens_for(Engine, "before_cursor_execute")
    def _before(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if not _background():
            started[id(cursor)] = time.perf_counter()

    @event.listens_for(Engine, "after_cursor_execute")
    def _after(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if _background():
            return
        entry = seen.setdefault(statement, [0, 0.0, None if many else params])
        entry[0] += 1
        entry[1] += (time.perf_counter() - started.pop(id(cursor), time.perf_counter())) * 1000

    from fastapi.testclient import TestClient

    from lanner.app import create_app
    from lanner.config import get_settings

    def replay(statement: str, params: Any) -> float | None:
        """SQLite computes a SELECT's rows as they are fetched, which the cursor hook does not see: replay the
        statement with its parameters on a read-only connection and time it to the last row."""
        if params is None or not statement.lstrip().upper().startswith(("SELECT", "WITH")):
            return None
        db = sqlite3.connect(f"file:{get_settings().resolved_home / 'lanner.db'}?mode=ro", uri=True, timeout=30)
        try:
            db.execute(statement, params).fetchall()
            t0 = time.perf_counter()
            for _ in range(5):
                db.execute(statement, params).fetchall()
            return (time.perf_counter() - t0) / 5 * 1000
        finally:
            db.close()

    # Fewer pollers: no supervisor or maintenance pass runs SQL in this process meanwhile (``_background``).
    os.environ["LANNER_SUPERVISOR_INTERVAL_SECONDS"] = "0"
    os.environ["LANNER_MAINTENANCE_INTERVAL_SECONDS"] = "0"
    get_settings.cache_clear()
    out = []
    with TestClient(create_app(), base_url="http://127.0.0.1") as client:
        headers = {"Authorization": f"Bearer {spec['key']}"}
        for label, path in spec["cases"]:
            for _ in range(2):
                client.get(path, headers=headers).raise_for_status()
            seen.clear()
            t0 = time.perf_counter()
            for _ in range(spec["runs"]):
                client.get(path, headers=headers).raise_for_status()
            request_ms = (time.perf_counter() - t0) / spec["runs"] * 1000
            statements = []
            for statement, (count, hook_ms, params) in list(seen.items()):
                per_run = replay(statement, params)
                ms = hook_ms / spec["runs"] if per_run is None else per_run * count / spec["runs"]
                statements.append((_short_sql(statement), ms, round(count / spec["runs"])))
            statements.sort(key=lambda x: -x[1])
            out.append({"label": label, "path": path, "request_ms": request_ms, "statements": statements})
    print("PROFILE " + json.dumps(out))
    return 0


# --- 3. clone and copy-on-write ------------------------------------------------------------------------------

@dataclass
class CloneResult:
    clone_ms: list[float] = field(default_factory=list)
    first_write_ms: list[float] = field(default_factory=list)
    second_write_ms: list[float] = field(default_factory=list)
    image_count: int = 0


def time_clones(client: httpx.Client, slug: str, clones: int, writes: int) -> CloneResult:
    result = CloneResult()
    made = []
    for i in range(clones):
        t0 = time.perf_counter()
        resp = client.post(f"/api/datasets/{OWNER}/{slug}/clone", json={"name": f"{slug}-clone-{i}"})
        result.clone_ms.append((time.perf_counter() - t0) * 1000)
        if resp.status_code != 201:
            raise RuntimeError(f"clone {i}: HTTP {resp.status_code} {resp.text[:500]}")
        made.append(resp.json()["dataset"])
        result.image_count = resp.json()["imageCount"]
    log(f"[clone] {clones} clones: p50 {percentile(result.clone_ms, 50):.0f} ms, max {max(result.clone_ms):.0f} ms")
    labels = [{"classId": 1, "bbox": [0.5, 0.5, 0.25, 0.3]}]
    for clone_slug in made[:writes]:
        resp = client.get(f"/api/datasets/{OWNER}/{clone_slug}/images", params={"limit": 1, "includeTotal": False})
        image_id = resp.json()["images"][0]["id"]
        for samples in (result.first_write_ms, result.second_write_ms):
            t0 = time.perf_counter()
            resp = client.patch(f"/api/images/{image_id}", json={"labels": labels})
            samples.append((time.perf_counter() - t0) * 1000)
            if resp.status_code != 200:
                raise RuntimeError(f"PATCH /api/images/{image_id}: HTTP {resp.status_code} {resp.text[:500]}")
    log(f"[clone] first write into a clone: {', '.join(f'{v:.0f}' for v in result.first_write_ms)} ms; "
        f"second: {', '.join(f'{v:.0f}' for v in result.second_write_ms)} ms")
    return result


# --- report --------------------------------------------------------------------------------------------------

def machine_info() -> dict[str, str]:
    import fastapi
    import sqlalchemy
    import uvicorn

    import lanner

    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip() or str(os.cpu_count())
    date = subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip()
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "lanner"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    revision = (git.stdout.strip() or "unknown") + (" + uncommitted changes under lanner/" if dirty else "")
    return {
        "nproc": nproc, "cpu": cpu_model(), "ram": f"{ram_bytes() / 2**30:.1f} GiB", "date": date,
        "python": platform.python_version(), "uvicorn": uvicorn.__version__, "fastapi": fastapi.__version__,
        "sqlalchemy": sqlalchemy.__version__, "sqlite": sqlite3.sqlite_version, "opencv": cv2.__version__,
        "lanner": getattr(lanner, "__version__", "?"), "revision": revision,
        "load": " / ".join(f"{v:.2f}" for v in os.getloadavg()),
    }


def md_cell(text: str) -> str:
    return text.replace("|", "\\|")


@dataclass
class Results:
    big: ImportRun
    small: ImportRun | None
    seed: ImportRun
    listing: list[Timing]
    clone: CloneResult
    list_images: int
    requests: int
    no_total: Timing
    profiles: list[Profile]

    @property
    def import_ok(self) -> bool:
        return self.big.images_per_s >= TARGET_IMPORT_IPS and self.big.added == self.big.images

    @property
    def list_ok(self) -> bool:
        return all(t.p95 <= TARGET_LIST_P95_MS for t in self.listing)

    @property
    def clone_p50_s(self) -> float:
        return percentile(self.clone.clone_ms, 50) / 1000

    @property
    def clone_ok(self) -> bool:
        return self.clone_p50_s <= TARGET_CLONE_S

    def memory_note(self) -> str:
        big = self.big
        text = (f"peak RSS {big.peak_rss_mb:,.0f} MB for a {big.archive_bytes / 2**20:,.0f} MiB archive of "
                f"{big.images:,} images")
        if self.small:
            small = self.small
            extra_mib = (big.archive_bytes - small.archive_bytes) / 2**20
            extra_mb = big.peak_rss_mb - small.peak_rss_mb
            text += (f", {small.peak_rss_mb:,.0f} MB for {small.archive_bytes / 2**20:,.0f} MiB "
                     f"({small.images:,} images): +{extra_mb:,.0f} MB for +{extra_mib:,.0f} MiB, "
                     f"{extra_mb / extra_mib:.2f} MB per MiB of archive "
                     f"(~{extra_mb * 1024 / (big.images - small.images):.1f} KB per image)")
        if big.peak_rss_mb > big.rss_at[95] + 5:
            text += (f"; while the images are probed RSS holds at {big.rss_at[50]:,.0f} MB (sampled at half-time), "
                     "the peak comes after 95 % of the run (the one transaction that writes the items, and the "
                     "health check)")
        return text


def sql_profile_rows(profiles: list[Profile]) -> list[str]:
    """Markdown for ``profile_listing``'s results: per case, the statements over 0.5 ms and the rest."""
    sql_rows: list[str] = []
    for prof in profiles:
        sql_rows += ["", f"{prof.label} (`{prof.path}`): {prof.request_ms:.1f} ms per request in-process.", "",
                     "| SQL statement | ms per request | runs per request |", "|---|---:|---:|"]
        shown = [x for x in prof.statements if x[1] >= 0.5] or prof.statements[:1]
        sql_rows += [f"| `{md_cell(sql)}` | {ms:.1f} | {n} |" for sql, ms, n in shown]
        rest = sum(ms for _, ms, _ in prof.statements) - sum(ms for _, ms, _ in shown)
        sql_rows.append(f"| all other statements ({len(prof.statements) - len(shown)}) | {rest:.1f} | |")
        outside = prof.request_ms - sum(ms for _, ms, _ in prof.statements)
        sql_rows.append(f"| outside SQL (Python: routing, auth, rows to dicts, signed thumbnail URLs, JSON) | "
                        f"{outside:.1f} | |")
    return sql_rows


def render(info: dict[str, str], command: str, r: Results, start_load: str) -> str:
    big, small = r.big, r.small
    imports = [big] + ([small] if small else []) + [r.seed]
    rows = [
        "| Import | images | archive MiB | wall s | images/s | ingest_path s | CPU user+sys s | peak RSS MB "
        "| sampled RSS MB at 25/50/75/95 % of the run |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for run in imports:
        rows.append(
            f"| `{run.name}` | {run.images:,} | {run.archive_bytes / 2**20:,.1f} | {run.wall_s:.1f} | "
            f"{run.images_per_s:,.0f} | {run.ingest_s:.1f} | {run.user_s + run.sys_s:.1f} | "
            f"{run.peak_rss_mb:,.0f} | {' / '.join(f'{run.rss_at[p]:.0f}' for p in (25, 50, 75, 95))} |")
    list_rows = ["| Request | p50 ms | p95 ms | max ms | images returned / total |", "|---|---:|---:|---:|---:|"]
    for t in [*r.listing, r.no_total]:
        note = " (not a target case)" if t is r.no_total else ""
        total = "not counted" if t.total is None else f"{t.total:,}"
        list_rows.append(f"| {t.label}{note}: `{t.path}` | {t.p50:.1f} | {t.p95:.1f} | {t.max:.1f} | "
                         f"{t.returned} / {total} |")
    sql_rows = sql_profile_rows(r.profiles)
    c = r.clone
    first = ", ".join(f"{v / 1000:.2f}" for v in c.first_write_ms)
    second = ", ".join(f"{v:.0f}" for v in c.second_write_ms)
    worst_list = max(r.listing, key=lambda t: t.p95)
    lines = [
        SECTION,
        "",
        "Import, image listing and clone on the default SQLite database, against a throw-away LANNER_HOME. "
        f"The import archives are synthetic YOLO detection datasets drawn with OpenCV ({WIDTH}x{HEIGHT} JPEGs, "
        "quality 90, 1-3 random rectangles/circles each with their label file, 80/20 train/val, data.yaml, every "
        "image distinct so nothing dedups; JPEGs stored, labels deflated); drawing them is not measured. Each "
        "import is `lanner datasets import ZIP --owner bench --name NAME` as a subprocess under "
        "`/usr/bin/time -v` (wall time includes the CLI's start-up and the database migration check; "
        "`ingest_path s` is the import's own `processingTimeMs`), its RSS also sampled every 0.1 s with psutil. "
        f"The listing dataset is a real {r.seed.images}-image import whose items were then replaced, in one "
        f"transaction, by {r.list_images:,} `dataset_items` rows reusing those image blobs under unique names "
        "(`img_000123.jpg`, 80/20 train/val) with their labels and derived columns. Requests go one at a time "
        f"over one keep-alive httpx connection to `lanner serve` (one uvicorn worker): {r.requests} timed per case "
        "after 3 warm-up requests, with the SDK's defaults (`includeTotal`, thumbnails). The client, the server "
        "and the bench share the machine.",
        "",
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM; load average before the run "
        f"{start_load} (1/5/15 min), after it {info['load']} (other work on the machine skews the numbers)",
        f"- Date: {info['date']}",
        f"- Python {info['python']}, uvicorn {info['uvicorn']}, FastAPI {info['fastapi']}, "
        f"SQLAlchemy {info['sqlalchemy']}, SQLite {info['sqlite']}, OpenCV {info['opencv']}, "
        f"Lanner {info['lanner']} (commit {info['revision']})",
        f"- Command: `{command}`",
        "",
        *rows,
        "",
        *list_rows,
        "",
        "`cursor=N` is the same query as `offset=N` (the cursor is the next offset). Where a listing request's time "
        "goes: after the server stopped, the same requests served by the app in-process (Starlette's TestClient, "
        f"same database, {PROFILE_RUNS} requests each after 2 warm-ups) with an SQLAlchemy cursor hook recording "
        "every statement; each SELECT is then replayed with its parameters on a read-only sqlite3 connection and "
        "timed to its last row (SQLite computes rows as they are fetched, which the hook does not see). Statements "
        "under 0.5 ms per request are summed in the \"all other statements\" row; \"outside SQL\" is the rest "
        "of the request:",
        *sql_rows,
        "",
        f"Clone of the {c.image_count:,}-image dataset (`POST /api/datasets/bench/list/clone`, "
        f"{len(c.clone_ms)} clones with distinct names): p50 {percentile(c.clone_ms, 50):.0f} ms, "
        f"max {max(c.clone_ms):.0f} ms. First write into a clone (`PATCH /api/images/{{id}}` with new labels, "
        f"which copies the shared manifest's {c.image_count:,} rows): {first} s; a second write into the same "
        f"clone (already private): {second} ms.",
        "",
        "Targets:",
        "",
        f"- Import ≥ {TARGET_IMPORT_IPS:.0f} images/s ({big.images:,} images, CLI wall time): "
        f"{big.images_per_s:,.0f} images/s — {verdict(r.import_ok)}",
        f"- Import memory does not grow with the archive: {r.memory_note()}",
        f"- Listing p95 ≤ {TARGET_LIST_P95_MS:.0f} ms at any page ({r.list_images:,} images): worst "
        f"{worst_list.p95:.1f} ms ({worst_list.label}) — {verdict(r.list_ok)}",
        f"- Clone ≤ {TARGET_CLONE_S:.0f} s: p50 {percentile(c.clone_ms, 50):.0f} ms — {verdict(r.clone_ok)}",
        "",
    ]
    return "\n".join(lines)


def print_results(r: Results) -> None:
    print(f"{'import':<10}{'images':>9}{'MiB':>8}{'wall s':>9}{'img/s':>8}{'ingest s':>10}{'peak MB':>9}"
          f"  RSS MB @25/50/75/95%")
    for run in [r.big] + ([r.small] if r.small else []) + [r.seed]:
        print(f"{run.name:<10}{run.images:>9,}{run.archive_bytes / 2**20:>8.0f}{run.wall_s:>9.1f}"
              f"{run.images_per_s:>8.0f}{run.ingest_s:>10.1f}{run.peak_rss_mb:>9.0f}  "
              f"{' / '.join(f'{run.rss_at[p]:.0f}' for p in (25, 50, 75, 95))}")
    print()
    print(f"{'listing (' + format(r.list_images, ',') + ' images)':<34}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
    for t in [*r.listing, r.no_total]:
        print(f"{t.label:<34}{t.p50:>9.1f}{t.p95:>9.1f}{t.max:>9.1f}")
    for prof in r.profiles:
        print(f"  in-process {prof.label}: {prof.request_ms:.1f} ms; top SQL: "
              + "; ".join(f"{ms:.1f} ms {sql[:60]}" for sql, ms, _ in prof.statements[:2]))
    print()
    c = r.clone
    print(f"clone p50 {percentile(c.clone_ms, 50):.0f} ms (max {max(c.clone_ms):.0f} ms, {len(c.clone_ms)} clones); "
          f"first write {', '.join(f'{v:.0f}' for v in c.first_write_ms)} ms; "
          f"second write {', '.join(f'{v:.0f}' for v in c.second_write_ms)} ms")
    print()
    worst = max(r.listing, key=lambda t: t.p95)
    print(f"Import >= {TARGET_IMPORT_IPS:.0f} images/s: {r.big.images_per_s:.0f} -> {verdict(r.import_ok)}")
    print(f"Import memory: {r.memory_note()}")
    print(f"Listing p95 <= {TARGET_LIST_P95_MS:.0f} ms: worst {worst.p95:.1f} ms ({worst.label}) -> "
          f"{verdict(r.list_ok)}")
    print(f"Clone <= {TARGET_CLONE_S:.0f} s: p50 {r.clone_p50_s * 1000:.0f} ms -> {verdict(r.clone_ok)}")


# --- main ----------------------------------------------------------------------------------------------------

def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--profile-sql":
        return _profile_sql_main(sys.argv[2])
    if "--listing-only" in sys.argv[1:]:  # only the listing, with its own options (image_listing.py --help)
        # Run as its own program, not imported: image_listing imports this module's helpers (no import circle).
        listing = str(Path(__file__).with_name("image_listing.py"))
        return subprocess.call([sys.executable, listing, *[a for a in sys.argv[1:] if a != "--listing-only"]])
    parser = argparse.ArgumentParser(description="Datasets benchmark: import, listing at depth, clone.")
    parser.add_argument("--images", type=int, default=10_000, help="images in the import archive (default 10000)")
    parser.add_argument("--small-images", type=int, default=2_000,
                        help="images in a second, smaller import to compare peak memory (0: skip; default 2000)")
    parser.add_argument("--list-images", type=int, default=100_000,
                        help="images in the listing/clone dataset (default 100000)")
    parser.add_argument("--seed-images", type=int, default=200,
                        help="real images imported for the listing dataset, reused by its rows (default 200)")
    parser.add_argument("--requests", type=int, default=50, help="timed requests per listing case (default 50)")
    parser.add_argument("--clones", type=int, default=10, help="clones to time (default 10)")
    parser.add_argument("--writes", type=int, default=3, help="clones that get a first write (default 3)")
    parser.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    parser.add_argument("--listing-only", action="store_true",
                        help="time only the image listing (benchmarks/image_listing.py, its own options)")
    parser.add_argument("--keep-home", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    if min(args.images, args.list_images, args.seed_images, args.requests, args.clones) < 1 or args.writes < 0:
        parser.error("counts must be positive")
    if args.list_images < 25_000:
        log("note: with fewer than 25,000 images page 500 is past the end")

    sys.stdout.reconfigure(line_buffering=True)
    command = (".venv/bin/python benchmarks/datasets_bench.py " + " ".join(sys.argv[1:])).strip()
    gnu_time = ensure_gnu_time()
    start_load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    home = Path(tempfile.mkdtemp(prefix="lanner-datasets-bench-"))
    server: Server | None = None
    try:
        work = home / "archives"
        work.mkdir()
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
        # Throughput, not the rate limits: the listing is timed with one key, far past LANNER_API_RATE_LIMIT.
        env.update(LANNER_API_RATE_LIMIT="", LANNER_WORKER_RATE_LIMIT="")
        env.update(LANNER_HOME=str(home), LANNER_PUBLIC_URL=f"http://{HOST}:{port}",
                   NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")

        t0 = time.perf_counter()
        big_zip, small_zip, seed_zip = work / "big.zip", work / "small.zip", work / "list.zip"
        make_zips([(big_zip, args.images, 0), *([(small_zip, args.small_images, args.images)]
                                                if args.small_images else []),
                   (seed_zip, args.seed_images, args.images + args.small_images)])
        log(f"[data] drew and zipped {args.images + args.small_images + args.seed_images:,} images in "
            f"{time.perf_counter() - t0:.1f}s")

        run_cli(["users", "create", OWNER], env)
        api_key = run_cli(["keys", "create", OWNER], env)

        small = timed_import(gnu_time, env, small_zip, "small", args.small_images, home) if args.small_images \
            else None
        big = timed_import(gnu_time, env, big_zip, "big", args.images, home)
        seed = timed_import(gnu_time, env, seed_zip, "list", args.seed_images, home)
        for archive in (big_zip, small_zip, seed_zip):
            archive.unlink(missing_ok=True)
        seed_items(home, OWNER, "list", args.list_images)

        server = Server("lanner serve", [venv_bin("lanner"), "serve", "--host", HOST, "--port", str(port)], env, port,
                        home / "lanner-serve.log")
        server.start()
        with local_client(base_url=server.url, headers={"Authorization": f"Bearer {api_key}"}) as client:
            *listing, no_total = [time_get(client, label, path, args.requests) for label, path in LISTING_CASES]
            clone = time_clones(client, "list", args.clones, args.writes)
        server.stop()
        profiles = profile_listing(env, api_key, PROFILED_CASES, PROFILE_RUNS)

        results = Results(big=big, small=small, seed=seed, listing=listing, clone=clone,
                          list_images=args.list_images, requests=args.requests, no_total=no_total,
                          profiles=profiles)
        print()
        print_results(results)
        if not args.no_doc:
            write_section(SECTION, render(machine_info(), command, results, start_load))
            print(f"\nWrote {SECTION!r} in {DOC.relative_to(ROOT)}")
        return 0 if results.import_ok and results.list_ok and results.clone_ok else 1
    finally:
        if server is not None:
            server.stop()
        if args.keep_home:
            log(f"LANNER_HOME kept at {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
