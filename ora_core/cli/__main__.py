"""``python -m ora_core.cli``: the ``ora`` command."""

from ora_core.cli.app import main

main()
