"""``lanner models``: the official models this server serves as ``ul://ultralytics/<family>/<name>``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lanner.cli.common import context, err, fail, refusals
from lanner.config import Settings
from lanner.context import AppContext
from lanner.scratch import scratch_folder

models_app = typer.Typer(help="Official models (ul://ultralytics/...).", no_args_is_help=True)


@models_app.command("add-official")
def add_official(file: Annotated[str, typer.Argument(help="An Ultralytics .pt checkpoint (./yolo11n.pt), or an "
                                                        "official name (yolo11n) to download where online.")],
                 name: Annotated[str | None, typer.Option(help="Official name, e.g. yolo11n (default: the file's "
                                                               "name without .pt).")] = None) -> None:
    """Store FILE and serve it as official model NAME (task and classes read from it); prints its ul:// URI.
    An existing NAME gets the new weights; models cloned from it keep theirs. A bare official name that is not a
    file here (yolo11n, yolo26s-seg.pt) is downloaded with the trainer's own downloader, when this host is online."""
    from lanner.projects import official  # start-up cost: each command imports only its own domain

    source = Path(file).expanduser()
    with refusals():
        if not source.is_file() and source.parent == Path(".") and official.family_of(source.name):
            official.split_name(source.name)  # a bad name fails before anything is fetched
            ctx = context()
            with scratch_folder(ctx.settings.resolved_home, "official-") as folder:
                uri = official.install_file(ctx.db, ctx.blobs, _download(source.name, folder), name=name)
            err.print(f"registered {uri} (downloaded)")
            typer.echo(uri)
            return
        if not source.is_file():
            fail(f"{source} is not a file")
        official.split_name(name or source.name)  # a bad name fails before the checkpoint is read
        ctx = context()
        uri = official.install_file(ctx.db, ctx.blobs, source, name=name)
    err.print(f"registered {uri} from {source}")
    typer.echo(uri)


def _download(name: str, folder: Path) -> Path:
    """``name``.pt fetched by the trainer's downloader (``attempt_download_asset``: the Ultralytics assets
    release), or a one-line refusal that says what to do on a host without internet."""
    file = name if name.endswith(".pt") else f"{name}.pt"
    instead = (f"copy {file} here from a machine that has it and run `lanner models add-official ./{file}` (or put "
               "it in the folder LANNER_OFFICIAL_MODELS_DIR names)")
    from ultralytics.utils import is_online  # start-up cost: only when a download is asked for
    from ultralytics.utils.downloads import attempt_download_asset  # start-up cost, as above

    if not is_online():
        fail(f"cannot download {file}: this host is offline; {instead}")
    target = folder / file
    try:
        fetched = Path(attempt_download_asset(target))
    except Exception as exc:  # the downloader's errors vary by cause (DNS, HTTP, disk): one line, never a trace
        fail(f"cannot download {file}: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}; "
             f"{instead}")
    if not fetched.is_file():
        fail(f"cannot download {file}: the downloader returned no file; {instead}")
    return fetched


def register_official_folder(settings: Settings) -> None:
    """``LANNER_OFFICIAL_MODELS_DIR`` at ``lanner serve``: register what is new or changed there, or refuse to
    start when the setting names no folder (a typo would otherwise serve 404s)."""
    folder = settings.official_models_dir
    if folder is None:
        return
    if not folder.expanduser().is_dir():
        fail(f"LANNER_OFFICIAL_MODELS_DIR: {folder} is not a folder")
    from lanner.projects import official  # start-up cost: each command imports only its own domain

    ctx = AppContext.from_settings(settings)
    try:
        for uri in official.OfficialFolder(folder).sync(ctx.db, ctx.blobs):
            err.print(f"registered {uri} from {folder}")
    finally:
        ctx.db.dispose()
