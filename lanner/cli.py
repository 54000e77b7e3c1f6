"""``lanner`` command line for operators. Commands meant for scripts print only the value asked for."""

from __future__ import annotations

import secrets
from typing import Annotated

import typer
from rich.console import Console

from lanner.config import get_settings

app = typer.Typer(help="Lanner: self-hosted computer-vision platform.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
users_app = typer.Typer(help="Manage users (a user's name is its workspace).", no_args_is_help=True)
keys_app = typer.Typer(help="Manage API keys.", no_args_is_help=True)
runs_app = typer.Typer(help="Inspect and control training runs.", no_args_is_help=True)
credits_app = typer.Typer(help="Credit balances.", no_args_is_help=True)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
datasets_app = typer.Typer(help="Import and inspect datasets.", no_args_is_help=True)
app.add_typer(users_app, name="users")
app.add_typer(keys_app, name="keys")
app.add_typer(runs_app, name="runs")
app.add_typer(credits_app, name="credits")
app.add_typer(db_app, name="db")
app.add_typer(datasets_app, name="datasets")

err = Console(stderr=True)


def _context():
    from lanner.context import AppContext
    from lanner.migrate import upgrade_database

    ctx = AppContext.from_settings(get_settings())
    upgrade_database(ctx.db.url)
    return ctx


def _fail(message: str) -> None:
    err.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code=1)


@app.command()
def serve(host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
          port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
          workers: Annotated[int, typer.Option(help="Uvicorn worker processes.")] = 1) -> None:
    """Start the HTTP server (migrating the database first)."""
    import os

    import uvicorn

    from lanner.migrate import upgrade_database

    settings = get_settings()
    if "LANNER_PUBLIC_URL" not in os.environ:
        os.environ["LANNER_PUBLIC_URL"] = f"http://{host}:{port}"
        get_settings.cache_clear()
        settings = get_settings()
    settings.resolved_home.mkdir(parents=True, exist_ok=True)
    upgrade_database(settings.resolved_database_url)
    err.print(f"Lanner on http://{host}:{port} (data in {settings.resolved_home})")
    uvicorn.run("lanner.app:create_app", factory=True, host=host, port=port, workers=workers,
                log_level="warning", access_log=False)


@users_app.command("create")
def users_create(name: str,
                 password: Annotated[str | None, typer.Option(help="Password for the web UI.")] = None,
                 tier: Annotated[str, typer.Option(help="free, pro or enterprise.")] = "free",
                 credits: Annotated[float, typer.Option(help="Starting credits in USD.")] = 0.0) -> None:
    """Create a user; prints its username."""
    from lanner.accounts import service
    from lanner.billing.service import dollars_to_micros
    from lanner.errors import LannerError

    ctx = _context()
    try:
        with ctx.db.session() as session:
            user = service.create_user(session, username=name, password=password, tier=tier,
                                       credits_micros=dollars_to_micros(credits) if credits else 0)
            typer.echo(user.username)
    except LannerError as exc:
        _fail(exc.message)


@keys_app.command("create")
def keys_create(name: str, label: Annotated[str, typer.Option(help="Name shown in the key list.")] = "cli") -> None:
    """Create an API key for user NAME; prints the key (shown only once)."""
    from lanner.accounts import service
    from lanner.errors import LannerError

    ctx = _context()
    try:
        with ctx.db.session() as session:
            user = service.require_user(session, username=name)
            _, plaintext = service.create_api_key(session, user=user, name=label)
        typer.echo(plaintext)
    except LannerError as exc:
        _fail(exc.message)


@keys_app.command("revoke")
def keys_revoke(name: str, key_id: str) -> None:
    """Revoke API key KEY_ID of user NAME."""
    from lanner.accounts import service
    from lanner.errors import LannerError

    ctx = _context()
    try:
        with ctx.db.session() as session:
            user = service.require_user(session, username=name)
            service.revoke_api_key(session, user_id=user.id, key_id=key_id)
    except LannerError as exc:
        _fail(exc.message)


@credits_app.command("add")
def credits_add(name: str, usd: float) -> None:
    """Top up user NAME by USD dollars; prints the new balance in cents."""
    from lanner.accounts import service
    from lanner.billing import service as billing
    from lanner.errors import LannerError

    ctx = _context()
    try:
        with ctx.db.session() as session:
            user = service.require_user(session, username=name)
            billing.top_up(session, user_id=user.id, micros=billing.dollars_to_micros(usd))
            typer.echo(billing.micros_to_cents(billing.balance_micros(session, user_id=user.id)))
    except LannerError as exc:
        _fail(exc.message)


