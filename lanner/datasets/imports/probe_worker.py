"""One worker of an import's image pool (``probe_pool``): ``python -m lanner.datasets.imports.probe_worker PID``.

It reads the blob store (and whether it may link the images: ``probe_one``) from stdin, then requests until
stdin closes: ``("probe", paths)``, answered ``(True, [Probed, ...])``, or ``("unpack", archive, members,
limits)`` (``formats.archive.write_zip_members``), answered ``(True, None)``; a failure is ``(False,
exception)``. It dies with the import that started it.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import sys
import zipfile
from pathlib import Path
from typing import Any

from lanner.datasets.imports.formats.archive import write_zip_members
from lanner.datasets.imports.probe_pool import probe_one, send


def die_with_parent(parent: int) -> None:
    """Ask the kernel to kill this process when the one that started it dies, however it dies (Linux; elsewhere a
    worker ends when its input closes, an import worker when its stale heartbeat is found)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def main() -> None:
    die_with_parent(int(sys.argv[1]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the import's to handle: it stops its workers
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a library printing to stdout must not break the replies
    blobs, link = pickle.load(requests)
    archives: dict[Path, zipfile.ZipFile] = {}  # the import's archive, its directory read once
    while True:
        try:
            kind, *args = pickle.load(requests)
        except EOFError:
            return
        try:
            if kind == "probe":
                reply: tuple[bool, Any] = (True, [probe_one(blobs, path, link) for path in args[0]])
            else:
                archive, members, limits = args
                if archive not in archives:
                    archives[archive] = zipfile.ZipFile(archive)
                reply = (True, write_zip_members(archive, archives[archive], members, limits))
        except Exception as exc:  # MemoryError included: raised again in the import, which reports it
            reply = (False, exc)
        try:
            send(replies, reply)
        except (pickle.PicklingError, TypeError, AttributeError):  # an exception that cannot be pickled
            send(replies, (False, RuntimeError(f"{type(reply[1]).__name__}: {reply[1]}")))


if __name__ == "__main__":
    main()
