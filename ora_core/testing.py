"""Fixtures for plugin authors (a pytest plugin, registered as ``pytest11`` entry point ``ora``).

Tests never autoload installed plugins: ``ora_host`` is a plugin host with nothing loaded, and
``register_plugin`` adds an in-process plugin object for one test and removes it afterwards.

    def test_my_detector_fires(ora_host, register_plugin):
        register_plugin(my_plugin_module)
        detector = ora_host.get("detector", "my-detector")
        ...

``make_config`` builds a validated configuration from a dict (over the bundled default), and
``make_runtime`` a runtime over a host and a config, for driving a whole turn in a test.
``write_distribution`` lays out a real (tiny) installed distribution on disk, with a
``.dist-info`` and an ``ora`` entry point, so entry-point loading can be tested for real by
putting its directory on ``sys.path`` (or ``PYTHONPATH`` for a subprocess).

Plugin tests import from ``ora_core.api`` and from here, never from the engine: the engine's
entry points a test needs are re-exported (loaded on first use): ``run_turn`` /
``run_turn_async`` (a whole turn over ``make_runtime``), ``TurnContext`` (a turn to hand
components), ``BackendPool`` / ``call_role`` / ``build_messages`` (one model call the way a step
makes it), ``run_detectors``, ``check_assumptions``, ``load_modes`` / ``parse_mode_text``,
``bypass_decision`` (Stage 0's rule), ``control_texts`` / ``RETRY_PHRASES`` (what the engine adds
to a step's prompt, for echo detectors) and ``build_app`` (the ``ora`` command line).
"""

from __future__ import annotations

import importlib
import textwrap
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from ora_core import hookimpl
from ora_core.kernel.config import (
    DEFAULT_CONFIG_PATH,
    OraConfig,
    ResolvedConfig,
    check_roles,
    config_hash,
    deep_merge,
    merge_layer,
)
from ora_core.kernel.plugins import PluginHost, PluginRecord


def write_distribution(root: Path | str, name: str, *, version: str = "0.1.0",
                       modules: Mapping[str, str], entry_points: Mapping[str, str],
                       group: str = "ora") -> Path:
    """Write an installed distribution ``name`` under ``root``; return ``root``.

    ``modules`` maps a module file path (``"my_plugin.py"`` or ``"pkg/__init__.py"``) to its
    source; ``entry_points`` maps an entry-point name to ``module`` or ``module:attr``.
    """
    root = Path(root)
    for rel, source in modules.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(source))
    normalized = name.replace("-", "_")
    info = root / f"{normalized}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = [f"[{group}]"] + [f"{ep} = {target}" for ep, target in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    (info / "RECORD").write_text("")
    return root


def make_host(*plugins: object, strict: bool = True, env: Mapping[str, str] | None = None) -> PluginHost:
    """A host without autoload; ``plugins`` are registered in process (strict by default)."""
    host = PluginHost(strict=strict, env=dict(env or {}))
    for plugin in plugins:
        host.register_plugin(plugin)
    return host


def make_config(overrides: Mapping[str, Any] | None = None, *, base_default: bool = True) -> ResolvedConfig:
    data: dict[str, Any] = tomllib.loads(DEFAULT_CONFIG_PATH.read_text()) if base_default else {}
    data = merge_layer(data, overrides or {})  # as load_config: a retyped backend drops the default's options
    config = OraConfig.model_validate(data)
    check_roles(config, "test config")
    return ResolvedConfig(config=config, sources=["test"], hash=config_hash(config))


def scripted_config(trace_root: Path | str | None = None, *, rules: list[dict[str, str]] | None = None,
                    default: str | None = None, **more: Any) -> ResolvedConfig:
    """Every role on one scripted backend; tracing into ``trace_root`` if given."""
    options: dict[str, Any] = {"rules": rules or []}
    if default is not None:
        options["default"] = default
    overrides: dict[str, Any] = {
        "backends": {"local": {"type": "scripted", "model": "scripted-1", "family": "scripted",
                               "options": options}},
    }
    if trace_root is not None:
        overrides["trace"] = {"root": str(trace_root)}
    return make_config(deep_merge(overrides, more))


