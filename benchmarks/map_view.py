"""The dataset map in chromium (issue 31): first paint of 100,000 points, and a lasso to the grid filtered to its
images.

    PYTHONPATH=. .venv/bin/python benchmarks/map_view.py [--points 100000] [--rounds 3] [--no-doc]

A real ``lanner serve`` on a fresh home: 200 images imported through the CLI, their items replaced by
``--points`` rows of distinct images (``common.seed_items``), and a completed analysis with its map written
into the database as the embedding queue writes one (``maps.pack`` of synthesised coordinates: 20 gaussian
blobs; computing a real 100,000-point layout is ``benchmarks/layout.py``'s subject). Then chromium (Debian's,
headless, ``--disable-gpu``: WebGL through SwiftShader on the CPU, the slowest case), signed in, per round:

- **first paint**: ``goto(.../map)`` until the map's first frame with the points is drawn (``data-painted-ms``,
  set by ``map.js`` from ``performance.now()`` after reading a pixel of that frame back, which waits for it:
  milliseconds since the navigation started, so the page's HTML, deck.gl, the points request, their upload
  and the rasterisation are all in it; ``data-submitted-ms``: when the frame's draw calls were issued);
- **lasso → filtered grid**: from releasing a lasso drawn around some of the points (``data-lasso-ms``) to the
  grid filtered to them shown under the map (``data-grid-ms``): the points inside found, the selection stored
  on the server (``POST .../map/selection``), the grid's first page of it fetched and swapped in.

Targets: first paint <= 2 s, lasso -> grid <= 500 ms (the median of the rounds). Unless ``--no-doc``, the
"## Map view (issue 31)" section of docs/benchmarks.md is rewritten.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
from common import HOST, Server, free_port, run_cli, seed_items, venv_bin, verdict, write_section
from datasets_bench import OWNER, machine_info, make_zips

SECTION = "## Map view (issue 31)"
PASSWORD = "bench-password-1"
MODEL = "be" * 32


def store_map(home: Path, slug: str, seed: int = 0) -> int:
    """A completed analysis of ``OWNER/slug`` and its map: every image in one of 20 gaussian blobs."""
    from sqlalchemy import select

    from lanner.accounts.models import User
    from lanner.datasets.models import Dataset, DatasetItem
    from lanner.db import Database, utcnow
    from lanner.embeddings import jobs, maps
    from lanner.embeddings.models import EmbeddingJob, EmbeddingLayout

    db = Database(f"sqlite:///{home / 'lanner.db'}")
    try:
        with db.session() as session:
            dataset = session.scalar(select(Dataset).join(User, User.id == Dataset.owner_id)
                                     .where(User.username == OWNER, Dataset.slug == slug))
            hashes = list(dict.fromkeys(session.scalars(
                select(DatasetItem.sha256).where(DatasetItem.manifest_id == dataset.manifest_id))))
            rng = np.random.default_rng(seed)
            centres = rng.uniform(-20, 20, size=(20, 2))
            truth = rng.integers(0, 20, size=len(hashes))
            xy = (centres[truth] + rng.normal(scale=1.2, size=(len(hashes), 2))).astype(np.float32)
            session.add(EmbeddingJob(dataset_id=dataset.id, owner_id=dataset.owner_id, model_sha256=MODEL,
                                     model_label="bench", revision=dataset.revision, imgsz=64, status=jobs.COMPLETED,
                                     total=len(hashes), processed=len(hashes), completed_at=utcnow()))
            session.add(EmbeddingLayout(dataset_id=dataset.id, model_sha256=MODEL, revision=dataset.revision,
                                        count=len(hashes), data=maps.pack(hashes, xy, truth), computed_at=utcnow()))
            return len(hashes)
    finally:
        db.dispose()


def measure(url: str, slug: str, rounds: int) -> tuple[list[float], list[float], list[float], list[int]]:
    from playwright.sync_api import sync_playwright

    paints, submitted, lassos, selected = [], [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=url).new_page()
        page.goto("/login")
        page.get_by_label("Username").fill(OWNER)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url("**/")
        for n in range(rounds):
            page.goto(f"/datasets/{OWNER}/{slug}/map")
            page.wait_for_selector("#map-view[data-painted-ms]", timeout=60_000)
            paints.append(float(page.get_attribute("#map-view", "data-painted-ms")) / 1000)
            submitted.append(float(page.get_attribute("#map-view", "data-submitted-ms")) / 1000)
            box = page.locator("#map-canvas").bounding_box()
            cx, cy = box["x"] + box["width"] * (0.3 + 0.1 * n), box["y"] + box["height"] * 0.4
            r = min(box["width"], box["height"]) * 0.17
            page.locator("#map-lasso").click()
            page.mouse.move(cx + r, cy)
            page.mouse.down()
            for step in range(1, 25):
                angle = 2 * np.pi * step / 24
                page.mouse.move(cx + r * np.cos(angle), cy + r * np.sin(angle))
            page.mouse.up()
            page.wait_for_selector("#map-view[data-grid-ms]", timeout=60_000)
            page.wait_for_selector("#map-grid-slot #ds-grid .ds-grid li")
            lassos.append((int(page.get_attribute("#map-view", "data-grid-ms"))
                           - int(page.get_attribute("#map-view", "data-lasso-ms"))) / 1000)
            selected.append(int(page.text_content("#map-grid-slot #grid-count").split()[0]))
            print(f"round {n + 1}: first paint {paints[-1]:.2f} s (sent {submitted[-1]:.2f} s), "
                  f"lasso of {selected[-1]:,} -> grid {lassos[-1] * 1000:.0f} ms", flush=True)
        browser.close()
    return paints, submitted, lassos, selected


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-doc", action="store_true")
    args = parser.parse_args()
    start_load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    home = Path(tempfile.mkdtemp(prefix="lanner-map-bench-"))
    server = None
    try:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
        env.update(LANNER_HOME=str(home), LANNER_PUBLIC_URL=f"http://{HOST}:{port}", LANNER_API_RATE_LIMIT="",
                   NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        make_zips([(home / "seed.zip", 200, 0)])
        run_cli(["users", "create", OWNER, "--password", PASSWORD], env)
        run_cli(["datasets", "import", str(home / "seed.zip"), "--owner", OWNER, "--name", "map"], env, timeout=600)
        seed_items(home, OWNER, "map", args.points, distinct_images=True)
        points = store_map(home, "map")
        server = Server("lanner serve", [venv_bin("lanner"), "serve", "--host", HOST, "--port", str(port)], env, port,
                        home / "serve.log")
        server.start()
        paints, submitted, lassos, selected = measure(server.url, "map", args.rounds)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(home, ignore_errors=True)
    paint, lasso = statistics.median(paints), statistics.median(lassos)
    ok = paint <= 2.0 and lasso <= 0.5
    info = machine_info()
    section = "\n".join([
        SECTION, "",
        f"`PYTHONPATH=. .venv/bin/python benchmarks/map_view.py --points {args.points} --rounds {args.rounds}` on "
        f"{info['date']}, revision {info['revision']}: {info['nproc']} cores ({info['cpu']}), {info['ram']}, "
        f"load average {start_load} at the start and {info['load']} at the end (2 cores: above 2, the "
        "browser waits for a core, so a busy machine's figures are upper bounds). Debian chromium, headless, "
        "`--disable-gpu` (WebGL on the CPU through SwiftShader); one `lanner serve` (SQLite).", "",
        "| what | target | median | rounds | verdict |", "|---|---|---|---|---|",
        f"| first paint of {points:,} points (navigation start → first frame with the points) | ≤ 2 s | "
        f"{paint:.2f} s | {', '.join(f'{p:.2f}' for p in paints)} s | {verdict(paint <= 2.0)} |",
        f"| … of which before the frame's draw calls were issued (the rest: SwiftShader's first frame) | | "
        f"{statistics.median(submitted):.2f} s | {', '.join(f'{p:.2f}' for p in submitted)} s | |",
        f"| lasso release → grid of the selection under the map ({', '.join(f'{v:,}' for v in selected)} images; "
        f"selection stored, first grid page swapped in) | ≤ 500 ms | {lasso * 1000:.0f} ms | "
        f"{', '.join(f'{v * 1000:.0f}' for v in lassos)} ms | {verdict(lasso <= 0.5)} |", "",
        "The first round pays the server's first read of the layout and the items (decoded once, then kept per "
        "dataset revision: `embeddings.maps`, `embeddings.map_points`; ~2 s in-process at load 7) on top of a "
        "cold server. The rest of a warm first paint is chromium's software WebGL (no GPU here): the page has "
        "issued its draw calls by ~0.2-0.5 s, then SwiftShader rasterises the first frame on the CPU. The points "
        "are one non-instanced point list (`static/map-points.js`): as deck.gl's instanced squares the same "
        "frame took ~0.9-1.2 s on a quiet machine and ~2 s under load (2026-12-06 20:32, revision b64e2c9, load "
        "average 8-10: median 2.63 s, a FAIL; 23:06, revision 7a2115d, load 0.6-3.3: 2.43 s), SwiftShader paying "
        "for each instance. Later frames of the same 100,000 points (pan, zoom) take ~10 ms; with a GPU the first "
        "frame is a frame. The lasso's grid is swapped in before the points are recoloured: uploading new colours "
        "queues a frame that software WebGL holds the page for.",
        ""])
    print(section)
    if not args.no_doc:
        write_section(SECTION, section)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
