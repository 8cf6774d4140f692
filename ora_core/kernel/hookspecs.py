"""Every extension point of Ora, in one module.

Arguments are a public contract: they may be added to, never renamed or removed. Registry
hooks take a ``register`` callback rather than returning values, so the kernel knows which
plugin supplied each component and can refuse a name registered twice, naming both plugins.

A plugin is a module (or any object) with functions named like these hooks and decorated with
``ora_core.hookimpl``, published under the ``ora`` entry-point group. A hook implementation may
accept any subset of the arguments listed here; an argument not listed is an error at load.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from ora_core.kernel.models import TurnResult
    from ora_core.kernel.trace import TurnContext

PROJECT = "ora"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: The registry hooks and the component kind each one registers.
REGISTRY_HOOKS: dict[str, str] = {
    "ora_register_detectors": "detector",
    "ora_register_backends": "backend",
    "ora_register_retrievers": "retriever",
    "ora_register_verifiers": "verifier",
    "ora_register_trace_sinks": "trace_sink",
    "ora_register_modes": "mode_pack",
    "ora_register_fault_injectors": "fault_injector",
    "ora_register_embedders": "embedder",
    "ora_register_probes": "probe_pack",
    "ora_register_options": "options",
}


@hookspec
def ora_register_detectors(register: Callable[..., None]) -> None:
    """Register detectors: ``register(detector)``.

    Called once when plugins load. A detector has ``name``, ``kind``, ``layer`` (one of
    ``ora_core.kernel.layers.LAYER_ORDER``), ``assumes`` (the properties of that layer's text it
    relies on) and ``detect(text, ctx) -> list[Signal]``. A detector with no layer, or whose
    assumptions its layer does not provide, is refused and listed as ``incompatible``.
    """


@hookspec
def ora_register_backends(register: Callable[..., None]) -> None:
    """Register model backend factories: ``register(factory)``.

    ``factory.name`` is the backend *type* used in ``[backends.<name>] type = "..."``;
    ``factory.create(settings)`` returns an object with ``provider``, ``model``, ``family``
    and ``async complete(messages, params) -> Completion``. A backend that fails raises a
    ``ora_core.kernel.errors.BackendError`` subclass; it never returns error text as output.
    """


@hookspec
def ora_register_retrievers(register: Callable[..., None]) -> None:
    """Register retrievers: ``register(retriever)``.

    A retriever has ``name``, ``stream`` and ``retrieve(query, filters, k, ctx) -> Retrieval``.
    Every chunk carries provenance; an empty result without an exception carries an
    ``empty_diagnosis``. Optional ``layer``/``assumes`` are checked like a detector's.
    """


@hookspec
def ora_register_verifiers(register: Callable[..., None]) -> None:
    """Register verifiers: ``register(verifier)``.

    A verifier has ``name`` and ``verify(subject, package, criteria, ctx) -> Verdict`` whose
    status is ``PASS``, ``FAIL`` or ``BROKEN``. An exception inside ``verify`` is recorded by
    the kernel as BROKEN, never as PASS. Optional ``layer``/``assumes`` are checked.
    """


@hookspec
def ora_register_trace_sinks(register: Callable[..., None]) -> None:
    """Register trace sinks: ``register(sink)``.

    A sink has ``name``, ``open_turn(turn, ctx)``, ``handle(event)`` and
    ``close_turn(turn) -> dict | None`` (the dict may carry ``trace_path``). A sink that raises
    is isolated: reported once on stderr, and the run goes on.
    """


@hookspec
def ora_register_modes(register: Callable[..., None]) -> None:
    """Register mode packs: ``register(directory, name=...)``, a directory of mode Markdown files
    (``name`` defaults to ``<plugin>:<directory name>``).

    Later packs may add modes; a mode name defined by two packs is an error naming both.
    """


@hookspec
def ora_register_fault_injectors(register: Callable[..., None]) -> None:
    """Register fault injectors (tests and benches): ``register(injector)``.

    ``injector.name`` is the mode ``ora run --inject <name>`` selects; ``description`` says
    which path it drives. During a turn run with that mode the kernel calls
    ``injector.inject(point, value) -> value`` at every injection point (``point`` is an
    ``ora_core.kernel.models.FaultPoint``: site, step, role, purpose, attempt, stream, gear): return
    ``value`` unchanged to pass, a replacement to corrupt it, or raise to make that site fail.
    Every injection that changes or raises is traced as a ``fault_injected`` event.
    """


@hookspec
def ora_register_embedders(register: Callable[..., None]) -> None:
    """Register embedders: ``register(embedder)``.

    An embedder has ``name``, ``dimension`` and ``embed(texts) -> array`` (one row per text; see
    ``ora_core.api.Embedder``). Components that need embeddings ask the host for the configured
    one by name (``ctx.embedder()``, ``[embedding] embedder``), never import another plugin's
    model: a name no plugin registers is an error listing the registered names.
    """


@hookspec
def ora_register_probes(register: Callable[..., None]) -> None:
    """Register probe packs: ``register(directory, name=...)``, a directory of probe files.

    A probe file (``*.toml``, ``*.yaml`` or ``*.yml``, one probe each) holds a prompt, optional
    configuration overrides and the trace facts ``ora probe run`` checks against the turn's files
    on disk (``docs/probes.md``). A ``bench/`` subdirectory may hold the Markdown documents
    ``ora bench`` runs its matrix over. A directory that does not exist is refused, naming it; a
    probe id defined by two packs is reported as BROKEN, naming both files.
    """


@hookspec
def ora_register_options(register: Callable[..., None]) -> None:
    """Declare the options of a configuration table: ``register(Model)`` for the registering
    plugin's own ``[plugins.<entry-point name>]`` table, ``register(Model, table="name")`` for
    ``[plugins.name]`` (a plugin registered in process is named after its module: name the table).

    ``Model`` is a pydantic model that forbids extra keys (subclass ``ora_core.api.PluginOptions``);
    anything else is refused, and so is a table declared by two plugins (naming both). Called once
    when plugins load. The kernel validates every declared table of the configuration before a turn
    runs (``ora run``, ``Ora.open()``/``Ora(...)``, ``ora config show``): an unknown key or a wrong
    type is a ``ConfigError`` naming the configuration source, the table and the key, with a
    did-you-mean. Components read the validated instance with ``ctx.options("name")`` (or
    ``Model.of(ctx, "name")``). A table whose plugin declares no model is passed on unchecked and
    named as a warning by ``ora config show`` and ``ora plugins list``.

    Backends declare theirs on the factory (``ora_register_backends``): ``factory.options_model``,
    a model of ``[backends.<name>] options``, or for a ``LazyBackendFactory`` its ``"module:Class"``
    target (``LazyBackendFactory(name, target, options=...)``), imported only to validate.
    """


@hookspec
def ora_register_commands(cli: Any, ora: Any) -> None:
    """Add commands to the ``ora`` command line. ``cli`` is the root ``typer.Typer`` app;
    ``ora`` (``ora_core.api.CommandContext``) gives the commands what they need when they run:
    ``ora.config()`` (the resolved configuration, honouring ``--config``), ``ora.host`` (the
    loaded plugins), ``ora.context()`` (a ``StandaloneContext``) and ``ora.fail(message)``.

    Called when the CLI starts, after the other plugins have loaded. Import heavy dependencies
    inside the command functions, never at module import, so ``ora --help`` stays fast.
    """


@hookspec
def ora_turn_started(turn: TurnContext) -> None:
    """Called when a turn begins, with the ``ora_core.kernel.trace.TurnContext``. Observers only."""


@hookspec
def ora_turn_finished(turn: TurnContext, result: TurnResult) -> None:
    """Called after a turn, with its ``TurnContext`` and ``TurnResult``.

    Post-turn work (for example indexing the exchange into conversation memory) belongs here;
    an exception is recorded as a contingency of the turn and never breaks it.
    """
