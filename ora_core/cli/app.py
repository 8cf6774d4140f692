"""The ``ora`` command line.

Plugins are loaded inside ``main()``, when the command runs, never when this module is
imported; a plugin that fails to load is recorded and shown by ``ora plugins list`` while
``ora --help`` keeps working. Heavy libraries are imported inside the commands that use them.

While a command runs, standard output and standard error are guarded (``state.guard_output``):
every write passes the redactor, so neither our commands nor a plugin's can print a secret of
the configuration (nor, on standard error, a credential shape).

Exit codes of ``ora run``: 0 ok or degraded, 1 configuration or plugin error,
2 usage error, 3 needs_clarification (the question is printed), 4 halted (the diagnostic
is printed).
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from ora_core.cli import bench, calibrate, probe  # light modules: the work is imported inside the commands
from ora_core.cli import config as config_commands
from ora_core.cli import models as models_commands
from ora_core.cli import modes as modes_commands
from ora_core.cli import plugins as plugins_commands
from ora_core.cli import run as run_command
from ora_core.cli.state import EXIT_ERROR, EXIT_USAGE, begin_invocation, command_context, echo_err, get_host
from ora_core.kernel.errors import OraError


def root(
    ctx: typer.Context,
    config: Optional[str] = typer.Option(
        None, "--config", "-c", help="Configuration file (else $ORA_CONFIG, ./ora.toml, user config dir)."
    ),
    version: bool = typer.Option(
        False, "--version", help="Print ora-core's version and exit (with -v: every installed Ora distribution's)."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="With --version: every Ora distribution installed."),
) -> None:
    """The root callback: this invocation's ``--config``, and the output guard (``state.begin_invocation``);
    ``--version`` answers here, before any command."""
    begin_invocation(config, ctx)
    if version:
        from ora_core.cli.version import print_version

        print_version(verbose)
        raise typer.Exit(0)
    if verbose:
        echo_err("ora: -v/--verbose goes with --version (ora --version -v)")
        raise typer.Exit(EXIT_USAGE)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(EXIT_USAGE)


def build_app() -> typer.Typer:
    """The ``ora`` app: a new root each call (plugins add their commands to it), with the command groups
    each module of ``ora_core/cli`` defines at module level."""
    app = typer.Typer(
        name="ora",
        help="Multi-step LLM pipelines whose failures are never silent.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    app.callback(invoke_without_command=True)(root)
    app.add_typer(run_command.commands)  # `ora run`: merged into the root, no group of its own
    app.add_typer(plugins_commands.group, name="plugins")
    app.add_typer(config_commands.group, name="config")
    app.add_typer(modes_commands.group, name="modes")
    app.add_typer(models_commands.group, name="models")
    app.add_typer(bench.group, name="bench")
    app.add_typer(probe.group, name="probe")
    app.add_typer(calibrate.group, name="calibrate")
    return app


#: pydantic scans every installed distribution's entry points for its own plugins the first time
#: a model's schema is built (~20 ms of `ora plugins list`'s 0.4 s budget). The ``ora`` command
#: does not use pydantic plugins (Ora's trace records every validation it cares about), so it
#: turns the scan off unless the variable is set; ``PYDANTIC_DISABLE_PLUGINS=`` (empty) keeps them.
PYDANTIC_PLUGINS_VARIABLE = "PYDANTIC_DISABLE_PLUGINS"


def main(argv: list[str] | None = None) -> None:
    """Entry point: load plugins (isolated), let them add commands, then run the app."""
    import os

    from ora_core.kernel.commands import CommandFailed

    os.environ.setdefault(PYDANTIC_PLUGINS_VARIABLE, "__all__")
    app = build_app()
    try:
        host = get_host()
        host.register_commands(app, command_context(app))
    except OraError as exc:  # strict mode: a plugin failure is fatal
        echo_err(f"ora: {exc}")
        sys.exit(EXIT_ERROR)
    try:
        app(args=argv, prog_name="ora")
    except CommandFailed as exc:  # a plugin's command failed through CommandContext.fail
        echo_err(f"ora: {exc.message}")
        sys.exit(exc.code)


if __name__ == "__main__":
    main()