def cli_context(host: PluginHost, app: Any = None) -> Any:
    """The ``CommandContext`` ``ora`` gives plugins' commands, over ``host``; the configuration is
    the one the command line resolves (``-c``/``--config`` of the invocation); ``app`` (the root
    typer app of ``build_app()``) lets commands share groups (``ora.group("trace")``)."""
    from ora_core.cli.state import load_resolved
    from ora_core.kernel.commands import CommandContext

    return CommandContext(host, load_resolved, app=app)


class RecordingSink:
    """A trace sink that keeps every event of a turn in ``events`` (in order), for assertions
    on what a component emitted: ``TurnContext(..., sinks=[RecordingSink()])``."""

    name = "recording"

    def __init__(self) -> None:
        self.events: list[Any] = []

    def open_turn(self, info: Any, ctx: Any) -> None: ...

    def handle(self, event: Any) -> None:
        self.events.append(event)

    def close_turn(self, info: Any) -> None: ...


class ComponentsPlugin:
    """An in-process plugin registering the given retrievers and verifiers, as a third party's
    plugin would: ``make_host(..., ComponentsPlugin(retrievers=[r], verifiers=[v]))``."""

    def __init__(self, *, retrievers: Iterable[Any] = (), verifiers: Iterable[Any] = ()) -> None:
        self.retrievers, self.verifiers = list(retrievers), list(verifiers)

    @hookimpl
    def ora_register_retrievers(self, register: Any) -> None:
        for retriever in self.retrievers:
            register(retriever)

    @hookimpl
    def ora_register_verifiers(self, register: Any) -> None:
        for verifier in self.verifiers:
            register(verifier)


def make_runtime(host: PluginHost, resolved: ResolvedConfig, stderr: Any = None) -> Any:
    import sys

    from ora_core.engine.runner import Runtime

    return Runtime(host=host, resolved=resolved, stderr=stderr or sys.stderr)


@pytest.fixture
def ora_host() -> PluginHost:
    """A plugin host with no plugins loaded (no entry-point autoload)."""
    return make_host()


@pytest.fixture
def register_plugin(ora_host: PluginHost) -> Iterator[Any]:
    """``register_plugin(obj, name=None) -> PluginRecord``; unregistered after the test."""
    names: list[str] = []

    def _register(plugin: object, name: str | None = None, **kw: Any) -> PluginRecord:
        record = ora_host.register_plugin(plugin, name=name, **kw)
        names.append(record.name)
        return record

    yield _register
    for name in reversed(names):
        ora_host.unregister_plugin(name)


#: Engine and CLI entry points a plugin's tests may use (name -> "module:attribute").
_REEXPORTS: dict[str, str] = {
    "run_turn": "ora_core.engine.runner:run_turn",
    "run_turn_async": "ora_core.engine.runner:run_turn_async",
    "Runtime": "ora_core.engine.runner:Runtime",
    "TurnContext": "ora_core.kernel.trace:TurnContext",
    "BackendPool": "ora_core.engine.backends:BackendPool",
    "call_role": "ora_core.engine.backends:call_role",
    "build_messages": "ora_core.engine.prompts:build_messages",
    "run_detectors": "ora_core.kernel.detection:run_detectors",
    "check_assumptions": "ora_core.kernel.layers:check_assumptions",
    "load_modes": "ora_core.kernel.modes:load_modes",
    "parse_mode_text": "ora_core.kernel.modes:parse_mode_text",
    "bypass_decision": "ora_core.engine.stage0:decide",
    "unsupported_specifics": "ora_core.engine.supplement:unsupported_specifics",
    "build_app": "ora_core.cli.app:build_app",
    "control_texts": "ora_core.engine.reliability:control_texts",
    "RETRY_PHRASES": "ora_core.engine.reliability:RETRY_PHRASES",
}


def __getattr__(name: str) -> Any:
    target = _REEXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'ora_core.testing' has no attribute {name!r}")
    module, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value
