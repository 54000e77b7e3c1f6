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
