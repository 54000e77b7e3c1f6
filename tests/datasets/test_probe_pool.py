"""The image pool (issue 19): images probed in worker processes give exactly what one process gives, in the
upload's order; a corrupt image is reported under its own name; a worker that dies or runs out of memory ends the
import with a reason and leaves the dataset as it was; the server's import worker probes in the pool too."""

from __future__ import annotations

import json
import os
import signal
import struct
import zipfile
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from sqlalchemy import select

from lanner.datasets.imports import ingest, probe_pool
from lanner.datasets.imports import jobs as import_jobs
from lanner.datasets.imports import worker as import_worker
from lanner.datasets.imports.formats import extract_archive
from lanner.datasets.imports.ingest import ingest_path
from lanner.datasets.imports.probe_pool import WORKER_DIED, ProbePool, pool_size, probe_all
from lanner.datasets.models import Dataset, DatasetItem, ImageBlob, ImportJob
from lanner.datasets.records import ImportLimits, ImportRefused
from lanner.storage.blobs import LocalBlobStore
from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, queue_import


def picture(seed: int, width: int, height: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    image = cv2.resize(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8), (width, height))
    cv2.circle(image, (width // 2, height // 3), min(width, height) // 4, (255, 255, 255), -1)
    return image


def assorted_images(folder: Path, count: int) -> list[Path]:
    """JPEGs of assorted sizes and what uploads bring besides: a PNG, a text file named .jpg, a JPEG cut short,
    an image too small for the trainer, and the same bytes under two names."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"img_{i:03d}.jpg"
        assert cv2.imwrite(str(path), picture(i, 40 + 37 * (i % 9), 30 + 23 * (i % 7)))
        paths.append(path)
    assert cv2.imwrite(str(folder / "drawing.png"), picture(99, 120, 90))
    (folder / "notes.jpg").write_text("not an image")
    (folder / "cut.jpg").write_bytes(paths[1].read_bytes()[:300])
    assert cv2.imwrite(str(folder / "tiny.jpg"), picture(7, 8, 8))
    (folder / "again.jpg").write_bytes(paths[2].read_bytes())
    extra = [folder / name for name in ("drawing.png", "notes.jpg", "cut.jpg", "tiny.jpg", "again.jpg")]
    return [*paths[:5], *extra, *paths[5:]]  # the odd ones in the middle of a chunk


def stored(store: LocalBlobStore) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in store.root.glob("??/??/*")}


class DyingStore(LocalBlobStore):
    """A blob store whose worker is killed (as the kernel kills a process out of memory) by its third image."""

    def put_bytes(self, data: bytes) -> Any:
        count = getattr(self, "count", 0) + 1
        self.count = count
        if count == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().put_bytes(data)


class GreedyStore(LocalBlobStore):
    def put_bytes(self, data: bytes) -> Any:
        raise MemoryError


def test_the_pool_gives_what_one_process_gives_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(probe_pool, "CHUNK", 3)  # many chunks, finishing out of order
    paths = assorted_images(tmp_path / "up", 30)
    alone, pooled = LocalBlobStore(tmp_path / "alone"), LocalBlobStore(tmp_path / "pooled")
    expected = list(probe_all(alone, paths, processes=0))
    assert list(probe_all(pooled, paths, processes=2, link=True)) == expected
    assert stored(pooled) == stored(alone)  # the same images and thumbnails, byte for byte (linked or copied)
    assert (pooled.root / expected[0].info.sha256[:2] / expected[0].info.sha256[2:4] / expected[0].info.sha256
            ).samefile(paths[0])  # an unpacked image is shared with the store, not copied
    errors = {path.name: outcome.error for path, outcome in zip(paths, expected, strict=True) if outcome.error}
    assert set(errors) == {"notes.jpg", "cut.jpg", "tiny.jpg"}
    assert "not an image" in errors["notes.jpg"] and "truncated" in errors["cut.jpg"]
    assert expected[9].info == expected[2].info  # the same bytes twice: one blob, reported for both


def test_a_worker_killed_mid_import_ends_it_with_the_reason(tmp_path):
    paths = assorted_images(tmp_path / "up", 20)
    with pytest.raises(ImportRefused) as refused:
        list(probe_all(DyingStore(tmp_path / "blobs"), paths, processes=2))
    assert refused.value.message == WORKER_DIED


def test_memory_error_in_a_worker_is_a_memory_error_here(tmp_path):
    with pytest.raises(MemoryError):  # the import worker turns it into "needs more memory than an import may use"
        list(probe_all(GreedyStore(tmp_path / "blobs"), assorted_images(tmp_path / "up", 4), processes=2))


def test_small_imports_and_single_cpus_probe_in_process(monkeypatch):
    monkeypatch.setattr(probe_pool, "cpus_available", lambda: 2)
    assert [pool_size(0, 10_000), pool_size(1, 10_000), pool_size(0, 499), pool_size(8, 10_000)] == [2, 0, 0, 8]
    assert pool_size(8, 500) == 8 and pool_size(8, 40) == 0
    monkeypatch.setattr(probe_pool, "MIN_POOL_IMAGES", 1)
    assert pool_size(8, 40) == 3  # never more workers than chunks
    monkeypatch.setattr(probe_pool, "cpus_available", lambda: 1)
    assert pool_size(0, 10_000) == 0


# --- through the import -------------------------------------------------------------------------------------------

def upload_folder(tmp_path: Path) -> Path:
    root = make_detection_dataset(tmp_path / "d", train=24, val=6, size=72).parent
    (root / "images/train/train_0003.jpg").write_text("this is not an image")
    (root / "images/val/val_0001.jpg").write_bytes((root / "images/train/train_0005.jpg").read_bytes())
    return root


def snapshot(app: Any, slug: str) -> dict[str, Any]:
    """What an import left: items, their image rows, the health report and the import summary (not its time)."""
    with app.state.lanner.db.session() as session:
        dataset = session.scalar(select(Dataset).where(Dataset.slug == slug))
        items = session.execute(
            select(DatasetItem.key, DatasetItem.split, DatasetItem.name, DatasetItem.sha256, DatasetItem.labels,
                   DatasetItem.issues, ImageBlob.size, ImageBlob.width, ImageBlob.height, ImageBlob.phash,
                   ImageBlob.thumb_sha256)
            .join(ImageBlob, ImageBlob.sha256 == DatasetItem.sha256)
            .where(DatasetItem.manifest_id == dataset.manifest_id).order_by(DatasetItem.split, DatasetItem.name)).all()
        health = json.dumps(dataset.health)
        for row in items:  # the report names images by id (dataset and random key): name them by split and name
            health = health.replace(f"{dataset.id}-{row.key}", f"{row.split}/{row.name}")
        summary = {k: v for k, v in dataset.last_ingest.items() if k != "processingTimeMs"}
        return {"items": [tuple(row)[1:] for row in items], "health": json.loads(health), "summary": summary,
                "revision": dataset.revision, "manifest": dataset.manifest_id}


def direct_import(app: Any, sdk: Any, account: Any, slug: str, source: Path, *, create: bool = True) -> None:
    ctx = app.state.lanner
    dataset_id = (sdk(account).datasets.create(dataset=slug, name=slug)["id"] if create
                  else sdk(account).datasets.retrieve(account.username, slug)["dataset"]["id"])
    with ctx.db.session() as session:
        ingest_path(session, blobs=ctx.blobs, settings=ctx.settings, dataset_id=dataset_id, source=source,
                    queued=False)


@pytest.fixture
def pools(monkeypatch) -> list[int]:
    """Every pool started (its size); any import of two images or more may start one."""
    started: list[int] = []
    real = probe_pool.ProbePool.__init__

    def spy(self: Any, blobs: Any, processes: int, **options: Any) -> None:
        started.append(processes)
        real(self, blobs, processes, **options)

    monkeypatch.setattr(probe_pool, "MIN_POOL_IMAGES", 2)
    monkeypatch.setattr(probe_pool, "cpus_available", lambda: 2)
    monkeypatch.setattr(probe_pool.ProbePool, "__init__", spy)
    return started


def test_an_import_through_the_pool_equals_one_in_process(app, sdk, alice, tmp_path, pools):
    source = upload_folder(tmp_path)
    settings = app.state.lanner.settings
    settings.import_processes = 1
    direct_import(app, sdk, alice, "alone", source)
    assert pools == []
    settings.import_processes = 2
    direct_import(app, sdk, alice, "pooled", source)
    assert pools == [2]
    alone, pooled = snapshot(app, "alone"), snapshot(app, "pooled")
    assert pooled["items"] == alone["items"] and len(alone["items"]) == 29
    assert pooled["health"] == alone["health"] and alone["health"]["issue_counts"]["duplicate"] == 2
    assert pooled["summary"] == alone["summary"]
    assert alone["summary"]["issues"] == [{"name": "train/train_0003.jpg",
                                           "reason": "not an image: the file content is not a recognised image format"}]


def test_a_pool_import_that_fails_leaves_the_dataset_as_it_was(app, sdk, alice, tmp_path, pools):
    ctx = app.state.lanner
    ctx.settings.import_processes = 2
    direct_import(app, sdk, alice, "d", make_detection_dataset(tmp_path / "first", train=3, val=1, size=64).parent)
    before = snapshot(app, "d")
    ctx.blobs = DyingStore(ctx.blobs.root)
    with pytest.raises(ImportRefused, match="stopped unexpectedly"):
        direct_import(app, sdk, alice, "d", upload_folder(tmp_path), create=False)
    assert snapshot(app, "d") == before and len(pools) == 2


def test_blobs_collected_during_a_long_import_are_stored_again(app, sdk, alice, tmp_path, pools, monkeypatch):
    ctx = app.state.lanner
    ctx.settings.import_processes, ctx.settings.blob_grace_seconds = 2, 0  # the collector may take any blob
    taken: list[str] = []
    real = ingest._probe_all

    def then_collected(*args: Any) -> Any:
        stored = real(*args)
        for _, info, thumb in stored[:3]:  # the collector took these while the import went on
            for digest in (info.sha256, thumb):
                ctx.blobs.local_path(digest).unlink()
                taken.append(digest)
        return stored

    monkeypatch.setattr(ingest, "_probe_all", then_collected)
    direct_import(app, sdk, alice, "d", upload_folder(tmp_path) / "images")
    assert len(taken) == 6 and pools == [2]
    assert all(ctx.blobs.exists(digest) for digest in taken)  # stored again before the rows referred to them


def test_the_server_import_worker_probes_in_the_pool(app, client, sdk, alice, tmp_path, pools):
    ctx = app.state.lanner
    ctx.settings.import_processes = 2
    app.state.imports.stop()  # the job is run here, by the worker process's own function
    job_id = queue_import(app, alice, client, sdk, "d", package(upload_folder(tmp_path), tmp_path / "zip"))
    with ctx.db.session() as session:
        assert import_jobs.claim(session, session.get(ImportJob, job_id), "test-worker")
    assert import_worker.run_job(ctx.db, ctx.blobs, ctx.settings, job_id, "test-worker") == "succeeded"
    assert pools == [2]
    dataset = sdk(alice).datasets.retrieve("alice", "d")["dataset"]
    assert dataset["status"] == "ready" and dataset["imageCount"] == 29


# --- unpacking a zip on every core ------------------------------------------------------------------------------

def zip_of(path: Path, members: dict[str, bytes], damage: Any = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    if damage is not None:
        data = bytearray(path.read_bytes())
        damage(data)
        path.write_bytes(bytes(data))
    return path


def unpacked(archive: Path, out: Path, unpacker: Any) -> tuple[str, Any]:
    """What unpacking ``archive`` gave: the refusal's message, or every file (relative to the dataset root)."""
    try:
        root = extract_archive(archive, out, ImportLimits(), unpacker=unpacker)
    except ImportRefused as refused:
        return "refused", refused.message
    return os.fspath(root.relative_to(out)), {p.relative_to(root).as_posix(): p.read_bytes()
                                               for p in sorted(root.rglob("*")) if p.is_file()}


def lie_about_size(data: bytearray) -> None:  # the last member's headers declare 10 bytes
    local, central = data.rfind(b"PK\x03\x04"), data.rfind(b"PK\x01\x02")
    struct.pack_into("<I", data, local + 22, 10)
    struct.pack_into("<I", data, central + 24, 10)


def flip_a_byte(data: bytearray) -> None:  # inside the data of the member the 40th local header starts
    start = 0
    for _ in range(40):
        start = data.find(b"PK\x03\x04", start + 1)
    data[start + 200] ^= 0xFF


@pytest.mark.parametrize("damage", [None, lie_about_size, flip_a_byte], ids=["intact", "lying-size", "bad-crc"])
def test_a_zip_unpacked_by_the_pool_gives_what_one_process_gives(tmp_path, monkeypatch, damage):
    monkeypatch.setattr(probe_pool, "UNPACK_CHUNK", 5)
    members = {"wrap/data.yaml": b"names: [a]\ntrain: images\n", "wrap/__MACOSX/._x": b"junk",
               "wrap/.hidden": b"junk", "wrap/images/": b""}
    members |= {f"wrap/images/{i:03d}.jpg": os.urandom(300 + i) for i in range(60)}
    members |= {f"wrap/labels/deep/{i:03d}.txt": f"0 0.5 0.5 0.{i % 9 + 1} 0.1\n".encode() for i in range(30)}
    archive = zip_of(tmp_path / "up.zip", members, damage)
    alone = unpacked(archive, tmp_path / "alone", None)
    with ProbePool(LocalBlobStore(tmp_path / "blobs"), 2) as pool:
        assert unpacked(archive, tmp_path / "pooled", pool.unpack) == alone
        monkeypatch.setattr(probe_pool, "UNPACK_MAX_MEMBERS", 10)  # too many members to share: unpacked here
        assert unpacked(archive, tmp_path / "here", pool.unpack) == alone
    if damage is None:
        assert alone[0] == "wrap" and len(alone[1]) == 91
    else:
        assert alone[0] == "refused" and ("damaged" in alone[1] or "more bytes than its header" in alone[1])
