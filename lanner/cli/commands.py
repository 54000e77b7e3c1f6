"""``lanner`` command line for operators. Commands meant for scripts print only the value asked for."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from lanner.accounts import service as accounts_service
from lanner.billing import service as billing_service
from lanner.cli.common import act_as, command_session, context, err, fail, refusals
from lanner.cli.estimate import estimate
from lanner.cli.models import models_app, register_official_folder
from lanner.cli.pools import pools_app
from lanner.cli.storage import storage_app
from lanner.cli.teams import teams_app
from lanner.config import get_settings
from lanner.db.migrate import upgrade_database

app = typer.Typer(help="Lanner: self-hosted computer-vision platform.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
users_app = typer.Typer(help="Manage users (a user's name is its workspace).", no_args_is_help=True)
keys_app = typer.Typer(help="Manage API keys.", no_args_is_help=True)
runs_app = typer.Typer(help="Inspect and control training runs.", no_args_is_help=True)
credits_app = typer.Typer(help="Credit balances.", no_args_is_help=True)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
datasets_app = typer.Typer(help="Import and inspect datasets.", no_args_is_help=True)
gpus_app = typer.Typer(help="GPU catalogue and calibration.", no_args_is_help=True)
app.add_typer(users_app, name="users")
app.add_typer(keys_app, name="keys")
app.add_typer(runs_app, name="runs")
app.add_typer(credits_app, name="credits")
app.add_typer(db_app, name="db")
app.add_typer(datasets_app, name="datasets")
app.add_typer(gpus_app, name="gpus")
app.add_typer(models_app, name="models")
app.add_typer(teams_app, name="teams")
app.add_typer(pools_app, name="pools")
app.add_typer(storage_app, name="storage")
app.command()(estimate)


@app.command()
def serve(host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
          port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
          workers: Annotated[int, typer.Option(help="Uvicorn worker processes.")] = 1) -> None:
    """Start the HTTP server (migrating the database first)."""
    import uvicorn  # start-up cost: only serve needs the server

    # Signed links must name the address we listen on. Uvicorn's workers build their app from the environment
    # (they may be other processes), so the default goes there, before anything reads the settings.
    os.environ.setdefault("LANNER_PUBLIC_URL", f"http://{host}:{port}")
    settings = get_settings()
    settings.resolved_home.mkdir(parents=True, exist_ok=True)
    upgrade_database(settings.resolved_database_url)
    register_official_folder(settings)  # once, before any worker: their maintenance passes pick up later files
    err.print(f"Lanner on http://{host}:{port} (data in {settings.resolved_home})")
    if workers > 1 and settings.resolved_rate_limit_storage == "memory://":
        err.print(f"warning: rate limits are per process: each of the {workers} workers allows the whole limit "
                  "(set LANNER_REDIS_URL to share them)", markup=False, soft_wrap=True)
    # proxy_headers off: the app believes X-Forwarded-For from LANNER_TRUSTED_PROXIES only (lanner.http.proxies);
    # uvicorn's own copy would trust 127.0.0.1 by default.
    uvicorn.run("lanner.app:create_served_app", factory=True, host=host, port=port, workers=workers,
                log_level="warning", access_log=False, proxy_headers=False)


@users_app.command("create")
def users_create(name: str,
                 password: Annotated[str | None, typer.Option(help="Password for the web UI.")] = None,
                 tier: Annotated[str, typer.Option(help="free, pro or enterprise.")] = "free",
                 credits: Annotated[float, typer.Option(help="Starting credits in USD.")] = 0.0,
                 admin: Annotated[bool, typer.Option(help="A server admin: sees the operator's pages and API "
                                                          "(/operator/pools).")] = False) -> None:
    """Create a user; prints its username."""
    with command_session() as (_, session):
        user = accounts_service.create_user(session, username=name, password=password, tier=tier, is_admin=admin)
        if credits:
            billing_service.top_up(session, user_id=user.id, micros=billing_service.dollars_to_micros(credits),
                                   description="Initial credits")
        username = user.username
    typer.echo(username)


def _read_password() -> str:
    """From a hidden prompt (typed twice) at a terminal, else the first line of stdin, so a script can pipe it
    in: never a command-line argument, which other users of the machine can read in the process list."""
    if sys.stdin.isatty():
        return typer.prompt("New password", hide_input=True, confirmation_prompt=True)
    return sys.stdin.readline().rstrip("\r\n")


@users_app.command("set-password")
def users_set_password(name: str) -> None:
    """Set user NAME's web password (prompted, or read from stdin); signs them out of every browser."""
    # start-up cost: signing browsers out brings the web stack (FastAPI), which no other command needs
    from lanner.accounts import passwords

    password = _read_password()
    with command_session() as (_, session):
        passwords.set_password(session, user=accounts_service.require_user(session, username=name),
                               password=password)


