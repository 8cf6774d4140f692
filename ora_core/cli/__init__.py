"""The ``ora`` command line: the top floor, a client of the engine and the application API."""

from ora_core.cli.app import main

__all__ = ["main"]
