"""``python -m lanner.cli``: the same command as the ``lanner`` script."""

from lanner.cli.commands import main

main()
