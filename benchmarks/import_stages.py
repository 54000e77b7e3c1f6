"""Where one import's time goes (issue 19): ``ingest_path`` run in-process on an archive, each stage timed.

    PYTHONPATH=<checkout> .venv/bin/python benchmarks/import_stages.py ARCHIVE

Wraps the stages of ``lanner.datasets.imports.ingest`` (unpacking, the plan, probing and storing the images, refreshing
the blobs, the image and item rows, the health check, deleting the unpacked files) with a wall-clock timer,
imports ``ARCHIVE`` into a new dataset of a throw-away LANNER_HOME, and prints each stage's seconds and the CPU of
this process and of its children (the image workers). Run it with ``PYTHONPATH`` at another checkout to time that
code: a stage it does not have is skipped.
"""

from __future__ import annotations

import contextlib
import functools
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STAGES = ("extract_archive", "plan_import", "_probe_all", "_keep_stored", "_insert_blob_rows", "_insert_items",
          "refresh_health")


def main() -> int:
    from lanner.accounts import service as accounts
    from lanner.accounts.principal import Principal
    from lanner.config import Settings
    from lanner.context import AppContext
    from lanner.datasets import service as datasets
    from lanner.datasets.imports import ingest
    from lanner.db.migrate import upgrade_database

    times: dict[str, float] = {}

    def timed(name: str) -> None:
        real = getattr(ingest, name, None)
        if real is None:
            return

        @functools.wraps(real)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                times[name] = times.get(name, 0.0) + time.perf_counter() - t0

        setattr(ingest, name, wrapper)

    for name in STAGES:
        timed(name)
    real_scratch = ingest.scratch_folder

    @contextlib.contextmanager
    def scratch_folder(*args: Any, **kwargs: Any) -> Iterator[Path]:
        with contextlib.ExitStack() as stack:
            stack.callback(lambda: times.__setitem__("scratch cleanup", time.perf_counter() - ended))
            folder = stack.enter_context(real_scratch(*args, **kwargs))
            yield folder
            ended = time.perf_counter()

    ingest.scratch_folder = scratch_folder
    home = Path(tempfile.mkdtemp(prefix="lanner-stages-"))
    try:
        settings = Settings(home=home)
        upgrade_database(settings.resolved_database_url)
        ctx = AppContext.from_settings(settings)
        with ctx.db.session() as session:
            user = accounts.create_user(session, username="bench")
            dataset_id = datasets.create_dataset(session, Principal.of(user), name="big", visibility="private").id
        t0 = time.perf_counter()
        with ctx.db.session() as session:
            result = ingest.ingest_path(session, blobs=ctx.blobs, settings=settings, dataset_id=dataset_id,
                                        source=Path(sys.argv[1]), queued=False)
            t1 = time.perf_counter()
        times["commit"] = time.perf_counter() - t1
        total = time.perf_counter() - t0
        ctx.db.dispose()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"{result.added} images in {total:.2f} s; CPU: this process {me.ru_utime + me.ru_stime:.1f} s, "
          f"its children {children.ru_utime + children.ru_stime:.1f} s")
    for name, seconds in times.items():
        print(f"  {name:20s} {seconds:7.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