@runs_app.command("cancel")
def runs_cancel(target: Annotated[str, typer.Argument(help="OWNER/PROJECT/MODEL")]) -> None:
    """Cancel the active run of a model; the trainer stops at its next report."""
    from lanner.accounts import service as accounts_service
    from lanner.accounts.service import Principal
    from lanner.errors import LannerError
    from lanner.projects import service as projects_service
    from lanner.training import service as training_service

    parts = target.strip("/").split("/")
    if len(parts) != 3 or not all(parts):
        _fail("expected OWNER/PROJECT/MODEL")
    ctx = _context()
    try:
        with ctx.db.session() as session:
            owner = accounts_service.require_user(session, username=parts[0])
            principal = Principal(user_id=owner.id, username=owner.username, tier=owner.tier, key_id=None)
            model = projects_service.get_model(session, principal, owner=parts[0], project=parts[1],
                                               model=parts[2], write=True)
            run = training_service.cancel_training(session, model)
            typer.echo(run.id)
    except LannerError as exc:
        _fail(exc.message)


@datasets_app.command("import")
def datasets_import(path: Annotated[str, typer.Argument(help="YOLO zip or folder, COCO JSON, NDJSON, class folders, "
                                                             "or images.")],
                    owner: Annotated[str, typer.Option(help="Workspace (username) that owns the dataset.")],
                    name: Annotated[str, typer.Option(help="Dataset name; created if it does not exist.")],
                    public: Annotated[bool, typer.Option(help="Make a new dataset public.")] = False) -> None:
    """Import a local dataset in one step (a Rich progress bar on stderr); prints the dataset's ul:// URI."""
    from pathlib import Path

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from lanner.accounts import service as accounts_service
    from lanner.accounts.service import Principal
    from lanner.datasets import service as datasets_service
    from lanner.datasets.ingest import ingest_path
    from lanner.datasets.records import ImportRefused
    from lanner.errors import LannerError, NotFound
    from lanner.slugs import slugify

    source = Path(path).expanduser()
    if not source.exists():
        _fail(f"{source} does not exist")
    ctx = _context()
    try:
        with ctx.db.session() as session:
            user = accounts_service.require_user(session, username=owner)
            principal = Principal(user_id=user.id, username=user.username, tier=user.tier, key_id=None)
            try:
                dataset = datasets_service.get_dataset(session, principal, owner=owner, slug=slugify(name),
                                                       write=True)
            except NotFound:
                dataset = datasets_service.create_dataset(session, principal, name=name,
                                                          visibility="public" if public else "private")
            if dataset.status == "processing":
                _fail("this dataset is already processing an import")
            dataset_id, slug = dataset.id, dataset.slug
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err) as bar:
            task = bar.add_task("unpacking", total=None)

            def progress(stage: str, done: int, total: int) -> None:
                bar.update(task, description=stage, completed=done, total=total or None)

            result = ingest_path(ctx, dataset_id, source, progress=progress)
    except (ImportRefused, LannerError) as exc:
        _fail(str(exc))
    for issue in result.issues[:20]:
        err.print(f"[yellow]skipped[/yellow] {issue.name}: {issue.reason}")
    if len(result.issues) > 20:
        err.print(f"... and {len(result.issues) - 20} more skipped files")
    err.print(f"imported {result.added} images into {owner}/{slug}")
    typer.echo(f"ul://{owner}/datasets/{slug}")


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply all Alembic migrations."""
    from lanner.migrate import upgrade_database

    upgrade_database(get_settings().resolved_database_url)


@app.command()
def demo(username: str = "demo") -> None:
    """Ensure a demo user exists, give it a fresh password and API key, and print both."""
    from lanner.accounts import service
    from lanner.accounts.security import hash_password
    from lanner.billing.service import dollars_to_micros

    ctx = _context()
    password = secrets.token_urlsafe(9)
    with ctx.db.session() as session:
        user = service.get_user_by_username(session, username=username)
        if user is None:
            user = service.create_user(session, username=username, password=password, tier="pro",
                                       credits_micros=dollars_to_micros(50))
        else:
            user.password_hash = hash_password(password)
        _, key = service.create_api_key(session, user=user, name="demo")
    public = get_settings().public_url
    typer.echo(f"Demo workspace ready at {public}\n  login:    {username}\n  password: {password}\n"
               f"  API key:  {key}\n  export ULTRALYTICS_PLATFORM_URL={public} ULTRALYTICS_API_KEY={key}")


if __name__ == "__main__":
    app()
