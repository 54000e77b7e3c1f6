"""``lanner models``: the official models this server serves as ``ul://ultralytics/<family>/<name>``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lanner.cli_common import context, err, fail, refusals
from lanner.config import Settings
from lanner.context import AppContext
from lanner.projects import official

models_app = typer.Typer(help="Official models (ul://ultralytics/...).", no_args_is_help=True)


@models_app.command("add-official")
def add_official(file: Annotated[Path, typer.Argument(help="An Ultralytics .pt checkpoint, e.g. yolo11n.pt.")],
                 name: Annotated[str | None, typer.Option(help="Official name, e.g. yolo11n (default: the file's "
                                                               "name without .pt).")] = None) -> None:
    """Store FILE and serve it as official model NAME (task and classes read from it); prints its ul:// URI.
    An existing NAME gets the new weights; models cloned from it keep theirs."""
    source = file.expanduser()
    if not source.is_file():
        fail(f"{source} is not a file")
    with refusals():
        official.split_name(name or source.name)  # a bad name fails before the checkpoint is read
        ctx = context()
        uri = official.install_file(ctx.db, ctx.blobs, source, name=name)
    err.print(f"registered {uri} from {source}")
    typer.echo(uri)


def register_official_folder(settings: Settings) -> None:
    """``LANNER_OFFICIAL_MODELS_DIR`` at ``lanner serve``: register what is new or changed there, or refuse to
    start when the setting names no folder (a typo would otherwise serve 404s)."""
    folder = settings.official_models_dir
    if folder is None:
        return
    if not folder.expanduser().is_dir():
        fail(f"LANNER_OFFICIAL_MODELS_DIR: {folder} is not a folder")
    ctx = AppContext.from_settings(settings)
    try:
        for uri in official.OfficialFolder(folder).sync(ctx.db, ctx.blobs):
            err.print(f"registered {uri} from {folder}")
    finally:
        ctx.db.dispose()
