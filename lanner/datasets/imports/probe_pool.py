"""Probing an upload's images on every core, the results handed back in upload order (issue 19).

Probing one image (sha256, header checks, a JPEG decode at thumbnail scale, phash, the thumbnail's encode) costs
~2.2 ms of CPU for a 640x480 JPEG and storing it and its thumbnail ~0.5 ms more, most of it in C; the Python
around it holds the GIL, so threads in the import's own process kept about one core busy however many there were.
Here the images go to worker *processes* instead:

- ``probe_one`` is the whole job of one image, the same function whichever path runs it, so both paths store the
  same bytes and report the same digests, sizes, phashes, thumbnails and reasons;
- the workers write the image and its thumbnail into the blob store themselves (content-addressed, so two
  workers storing the same bytes is harmless) and send back only ``Probed`` records (~300 bytes each);
- chunks of ``CHUNK`` images are dealt to the workers in turn, at most ``IN_FLIGHT_PER_WORKER`` outstanding
  each, and read back in the order they were dealt: the pool holds a few chunks whatever the upload's size, and
  the import commits in the upload's order, exactly as without a pool;
- a corrupt image is a ``Probed`` with its reason, like any other result; an unexpected error (a full disk, a
  ``MemoryError``) is raised here as it would be in one process, and a worker that dies (killed for memory) ends
  the import with ``WORKER_DIED``;
- a big zip's files are written by the same workers (``unpack``: this process checked every member first, see
  ``formats.archive``), so unpacking uses every core too.

A worker is ``python -m lanner.datasets.imports.probe_worker``, talking pickles over its stdin and stdout: a plain child
process, so it shares none of the import's threads, locks, database connections or scratch-folder lock, needs no
``__main__`` guard in whatever program runs the import, inherits its memory limit, and is killed with the thread
that started it (``PR_SET_PDEATHSIG``): a killed import leaves no worker behind. Workers take ~0.5 s to start, so
an import of fewer than ``MIN_POOL_IMAGES`` images from an archive under ``EARLY_POOL_BYTES``, or a process allowed
one CPU, probes in its own process as before (``probe_in_process``).
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import zipfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from lanner.datasets.images import probe_image
from lanner.datasets.imports.formats.archive import Unpacker, ZipMember, write_zip_members
from lanner.datasets.records import CorruptImage, ImageInfo, ImportLimits, ImportRefused
from lanner.storage.blobs import BlobStore

CHUNK = 16                  # images per message: ~20 ms of work, so the per-message cost (~0.1 ms) is lost in it
UNPACK_CHUNK = 64           # archive members per message (an image and its label each cost a file creation)
UNPACK_MAX_MEMBERS = 200_000  # a bigger zip is unpacked by one process: each worker would hold its directory
IN_FLIGHT_PER_WORKER = 2    # chunks dealt to a worker and not yet read back: one running, one waiting
MIN_POOL_IMAGES = 500       # below this, starting the workers (~0.5 s) costs about what they save
EARLY_POOL_BYTES = 16 << 20  # an archive this big holds enough images to start the workers before unpacking it
WORKER_MODULE = "lanner.datasets.imports.probe_worker"
WORKER_DIED = ("a process decoding the images stopped unexpectedly, most often because an image needed more "
               "memory than an import may use (LANNER_IMPORT_MEMORY_BYTES); split the upload into smaller ones")


@dataclass(frozen=True)
class Probed:
    """One image's outcome: ``info`` and its thumbnail's digest once stored, else ``error`` (why it is unusable)."""

    info: ImageInfo | None
    thumb: str | None
    error: str | None


def probe_one(blobs: BlobStore, path: Path, link: bool) -> Probed:
    """Probe one image and store it with its thumbnail; a corrupt image is reported, not raised. ``link``: the
    file is the import's own unpacked copy, which the blob store may share instead of copying."""
    try:
        info, thumbnail = probe_image(path, thumbnail=True)
    except CorruptImage as exc:
        return Probed(None, None, str(exc))
    thumb = blobs.put_bytes(thumbnail).sha256
    blobs.put_path(path, info.sha256, link=link)
    return Probed(info, thumb, None)


def cpus_available() -> int:
    """CPUs this process may run on (its affinity mask: a container's or taskset's limit, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def pool_size(setting: int, images: int) -> int:
    """Worker processes for ``images`` images under ``LANNER_IMPORT_PROCESSES`` (0: one per CPU); 0 means none:
    probe in this process."""
    wanted = setting if setting > 0 else cpus_available()
    if wanted <= 1 or images < MIN_POOL_IMAGES:
        return 0
    return min(wanted, -(-images // CHUNK))


def probe_all(blobs: BlobStore, paths: Sequence[Path], *, processes: int, link: bool = False) -> Iterator[Probed]:
    """One ``Probed`` per path, in order: in a pool of ``processes`` workers, or in this process when 0."""
    if processes <= 0:
        yield from probe_in_process(blobs, paths, link=link)
        return
    with ProbePool(blobs, processes, link=link) as pool:
        yield from pool.probe(paths)


class Prober:
    """An import's way of probing: in a pool when it pays (``pool_size``), else in this process; a context
    manager. ``archive_bytes``: the upload is an archive this big, still to be unpacked; a big one starts its
    pool now, so the workers' start-up (~0.5 s) overlaps the unpacking and they unpack it too."""

    def __init__(self, blobs: BlobStore, setting: int, *, link: bool, archive_bytes: int = 0) -> None:
        self.blobs, self.setting, self.link = blobs, setting, link
        early = pool_size(setting, MIN_POOL_IMAGES) if archive_bytes >= EARLY_POOL_BYTES else 0
        self.pool = ProbePool(blobs, early, link=link) if early else None

    def __enter__(self) -> Prober:
        return self

    def __exit__(self, error: type[BaseException] | None, *_: object) -> None:
        self.close(kill=error is not None)

    def close(self, *, kill: bool = False) -> None:
        if self.pool is not None:
            self.pool.close(kill=kill)
            self.pool = None

    def unpacker(self) -> Unpacker | None:
        """Where a zip's files are written: by the pool when it was started early, else here."""
        return self.pool.unpack if self.pool is not None else None

    def probe(self, paths: Sequence[Path]) -> Iterator[Probed]:
        """One ``Probed`` per path, in order. A pool started early is used whatever the count (it is paid for)."""
        if self.pool is None and (processes := pool_size(self.setting, len(paths))):
            self.pool = ProbePool(self.blobs, processes, link=self.link)
        if self.pool is None:
            yield from probe_in_process(self.blobs, paths, link=self.link)
        else:
            yield from self.pool.probe(paths)


