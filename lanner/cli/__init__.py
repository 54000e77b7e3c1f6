"""The ``lanner`` command (``lanner.cli:main``; ``python -m lanner.cli``): ``commands.py`` builds the Typer app from a
module per group of commands (``models``, ``teams``, ``estimate``), ``common.py`` is what they share (the
command's session, acting as a user, one-line errors), and ``demo.py`` sets up ``lanner demo``'s workspace."""

from lanner.cli.commands import app, main

__all__ = ["app", "main"]
