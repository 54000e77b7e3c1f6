"""``lanner storage``: the blob store (LANNER_BLOB_STORE), and moving it between the local folder and a bucket."""

from __future__ import annotations

from typing import Annotated

import typer

from lanner.cli.common import err, fail
from lanner.config import get_settings

storage_app = typer.Typer(help="The blob store: local folder or S3-compatible bucket (LANNER_BLOB_STORE).",
                          no_args_is_help=True)


@storage_app.command("migrate")
def storage_migrate(to: Annotated[str, typer.Option("--to", help="Where the blobs go: 's3' (LANNER_S3_*) or "
                                                    "'local' (LANNER_HOME/blobs).")]) -> None:
    """Copy every blob into the other store, hashing each one; blobs already there are skipped, so it resumes
    after an interruption and may run again. The source is kept: switch LANNER_BLOB_STORE, then delete it."""
    # start-up cost: only this command opens both stores
    from lanner.storage.backends import open_blob_store
    from lanner.storage.migrate import migrate

    if to not in ("s3", "local"):
        fail("--to is 's3' or 'local'")
    settings = get_settings()
    try:
        source = open_blob_store(settings, "local" if to == "s3" else "s3")
        target = open_blob_store(settings, to)
    except ValueError as exc:
        fail(str(exc))

    def progress(done: object) -> None:
        err.print(f"  {done.copied} copied, {done.skipped} already there", end="\r")  # type: ignore[attr-defined]

    result = migrate(source, target, settings.resolved_home / "tmp", progress=progress)
    err.print()
    print(f"copied {result.copied} blobs ({result.bytes} bytes), skipped {result.skipped} already in {to}, "
          f"{len(result.corrupt)} corrupt")
    for digest in result.corrupt:
        err.print(f"[red]corrupt in the source (its bytes do not hash to its name), not copied: {digest}[/red]")
    if result.corrupt:
        raise typer.Exit(1)
