"""What a plugin's CLI commands get from the command line (``ora_register_commands(cli, ora)``).

A command runs after the root callback has read ``--config``; ``CommandContext`` resolves the
configuration then, on first use, so a plugin never imports the CLI to find it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ora_core.kernel.errors import OraError


class CommandFailed(Exception):  # noqa: N818 - the CLI turns it into "ora: <message>" and the exit code
    """Raised by ``CommandContext.fail``: the command line prints the message and exits."""

    def __init__(self, message: str, code: int = 1) -> None:
        self.message = message
        self.code = code
        super().__init__(message)


class CommandContext:
    """The configuration and plugins a command runs on.

    ``config()`` returns the ``ResolvedConfig`` in force (``--config``, ``$ORA_CONFIG``, ...);
    a malformed configuration fails the command with the error naming the file and field.
    """

    def __init__(self, host: Any, load_config: Callable[[], Any]) -> None:
        self.host = host
        self._load_config = load_config

    def config(self) -> Any:
        try:
            return self._load_config()
        except OraError as exc:
            raise CommandFailed(str(exc)) from None

    def context(self) -> Any:
        """A ``StandaloneContext`` over the configuration and the plugins (for components that
        take a ``ctx`` outside a turn: retrievers, verifiers, embedders)."""
        from ora_core.kernel.trace import StandaloneContext

        return StandaloneContext(self.config().config, host=self.host, secrets=self.config().secrets())

    def fail(self, message: str, code: int = 1) -> CommandFailed:
        """``raise ora.fail("...")``: print ``ora: <message>`` on stderr and exit with ``code``."""
        return CommandFailed(message, code)
