"""Scratch folders that a crash cannot leak.

Imports unpack archives and exports write files under ``LANNER_HOME/tmp`` before the results become blobs. A
process killed mid-way (kill -9, out of memory, a power cut) never runs its ``finally``, so its folder would stay
forever. Each folder therefore holds a lock file that its owner keeps ``flock``-ed for the folder's whole life;
the kernel drops the lock the moment the owner dies, however it dies. ``collect`` deletes every folder whose lock
it can take (the owner is gone) and that is older than a grace period (a folder is made before its lock is taken:
the grace covers that instant), whichever process, thread or host-local CLI made it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("lanner.scratch")

LOCK_NAME = ".owner.lock"
UNLOCKED_GRACE_SECONDS = 60.0  # a folder without its lock yet is being made right now


def scratch_root(home: Path) -> Path:
    """``LANNER_HOME/tmp``: on the blob store's filesystem (results move into it), never inside its folders."""
    root = home / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextmanager
def scratch_folder(home: Path, prefix: str) -> Iterator[Path]:
    """A new private folder under ``LANNER_HOME/tmp``, locked while the block runs and deleted when it ends (or,
    if this process dies first, by the next ``collect``)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_root(home)))
    lock = os.open(folder / LOCK_NAME, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(lock)


def collect(home: Path, grace_seconds: float) -> int:
    """Delete scratch folders (and stray files) whose owner is gone; returns how many entries went."""
    removed = 0
    now = time.time()
    for entry in scratch_root(home).iterdir():
        try:
            age = now - entry.lstat().st_mtime
        except FileNotFoundError:
            continue
        if age < grace_seconds:
            continue
        if entry.is_dir() and not entry.is_symlink():
            if not _owner_gone(entry, age):
                continue
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed += 1
    if removed:
        log.info("removed %d scratch entries left by stopped imports or exports", removed)
    return removed


def _owner_gone(folder: Path, age: float) -> bool:
    try:
        lock = os.open(folder / LOCK_NAME, os.O_RDWR)
    except FileNotFoundError:
        return age >= UNLOCKED_GRACE_SECONDS
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # its owner is alive and still working in it
    finally:
        os.close(lock)  # closing drops a lock we took
    return True
