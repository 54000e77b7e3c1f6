"""Documentation stays true: every setting and every CLI command is in the README."""

from __future__ import annotations

from pathlib import Path

from lanner.cli import app as cli_app
from lanner.config import Settings

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_every_setting_is_documented():
    for name in Settings.model_fields:
        assert f"LANNER_{name.upper()}" in README, f"LANNER_{name.upper()} missing from README.md"


def test_every_cli_command_is_documented():
    import typer.main

    group = typer.main.get_command(cli_app)
    for name, command in group.commands.items():
        subcommands = getattr(command, "commands", None)
        for full in ([f"lanner {name} {sub}" for sub in subcommands] if subcommands else [f"lanner {name}"]):
            assert full in README, f"`{full}` missing from README.md"


def test_lanner_extensions_are_in_the_openapi_document(tmp_path: Path) -> None:
    """Clients generate code from /openapi.json: an endpoint missing there is missing for them."""
    from lanner.app import create_app

    app = create_app(Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'lanner.db'}",
                              secret_key="test-secret"), migrate=False)
    paths = app.openapi()["paths"]
    estimate = paths["/api/training/estimate"]["post"]
    assert "Lanner" in estimate["summary"] and "recommendation" in estimate["description"]
    schema = estimate["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    fields = app.openapi()["components"]["schemas"][schema]["properties"]
    assert {"model", "dataset", "imageCount", "imageSize", "trainArgs", "gpuTypes"} <= set(fields)
    assert "Lanner" in paths["/api/gpus"]["get"]["summary"]