@users_app.command("set-admin")
def users_set_admin(name: str, off: Annotated[bool, typer.Option("--off", help="Take the role away.")] = False
                    ) -> None:
    """Make user NAME a server admin (the operator's pages and API), or no longer one with --off."""
    with command_session() as (_, session):
        accounts_service.require_user(session, username=name).is_admin = not off


@keys_app.command("create")
def keys_create(name: str, label: Annotated[str, typer.Option(help="Name shown in the key list.")] = "cli") -> None:
    """Create an API key for user NAME; prints the key (shown only once)."""
    with command_session() as (_, session):
        user = accounts_service.require_user(session, username=name)
        _, plaintext = accounts_service.create_api_key(session, user=user, name=label)
    typer.echo(plaintext)


@keys_app.command("revoke")
def keys_revoke(name: str, key_id: str) -> None:
    """Revoke API key KEY_ID of user NAME."""
    with command_session() as (_, session):
        user = accounts_service.require_user(session, username=name)
        accounts_service.revoke_api_key(session, user_id=user.id, key_id=key_id)


@credits_app.command("add")
def credits_add(name: str, usd: float) -> None:
    """Top up user NAME by USD dollars; prints the new balance in cents."""
    with command_session() as (_, session):
        user = accounts_service.require_user(session, username=name)
        billing_service.top_up(session, user_id=user.id, micros=billing_service.dollars_to_micros(usd))
        cents = billing_service.micros_to_cents(billing_service.balance_micros(session, user_id=user.id))
    typer.echo(cents)


@runs_app.command("cancel")
def runs_cancel(target: Annotated[str, typer.Argument(help="OWNER/PROJECT/MODEL")]) -> None:
    """Cancel the active run of a model; the trainer stops at its next report."""
    # start-up cost: each command imports only its own domain
    from lanner.projects import service as projects_service
    from lanner.training import service as training_service

    parts = target.strip("/").split("/")
    if len(parts) != 3 or not all(parts):
        fail("expected OWNER/PROJECT/MODEL")
    with command_session() as (_, session):
        model = projects_service.get_model(session, act_as(session, parts[0]), owner=parts[0],
                                           project=parts[1], model=parts[2], write=True)
        run_id = training_service.cancel_training(session, model).id
    typer.echo(run_id)


@datasets_app.command("import")
def datasets_import(path: Annotated[str, typer.Argument(help="YOLO zip or folder, COCO JSON, NDJSON, class folders, "
                                                             "or images.")],
                    owner: Annotated[str, typer.Option(help="Workspace (username) that owns the dataset.")],
                    name: Annotated[str, typer.Option(help="Dataset name; created if it does not exist.")],
                    public: Annotated[bool, typer.Option(help="Make a new dataset public.")] = False) -> None:
    """Import a local dataset in one step (a Rich progress bar on stderr); prints the dataset's ul:// URI. All or
    nothing: images are stored first, then one transaction creates the dataset (if new) and adds them."""
    # start-up cost: each command imports only its own domain (the importers bring PIL and NumPy)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from lanner.datasets import service as datasets_service
    from lanner.datasets.imports.ingest import commit_import, prepare_import
    from lanner.errors import Conflict, NotFound
    from lanner.slugs import slugify

    source = Path(path).expanduser()
    if not source.exists():
        fail(f"{source} does not exist")
    with command_session() as (ctx, session):
        act_as(session, owner)  # an unknown owner fails before any work
    with refusals(), Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                               TimeElapsedColumn(), console=err) as bar:
        tasks = {"unpacked": bar.add_task("unpacked", total=None)}  # a bar per stage, each ending at its total

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        with prepare_import(blobs=ctx.blobs, settings=ctx.settings, source=source, progress=progress) as prepared, \
                ctx.db.session() as session:
            principal = act_as(session, owner)
            try:
                dataset = datasets_service.get_dataset(session, principal, owner=owner, slug=slugify(name),
                                                       write=True)
            except NotFound:
                dataset = datasets_service.create_dataset(session, principal, name=name,
                                                          visibility="public" if public else "private")
            if dataset.status == "processing":
                raise Conflict("this dataset is already processing an import")
            result = commit_import(session, prepared, dataset=dataset, queued=False,
                                   progress=progress)
            slug = dataset.slug
    for issue in result.issues[:20]:
        err.print(f"[yellow]skipped[/yellow] {issue.name}: {issue.reason}")
    if len(result.issues) > 20:
        err.print(f"... and {len(result.issues) - 20} more skipped files")
    err.print(f"imported {result.added} images into {owner}/{slug}")
    typer.echo(f"ul://{owner}/datasets/{slug}")


