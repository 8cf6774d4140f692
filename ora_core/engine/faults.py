"""Fault injection points: where a registered fault injector may corrupt or fail a turn.

``ora run --inject MODE`` selects the fault injector registered under ``MODE``
(``ora_register_fault_injectors``). The pipeline calls ``inject(turn, point, value)`` at each
injection point; with no injector active that is one dictionary look-up. An injection that
changes a value or raises is traced as a ``fault_injected`` event, so a trace always says which
of its failures were staged.
"""

from __future__ import annotations

from typing import Any, TypeVar, overload

from ora_core.kernel.components import ComponentRegistry, FaultInjector
from ora_core.kernel.errors import ConfigError
from ora_core.kernel.models import FaultPoint
from ora_core.kernel.stash import StashKey
from ora_core.kernel.trace import TurnContext

T = TypeVar("T")

#: The fault injector of this turn (``ora run --inject``), when one is active.
INJECTOR: StashKey[FaultInjector] = StashKey("fault_injector")


def resolve_injector(host: ComponentRegistry | None, mode: str) -> FaultInjector:
    """The injector registered as ``mode``; a clear error listing the known modes otherwise."""
    known = host.components("fault_injector") if host is not None else {}
    if mode in known:
        return known[mode]
    if not known:
        raise ConfigError(f"unknown fault-injection mode {mode!r}: no fault injector is installed "
                          "(install the ora-inject plugin)", field="--inject")
    raise ConfigError(f"unknown fault-injection mode {mode!r}; known modes: {', '.join(sorted(known))}",
                      field="--inject")


def activate(turn: TurnContext, injector: FaultInjector) -> None:
    turn.stash[INJECTOR] = injector


def active(turn: TurnContext) -> FaultInjector | None:
    return turn.stash.get(INJECTOR)


@overload
def inject(turn: TurnContext, point: FaultPoint) -> None: ...


@overload
def inject(turn: TurnContext, point: FaultPoint, value: T) -> T: ...


def inject(turn: TurnContext, point: FaultPoint, value: Any = None) -> Any:
    """``value``, or what the active injector replaces it with (the injector may corrupt it: the
    type says what the site expects, not what a corrupting injector hands back); its exceptions
    propagate."""
    injector = active(turn)
    if injector is None:
        return value
    point.turn_id = turn.turn_id
    try:
        result = injector.inject(point, value)
    except BaseException as exc:
        _record(turn, injector, point, effect="raised", error=f"{type(exc).__name__}: {exc}")
        raise
    if result is not value and result != value:
        _record(turn, injector, point, effect="replaced", before=_preview(value), after=_preview(result),
                **_change(value, result))
    return result


def _change(before: Any, after: Any) -> dict[str, Any]:
    """For text, what the injector changed (the previews cut long texts, the change would be lost)."""
    if not isinstance(before, str) or not isinstance(after, str):
        return {}
    head = 0
    while head < min(len(before), len(after)) and before[head] == after[head]:
        head += 1
    tail = 0
    while (tail < min(len(before), len(after)) - head
           and before[len(before) - 1 - tail] == after[len(after) - 1 - tail]):
        tail += 1
    return {"changed_at": head, "removed": _preview(before[head:len(before) - tail]),
            "added": _preview(after[head:len(after) - tail])}


def _preview(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else type(value).__name__
    return text if len(text) <= 300 else text[:300] + "…"


def _record(turn: TurnContext, injector: FaultInjector, point: FaultPoint, **data: Any) -> None:
    turn.emit("fault_injected", step=point.step, mode=getattr(injector, "name", "?"),
              point=point.model_dump(mode="json"), **data)
