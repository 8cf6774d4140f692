"""What a plugin's CLI commands get from the command line (``ora_register_commands(cli, ora)``).

A command runs after the root callback has read ``--config``; ``CommandContext`` resolves the
configuration then, on first use, so a plugin never imports the CLI to find it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ora_core.kernel.errors import OraError

if TYPE_CHECKING:
    import typer

    from ora_core.kernel.plugins import PluginHost


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
    ``group(name)`` is the sub-command group ``ora <name>`` that several plugins share; it needs
    ``app``, the root ``typer.Typer`` (the command line passes it).
    """

    def __init__(self, host: PluginHost, load_config: Callable[[], Any], *, app: typer.Typer | None = None) -> None:
        self.host = host
        self._load_config = load_config
        self._app = app
        self._groups: dict[str, typer.Typer] = {}

    def group(self, name: str, help: str = "") -> typer.Typer:  # noqa: A002 - typer's own word for it
        """The ``typer.Typer`` of ``ora <name>``, shared: created and added to the root app on the first
        request (``help`` is its help then), the same object for every later one, so two plugins'
        commands land in one group whichever registers first. A group already on the root app under
        that name is the one returned. ``PluginError`` when this context has no root app."""
        found = self._groups.get(name)
        if found is not None:
            return found
        if self._app is None:
            from ora_core.kernel.errors import PluginError

            raise PluginError(f"ora.group({name!r}): this CommandContext has no root app to add the group to "
                              "(build it as CommandContext(host, load_config, app=cli))")
        for info in getattr(self._app, "registered_groups", []):
            if info.name == name and info.typer_instance is not None:
                self._groups[name] = info.typer_instance
                return info.typer_instance
        import typer

        found = self._groups[name] = typer.Typer(help=help or None, no_args_is_help=True)
        self._app.add_typer(found, name=name)
        return found

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
