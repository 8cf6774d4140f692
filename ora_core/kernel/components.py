"""The shapes of the components plugins register, as typing Protocols: a detector, a backend factory
and the backend it creates, a retriever, a verifier, a trace sink, a fault injector and an embedder;
and the two shapes the kernel hands *them*: ``ComponentContext`` (the ``ctx`` a component is called
with: a turn, one call's view of it, or a standalone context) and ``ComponentRegistry`` (what a
turn asks of the plugin host: the registered components).
(Mode and probe packs are directories and options are pydantic models: they need no Protocol. The
registry hooks and the kind each registers are ``hookspecs.REGISTRY_HOOKS``.)

Plugins do not subclass anything: they register objects that have these attributes and
methods. The kernel checks the shape when the object is registered and refuses, with a message
naming the component, anything that does not fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ora_core.kernel.models import (
    Completion,
    CompletionParams,
    Contingency,
    EvidencePackage,
    FaultPoint,
    Message,
    Retrieval,
    RetrievalFilters,
    Severity,
    Signal,
    TraceEvent,
    TurnInfo,
    Verdict,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ora_core.kernel.config import OraConfig


class ComponentRegistry(Protocol):
    """What a turn asks of the plugin host (``ora_core.kernel.plugins.PluginHost`` is one): the
    usable components of a kind, the detectors of a layer, one component by name, and the options
    models plugins declared."""

    def components(self, kind: str) -> dict[str, Any]: ...

    def detectors(self, layer: str | None = None, kind: str | None = None) -> list[Any]: ...

    def get(self, kind: str, name: str) -> Any: ...

    def options_model(self, table: str) -> Any: ...

    def options_models(self) -> dict[str, Any]: ...


class ComponentContext(Protocol):
    """The ``ctx`` a detector, retriever or verifier is called with: a turn (``TurnContext``), one
    verifier call's view of it (``CallContext``: the same, plus ``verification`` and ``ask_model``)
    or, outside a turn, a ``StandaloneContext``. All of them have these."""

    @property
    def config(self) -> OraConfig: ...

    @property
    def host(self) -> ComponentRegistry | None: ...

    @property
    def data(self) -> dict[str, Any]:
        """The scratch space plugins share; what the engine puts there: ``ora_core.kernel.ctx_data``."""
        ...

    def contingency(self, name: str, step: str, detail: str = "", *, severity: Severity = "warning",
                    **data: Any) -> Contingency: ...

    def embedder(self, name: str | None = None) -> Any: ...

    def options(self, table: str) -> BaseModel: ...


@runtime_checkable
class Detector(Protocol):
    """Finds signals in text of one layer.

    ``layer`` names the layer it reads (see ``ora_core.kernel.layers``); ``assumes`` the properties of
    that layer's text it relies on; ``kind`` what it detects (``bypass``, ``mode_signal``,
    ``unhealthy``, ``broken``, ``supplement_request``, ``specifics`` ...).
    """

    name: str
    kind: str
    layer: str
    assumes: frozenset[str]

    def detect(self, text: str, ctx: ComponentContext) -> list[Signal]: ...


@runtime_checkable
class ModelBackend(Protocol):
    """A configured, ready-to-call model endpoint. Failures raise ``BackendError`` subclasses.

    Optional methods the kernel uses when present: ``stream(messages, params)`` (an async
    iterator of text deltas), ``async check() -> dict`` (a cheap reachability probe for
    ``ora models list --check``; raises ``BackendError`` when unreachable) and ``async aclose()``.
    Optional attribute: ``structured_output: bool`` (absent: false): the backend can constrain a
    reply to ``params.response_schema`` (a JSON schema) and then returns ``Completion.constrained =
    True``; callers choose their reply format by it (``ora models list`` shows it).
    """

    provider: str
    model: str
    family: str

    async def complete(self, messages: Sequence[Message], params: CompletionParams) -> Completion: ...


@runtime_checkable
class BackendFactory(Protocol):
    """Registered under a backend type name (``openai``, ``local-llm`` ...); ``create`` builds a
    backend from one ``[backends.<name>]`` table of the configuration."""

    name: str

    def create(self, settings: Any) -> ModelBackend: ...


@runtime_checkable
class Retriever(Protocol):
    """Returns chunks with provenance; an empty result carries an ``empty_diagnosis``.

    ``stream`` names what it retrieves (``concept``, ``conversation``, ``relationship``,
    ``web``). ``layer`` defaults to ``context_package``.
    """

    name: str
    stream: str

    def retrieve(self, query: str, filters: RetrievalFilters, k: int, ctx: ComponentContext) -> Retrieval: ...


@runtime_checkable
class Verifier(Protocol):
    """Checks a subject against its evidence package; returns PASS, FAIL or BROKEN."""

    name: str

    def verify(self, subject: str, package: EvidencePackage, criteria: str, ctx: ComponentContext) -> Verdict: ...


@runtime_checkable
class TraceSink(Protocol):
    """Receives every trace event of a turn. Exceptions are isolated by the kernel.

    ``open_turn`` and ``handle`` run on the event loop's thread, inside the pipeline: keep them
    cheap. The end of a turn (its ``turn_finished`` event and ``close_turn``) runs on a worker
    thread, so a sink's disk or network work there does not stall the other turns of the loop;
    ``close_turn`` returns when the turn's trace is complete.

    Optional: ``close_waits(turn) -> bool``, False when this turn's ``close_turn`` will return
    without waiting on a disk or a network (it hands the work to a thread of its own). When no
    sink of a turn waits, the turn closes on the event loop's thread. A sink without it is
    assumed to wait."""

    name: str

    def open_turn(self, turn: TurnInfo, ctx: ComponentContext) -> None: ...

    def handle(self, event: TraceEvent) -> None: ...

    def close_turn(self, turn: TurnInfo) -> dict[str, Any] | None: ...


@runtime_checkable
class FaultInjector(Protocol):
    """Drives one failure path for tests and benches (``ora run --inject <name>``).

    ``inject(point, value)`` is called at every injection point of a turn run with this mode;
    it returns ``value`` (pass), a replacement (corrupt) or raises (fail that site).
    """

    name: str
    description: str

    def inject(self, point: FaultPoint, value: Any) -> Any: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors (``ora_register_embedders``). ``dimension`` is the length of each
    vector; ``embed(texts)`` returns one row per text (a numpy array or a list of lists), rows
    L2-normalised when ``normalized`` is true. Components ask the host for the configured embedder
    by name (``ctx.embedder()``) instead of importing each other; the model behind an embedder
    loads once per process however many components use it."""

    name: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> Any: ...
