"""Warm-up: load slow parts in the background while Phase A runs.

A cold default turn imports chromadb and loads the embedding model at its first retrieval
(~1.4 s of CPU with ``ora-minilm``), and Phase A (a model call) comes before that. ``start_warmup`` calls
each enabled stream's retriever's optional ``warm_up(config)``, the configured embedder's optional
``warm_up()`` (``[embedding] embedder``: the retrievers, the router and the grounding verifier all
ask the host for it) and each planned backend's optional ``warm_up()`` in daemon threads at turn
start, so the loading overlaps Phase A.

Warm-up is an optimisation, never a dependency: the real call loads whatever is still missing.
A warm-up that fails is still recorded by name (a ``note`` trace event and a
``warmup-<component>-failed`` contingency, severity info): the real call will meet the same
problem and report it in its own step.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ora_core.engine.context import resolve_retrievers
from ora_core.engine.runtime import Runtime
from ora_core.kernel.stash import StashKey
from ora_core.kernel.trace import TurnContext

STEP = "warmup"
#: How long the end of a turn waits for warm-up threads still loading (a turn that stopped early,
#: e.g. ``needs_clarification``): a thread killed mid-import at interpreter exit can crash it.
WARMUP_JOIN_S = 120.0


@dataclass
class Warmup:
    """The warm-up threads of one turn and what each one did."""

    jobs: dict[str, threading.Thread] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    _recorded: bool = False

    def wait(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` in total for the threads still loading (blocking)."""
        deadline = time.monotonic() + timeout_s
        for thread in self.jobs.values():
            thread.join(max(0.0, deadline - time.monotonic()))

    def record(self, turn: TurnContext) -> None:
        """One ``note`` event (``warmup=<component>``) per component: ok, failed or still running."""
        if self._recorded:
            return
        self._recorded = True
        for name in [*self.jobs, *(n for n in self.results if n not in self.jobs)]:
            outcome = self.results.get(name, {"status": "running"})
            turn.emit("note", step=STEP, warmup=name, **outcome)
            if outcome.get("status") == "failed":
                turn.contingency(f"warmup-{name}-failed", STEP,
                                 f"warming up {name} failed ({outcome.get('error')}); its first real call "
                                 "loads it and reports any error there", severity="info", component=name)


#: The turn's warm-up (``start_warmup``), when ``[pipeline] warmup`` is on: the runner waits for it and
#: records it at the end of the turn.
WARMUP: StashKey[Warmup] = StashKey("warmup")


def _run(warmup: Warmup, name: str, target: Any, *args: Any) -> None:
    start = time.perf_counter()
    try:
        target(*args)
    except Exception as exc:  # noqa: BLE001 - recorded by name in Warmup.join, never dropped
        warmup.results[name] = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"[:500],
                                "seconds": round(time.perf_counter() - start, 3)}
    else:
        warmup.results[name] = {"status": "ok", "seconds": round(time.perf_counter() - start, 3)}


def start_warmup(runtime: Runtime, turn: TurnContext, roles: tuple[str, ...] = ()) -> Warmup:
    """Start warming the enabled retrievers (and the backends of ``roles``) in daemon threads."""
    warmup = Warmup()
    config = runtime.config
    targets: dict[str, tuple[Any, tuple[Any, ...]]] = {}
    retrievers, _missing = resolve_retrievers(turn.host, config)
    for stream, retriever in retrievers.items():
        hook = getattr(retriever, "warm_up", None)
        if callable(hook):
            name = f"retriever-{getattr(retriever, 'name', stream)}"
            targets.setdefault(name, (hook, (config,)))
    embedder_name = getattr(getattr(config, "embedding", None), "embedder", None)
    if embedder_name and turn.host is not None:
        embedder = turn.host.components("embedder").get(embedder_name)
        hook = getattr(embedder, "warm_up", None)
        if callable(hook):
            targets[f"embedder-{embedder_name}"] = (hook, ())
    for role in roles:
        backend_name = getattr(config.roles, role, None)
        if backend_name is None or f"backend-{backend_name}" in targets:
            continue
        try:
            backend = runtime.pool.get(backend_name)
        except Exception as exc:  # noqa: BLE001 - the real call raises it in its own step
            warmup.results[f"backend-{backend_name}"] = {"status": "failed",
                                                         "error": f"{type(exc).__name__}: {exc}"[:500]}
            continue
        hook = getattr(backend, "warm_up", None)
        if callable(hook):
            targets[f"backend-{backend_name}"] = (hook, ())
    for name, (hook, args) in targets.items():
        thread = threading.Thread(target=_run, args=(warmup, name, hook, *args), name=f"ora-warmup-{name}",
                                  daemon=True)
        warmup.jobs[name] = thread
        thread.start()
    return warmup