@gpus_app.command("list")
def gpus_list(tier: Annotated[str | None, typer.Option(help="Mark what this tier may use.")] = None) -> None:
    """Show the GPU catalogue: VRAM, compute, price and the lowest tier that may use each type."""
    # start-up cost: each command imports only its own domain
    from rich.table import Table

    from lanner.gpus.catalogue import get_catalogue

    catalogue = get_catalogue(get_settings())

    def number(value: float | None) -> str:
        return f"{value:g}" if value else "-"

    table = Table("GPU type", "name", "architecture", "VRAM GB", "GB/s", "FP32 TFLOPS", "FP16 TFLOPS",
                  "host vCPU / RAM GB", "$/h", "tier", "offered")
    for gpu in catalogue.all():
        allowed = "" if tier is None else (" ✓" if gpu.allowed_for(tier) else " ✗")
        table.add_row(gpu.id, gpu.display_name, gpu.architecture, f"{gpu.vram_gb:g}" if gpu.vram_gb else "host RAM",
                      number(gpu.bandwidth_gbs), number(gpu.fp32_tflops), number(gpu.fp16_tflops),
                      f"{gpu.host_vcpus} / {gpu.host_ram_gb:g}" if gpu.vram_gb else "this machine",
                      f"{gpu.price_per_hour:.2f}", gpu.min_tier + allowed, "yes" if gpu.offered else "no")
    Console().print(table)


@gpus_app.command("probe")
def gpus_probe(model: Annotated[str, typer.Option(help="Model YAML or weights to train.")] = "yolo11n.yaml",
               imgsz: Annotated[list[int] | None, typer.Option(
                   help="Training image size; repeat it to probe several (default: 192 and 384).")] = None,
               batch: Annotated[int, typer.Option(help="Batch size.")] = 16,
               images: Annotated[int, typer.Option(help="Synthetic training images per epoch.")] = 160) -> None:
    """Measure real training steps on this machine's devices and store them as calibration points."""
    from lanner.gpus.probe import (  # start-up cost: torch, ultralytics, record_probe, run_probe
        PROBE_SIZES,
        local_devices,
        record_probe,
        run_probe,
    )

    sizes = imgsz or list(PROBE_SIZES)
    if min(sizes) <= 0 or batch <= 0 or images <= 0:
        fail("imgsz, batch and images must be positive")
    ctx = context()
    for device, gpu_type in local_devices():
        for size in sizes:
            err.print(f"probing {gpu_type} (device {device}) with {model}, imgsz {size}, batch {batch} ...")
            result = run_probe(model=model, imgsz=size, batch=batch, images=images, device=device)
            with ctx.db.session() as session:
                record_probe(session, result)
            typer.echo(f"{gpu_type}\t{size}\t{result.epoch_seconds:.2f} s/epoch\t"
                       f"{images / result.epoch_seconds:.1f} img/s")


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply all Alembic migrations."""
    upgrade_database(get_settings().resolved_database_url)


@app.command()
def demo(username: str = "demo") -> None:
    """Ensure a demo user (with credit), a demo dataset and a pretrained starting model exist, give the user a fresh
    password and API key, and print both."""
    # start-up cost: the demo draws its dataset with OpenCV
    from lanner.cli.demo import ensure_workspace

    with refusals():
        workspace = ensure_workspace(context(), username=username, password=secrets.token_urlsafe(9))
    public = get_settings().public_url
    typer.echo(f"Demo workspace ready at {public}\n  login:    {username}\n  password: {workspace.password}\n"
               f"  API key:  {workspace.key}\n  dataset:  {workspace.dataset}\n"
               f"  export ULTRALYTICS_PLATFORM_URL={public} ULTRALYTICS_API_KEY={workspace.key}")
    if workspace.starting_problem:
        err.print(f"[yellow]warning:[/yellow] no starting model was queued: {workspace.starting_problem}")
    if workspace.starting_model:
        typer.echo(f"  starting model: {workspace.starting_model} (queued: it trains on this machine once the "
                   "server starts, a few minutes on the CPU; new models start from it)")


def main() -> None:
    """The ``lanner`` entry point: whatever goes wrong is one line, never a traceback (``LANNER_DEBUG=1``: both)."""
    try:
        app()
    except KeyboardInterrupt:
        err.print("[red]error:[/red] interrupted")
        raise SystemExit(130) from None
    except Exception as exc:  # an unexpected failure: say what and where to look, not a stack trace
        if os.environ.get("LANNER_DEBUG"):
            raise
        err.print(f"[red]error:[/red] {type(exc).__name__}: {exc}".splitlines()[0][:300], soft_wrap=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
