"""The least work an import with thumbnails must do per image, and how fast it can go here (issue 19).

    .venv/bin/python benchmarks/import_floor.py [--images 10000] [--repeat 3] [--archives DIR]

Nothing of the import pipeline runs here: no unpacking, no plan, no database, no start-up. Each image of
``import_bench``'s archive is read from the zip into memory (stored members: a copy), hashed, decoded at
thumbnail scale by Pillow (``draft``, as ``images.probe_image``), perceptually hashed (``images.phash``), its
thumbnail resized and encoded as the importer does, then (``+ store``) the image and the thumbnail are put in a
fresh content-addressed blob store (``LocalBlobStore.put_bytes``: a temporary file renamed into its shard folder,
what makes a stored blob crash-safe). Chunks of 16 images go to a fork pool of 1 or 2 processes, each opening the
zip once. The children's CPU per image and the best wall rate are what an import could reach on this machine
if everything else (unpacking, plan, commit, health check, start-up) cost nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import resource
import shutil
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

from common import write_section
from import_bench import archives, machine
from PIL import Image

from lanner.datasets.images import THUMBNAIL_SIDE, _encode_thumbnail, _fit, phash
from lanner.storage.blobs import LocalBlobStore

SECTION = "## Dataset import: the floor on this machine (issue 19)"
CHUNK = 16
_zip: zipfile.ZipFile | None = None  # one per worker process, opened by its first chunk


@dataclass
class Row:
    variant: str
    processes: int
    images: int
    wall: float
    user: float
    system: float

    @property
    def rate(self) -> float:
        return self.images / self.wall

    def ms(self, seconds: float) -> float:
        return seconds / self.images * 1000


def warm(archive: str) -> None:
    """A worker's start (its pool's initializer, before the timing): the zip's directory read once."""
    global _zip
    _zip = zipfile.ZipFile(archive)


def work(task: tuple[list[int], str | None]) -> int:
    """One chunk: everything an import does to an image that cannot be skipped; ``root``: store it there too."""
    indexes, root = task
    assert _zip is not None
    infos = _zip.infolist()
    store = LocalBlobStore(Path(root)) if root else None
    for index in indexes:
        data = _zip.read(infos[index])
        hashlib.sha256(data).hexdigest()
        with Image.open(io.BytesIO(data)) as im:
            im.draft(None, _fit(*im.size, THUMBNAIL_SIDE))
            im.load()
            phash(im)
            thumbnail = _encode_thumbnail(im, THUMBNAIL_SIDE)
        if store is not None:
            store.put_bytes(data)
            store.put_bytes(thumbnail)
    return len(indexes)


def run(archive: Path, processes: int, store: bool, work_dir: Path) -> Row:
    with zipfile.ZipFile(archive) as zf:
        images = [i for i, info in enumerate(zf.infolist()) if info.filename.lower().endswith(".jpg")]
    root = tempfile.mkdtemp(prefix="blobs-", dir=work_dir) if store else None
    tasks = [(images[i:i + CHUNK], root) for i in range(0, len(images), CHUNK)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with get_context("fork").Pool(processes, initializer=warm, initargs=(str(archive),)) as pool:
        pool.map(work, [([], None)] * processes * 4)  # every worker started and warm before the clock starts
        t0 = time.perf_counter()
        pool.map(work, tasks, chunksize=1)
        wall = time.perf_counter() - t0
        pool.close()
        pool.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if root:
        shutil.rmtree(root, ignore_errors=True)
    return Row("compute + store" if store else "compute", processes, len(images),
               wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime)


def render(rows: list[Row], info: dict[str, str], start_load: str, command: str) -> str:
    lines = [SECTION, "", __doc__.split("\n\n", 2)[2].strip().replace("\n", " ").replace("``", "`"), "",
             f"- Machine: {info['cpus']} CPUs ({info['cpu']}), {info['ram']} RAM; load average before the run "
             f"{start_load}, after it {info['load']}",
             f"- Date: {info['date']}; commit {info['commit']}", f"- Command: `{command}`", "",
             "| variant | processes | images | wall s | images/s | CPU ms per image (user + system) |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.variant} | {r.processes} | {r.images:,} | {r.wall:.1f} | {r.rate:.0f} | "
                     f"{r.ms(r.user + r.system):.2f} ({r.ms(r.user):.2f} + {r.ms(r.system):.2f}) |")
    best = max((r for r in rows if r.variant == "compute + store" and r.processes == 2), key=lambda r: r.rate)
    cpu = min(r.ms(r.user + r.system) for r in rows if r.variant == "compute + store")
    lines += ["", f"Best with both processes and the store: {best.rate:.0f} images/s; least CPU per image "
              f"{cpu:.2f} ms, so two fully used cores could do at most {2000 / cpu:.0f} images/s with nothing else "
              "to do."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--archives", type=Path, help="where import_bench keeps its drawn archives")
    parser.add_argument("--no-doc", action="store_true")
    args = parser.parse_args()
    start_load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    work_dir = Path(tempfile.mkdtemp(prefix="lanner-import-floor-"))
    try:
        folder = args.archives or work_dir / "archives"
        folder.mkdir(parents=True, exist_ok=True)
        archive = archives(folder, "640x480", [args.images])[0]
        rows = [run(archive, processes, store, work_dir)
                for _ in range(args.repeat) for processes in (1, 2) for store in (False, True)]
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    command = ".venv/bin/python benchmarks/import_floor.py " + " ".join(sys.argv[1:])
    text = render(rows, machine(), start_load, command)
    print(text)
    if not args.no_doc:
        write_section(SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