def probe_in_process(blobs: BlobStore, paths: Sequence[Path], *, link: bool = False) -> Iterator[Probed]:
    """The path without a pool: a few threads, which overlap file reads and the C parts that drop the GIL."""
    with ThreadPoolExecutor(max_workers=max(2, cpus_available())) as threads:
        yield from threads.map(lambda path: probe_one(blobs, path, link), paths)


class ProbePool:
    """``processes`` worker processes probing for one import; a context manager (the workers end with it)."""

    def __init__(self, blobs: BlobStore, processes: int, *, link: bool = False) -> None:
        # The workers import what this process imports from where it does (tests, a checkout on PYTHONPATH).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p or os.getcwd() for p in sys.path)}
        self._workers: list[subprocess.Popen[bytes]] = []
        try:
            for _ in range(processes):
                worker = subprocess.Popen([sys.executable, "-m", WORKER_MODULE, str(os.getpid())], env=env,
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                self._workers.append(worker)
                send(worker.stdin, (blobs, link))
        except BaseException:
            self.close(kill=True)
            raise

    def __enter__(self) -> ProbePool:
        return self

    def __exit__(self, error: type[BaseException] | None, *_: object) -> None:
        self.close(kill=error is not None)

    def close(self, *, kill: bool = False) -> None:
        """Let every worker go: idle ones exit when their stdin closes; after a failure they are killed (what
        they were storing is left to the collector, like everything a failed import stored)."""
        for worker in self._workers:
            if kill:
                worker.kill()
            if worker.stdin is not None and not worker.stdin.closed:
                try:
                    worker.stdin.close()  # end of work: an idle worker exits at once
                except BrokenPipeError:
                    pass
        for worker in self._workers:
            try:
                worker.wait(timeout=5)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
            if worker.stdout is not None:
                worker.stdout.close()
        self._workers = []

    def probe(self, paths: Sequence[Path]) -> Iterator[Probed]:
        """One ``Probed`` per path, in order."""
        for probed in self._run([("probe", list(paths[i:i + CHUNK])) for i in range(0, len(paths), CHUNK)]):
            yield from probed

    def unpack(self, archive: Path, members: list[ZipMember], limits: ImportLimits) -> None:
        """Write a zip's checked members (``formats.archive``); the first refusal in the archive's order is
        raised, as unpacking it in one process would raise it. Each worker reads the zip's directory (~400 bytes
        a member), so an archive of more than ``UNPACK_MAX_MEMBERS`` is written here, by one process."""
        if len(members) > UNPACK_MAX_MEMBERS:
            with zipfile.ZipFile(archive) as zf:
                write_zip_members(archive, zf, members, limits)
            return
        for _ in self._run([("unpack", archive, members[i:i + UNPACK_CHUNK], limits)
                            for i in range(0, len(members), UNPACK_CHUNK)]):
            pass

    def _run(self, requests: list[tuple[Any, ...]]) -> Iterator[Any]:
        """The replies to ``requests``, in order: request ``i`` goes to worker ``i % processes`` and is read back
        in turn, with at most ``IN_FLIGHT_PER_WORKER`` requests outstanding per worker."""
        ahead = len(self._workers) * IN_FLIGHT_PER_WORKER
        dealt = 0
        for index in range(len(requests)):
            while dealt < len(requests) and dealt < index + ahead:
                self._deal(dealt, requests[dealt])
                dealt += 1
            yield self._collect(index)

    def _deal(self, index: int, request: tuple[Any, ...]) -> None:
        worker = self._workers[index % len(self._workers)]
        try:
            send(worker.stdin, request)
        except (BrokenPipeError, OSError):
            raise ImportRefused(WORKER_DIED) from None

    def _collect(self, index: int) -> Any:
        worker = self._workers[index % len(self._workers)]
        assert worker.stdout is not None
        try:
            ok, value = pickle.load(worker.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            raise ImportRefused(WORKER_DIED) from None
        if not ok:
            raise value
        return value


def send(stream: IO[bytes] | None, value: Any) -> None:
    """One message: pickled whole first, so a value that cannot be pickled writes nothing."""
    assert stream is not None
    stream.write(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    stream.flush()
