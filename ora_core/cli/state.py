"""What every ``ora`` command shares: the root options, the loaded plugins, the configuration,
the exit codes, how a command fails (one line on stderr naming what was wrong), and how it prints.

Plugins are loaded on first use, when a command runs, never when this module is imported.

No secret reaches a terminal: while a command runs, ``sys.stdout`` and ``sys.stderr`` are
``RedactingStream``s (``guard_output``, installed by the root callback), so every write — ours,
typer's, rich's, a plugin command's ``print`` — passes the redactor: on standard output the
configuration's secrets are replaced, on standard error also credential shapes (error text). The
redactor learns the configuration's secrets when a command loads it (``load_resolved``: ours and
plugins' commands alike), so a command that never loads the configuration pays nothing for it.
``echo``/``echo_err`` are the commands' own output helpers (the same redaction, explicitly).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Optional, TextIO

import typer

from ora_core.kernel.errors import OraError
from ora_core.kernel.redaction import Redactor

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NEEDS_CLARIFICATION = 3
EXIT_HALTED = 4
EXIT_INTERRUPTED = 130  # Ctrl-C: the turn was interrupted and its trace closed (128 + SIGINT)


class _State:
    host: Any = None
    config_path: Optional[str] = None
    #: The configuration's secrets once a command has loaded it (else credential shapes only).
    redactor: Redactor = Redactor()


state = _State()


class RedactingStream:
    """A text stream whose writes pass ``clean`` (a ``Redactor`` method) on their way to ``stream``.

    Whole lines are cleaned: a partial line waits for its end (or a ``flush``), so a secret written in
    pieces is still found. Everything else (``encoding``, ``isatty``, ``fileno``...) is the stream's;
    ``buffer`` is wrapped too, so bytes written there are cleaned as well."""

    def __init__(self, stream: TextIO, clean: Callable[[str], str]) -> None:
        self._stream = stream
        self._clean = clean
        self._pending = ""

    def write(self, text: str) -> int:
        if type(text) is not str:
            return self._stream.write(text)  # what the stream does with it (a TypeError, usually)
        data = self._pending + text if self._pending else text
        cut = data.rfind("\n") + 1
        if not cut and len(data) < 65536:
            self._pending = data
            return len(text)
        cut = cut or len(data)
        self._pending = data[cut:]
        self._stream.write(self._clean(data[:cut]))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, ""
            self._stream.write(self._clean(pending))
        self._stream.flush()

    @property
    def buffer(self) -> Any:
        return _RedactingBuffer(self, self._stream.buffer)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _RedactingBuffer:
    """``RedactingStream.buffer``: bytes are decoded (UTF-8, undecodable bytes kept), cleaned, encoded."""

    def __init__(self, text: RedactingStream, raw: Any) -> None:
        self._text = text
        self._raw = raw

    def write(self, data: Any) -> int:
        self._text.flush()
        decoded = bytes(data).decode("utf-8", "surrogateescape")
        self._raw.write(self._text._clean(decoded).encode("utf-8", "surrogateescape"))
        return len(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def guard_output(ctx: Any = None) -> Callable[[], None]:
    """Put ``RedactingStream``s in front of ``sys.stdout`` and ``sys.stderr`` until the command ends
    (``ctx``: its click context, closed when it ends); returns the function that takes them away."""
    out, err = sys.stdout, sys.stderr
    if isinstance(out, RedactingStream) or isinstance(err, RedactingStream):
        return lambda: None
    sys.stdout = RedactingStream(out, lambda text: state.redactor.text(text))
    sys.stderr = RedactingStream(err, lambda text: state.redactor.error_text(text))

    def restore() -> None:
        for name, original in (("stdout", out), ("stderr", err)):
            current = getattr(sys, name)
            if isinstance(current, RedactingStream):
                current.flush()
                setattr(sys, name, original)

    if ctx is not None:
        ctx.call_on_close(restore)
    return restore


def begin_invocation(config_path: Optional[str], ctx: Any = None) -> None:
    """The root callback's work: this invocation's ``--config``, a redactor that knows no secret yet
    (the configuration is not loaded), and the output guard until the command ends."""
    state.config_path = config_path
    state.redactor = Redactor()
    guard_output(ctx)


def redact(text: str) -> str:
    """``text`` with every secret the command knows replaced (standard output's rule)."""
    return state.redactor.text(text)


def redact_error(text: str) -> str:
    """``text`` with every secret and credential shape replaced (standard error's rule)."""
    return state.redactor.error_text(text)


def echo(text: str = "") -> None:
    """A line on standard output, secrets replaced."""
    typer.echo(redact(text))


def echo_err(text: str) -> None:
    """A line on standard error, secrets and credential shapes replaced."""
    typer.echo(redact_error(text), err=True)


def fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    """``raise fail(...)``: ``ora: <message>`` on stderr (redacted), exit ``code``."""
    echo_err(f"ora: {message}")
    return typer.Exit(code)


def get_host() -> Any:
    """The plugins, loaded once per command; the entry-point scan is served from the
    environment's cache (``ora_core.kernel.plugins.EntryPointCache``)."""
    if state.host is None:
        from ora_core.kernel.plugins import EntryPointCache, PluginHost

        host = PluginHost()
        host.load_entrypoints(cache=EntryPointCache.for_environment(host.env))
        state.host = host
    return state.host


def load_resolved() -> Any:
    """The resolved configuration (``--config``, ``$ORA_CONFIG``, ...); raises ``ConfigError``."""
    from ora_core.kernel.config import load_config

    resolved = load_config(state.config_path)
    state.redactor = Redactor.for_config(resolved)  # from now on every output replaces its secrets
    return resolved


def get_config() -> Any:
    try:
        return load_resolved()
    except OraError as exc:
        raise fail(str(exc)) from None


def check_plugin_options(resolved: Any) -> list[Any]:
    """The configuration's ``[plugins.<name>]`` tables and backends' ``options`` against the models the
    loaded plugins declare (``config.check_options``): an error fails the command (exit 1, every
    problem named); the warnings (tables passed on unchecked) are returned for the command to print."""
    from ora_core.kernel.config import check_options

    try:
        return check_options(resolved, get_host())
    except OraError as exc:
        raise fail(str(exc)) from None


def options_report() -> list[Any]:
    """Every options problem of the configuration in force, errors and warnings alike, for the
    listing commands (``ora plugins list``/``check``); a configuration that does not load is named."""
    from ora_core.kernel.config import options_problems

    try:
        resolved = load_resolved()
    except OraError as exc:
        echo_err(f"ora: warning: plugin options not checked: the configuration does not load ({exc})")
        return []
    return options_problems(resolved, get_host())


def print_options_problems(problems: list[Any]) -> None:
    """``ora: warning: [plugins.x] ...`` (or ``error``) on stderr, one line per problem."""
    for problem in problems:
        echo_err(f"ora: {problem.severity}: {problem.line()}")


def command_context(app: Any = None) -> Any:
    """What plugins' commands get through ``ora_register_commands(cli, ora)``; ``app``, the root
    ``typer.Typer``, is where ``ora.group(name)`` adds the groups plugins share."""
    from ora_core.kernel.commands import CommandContext

    return CommandContext(get_host(), load_resolved, app=app)
