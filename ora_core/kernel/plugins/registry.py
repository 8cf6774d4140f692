"""The components plugins register (``register(component, name=None)`` of the ``ora_register_*``
hooks), by kind and name: each checked for its shape and its declared layer before it is accepted,
a name registered twice refused naming both plugins, every refusal on the plugin's record."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ora_core.kernel.layers import LayerError, check_assumptions, validate_layer
from ora_core.kernel.plugins.records import ComponentRecord, PluginRecord, PluginStatus

#: ``fail(record, message, exc, status)``: put a failure on a plugin's record (the host's; strict
#: mode raises there).
RecordFailure = Callable[[PluginRecord, str, BaseException | None, PluginStatus], None]

#: What a component of each kind must have.
REQUIRED: dict[str, tuple[str, ...]] = {
    "detector": ("detect",),
    "backend": ("create",),
    "retriever": ("retrieve", "stream"),
    "verifier": ("verify",),
    "trace_sink": ("open_turn", "handle", "close_turn"),
    "fault_injector": ("inject",),
    "embedder": ("embed", "dimension"),
}

#: Kinds whose component is a directory (``register(path)``).
DIRECTORY_KINDS = ("mode_pack", "probe_pack")


class ComponentRegistry:
    """Components by kind and name (``by_kind``), refused ones kept on their plugin's record only."""

    def __init__(self, kinds: Iterable[str], fail: RecordFailure) -> None:
        self.by_kind: dict[str, dict[str, ComponentRecord]] = {kind: {} for kind in kinds}
        self._fail = fail

    def add(self, record: PluginRecord, kind: str, component: Any, name: str | None) -> ComponentRecord | None:
        """Accept ``component`` under ``name`` (default: its ``name``), or refuse it on ``record``;
        the accepted component's record, None when refused."""
        comp = self._checked(record, kind, component, name)
        if comp is None:
            return None
        existing = self.by_kind[kind].get(comp.name)
        if existing is not None:
            self._refuse(record, comp, f"{kind} {comp.name!r} is registered twice: by plugin "
                                       f"{existing.plugin!r} and by plugin {record.name!r}")
            return None
        self.by_kind[kind][comp.name] = comp
        record.components.append(comp)
        return comp

    def refuse(self, record: PluginRecord, kind: str, name: str, message: str) -> None:
        """Record a component refused before it had a shape to check (an options table with no name)."""
        self._refuse(record, ComponentRecord(kind=kind, name=name, plugin=record.name), message)

    def remove_plugin(self, plugin: str) -> None:
        for kind_registry in self.by_kind.values():
            for comp_name in [n for n, c in kind_registry.items() if c.plugin == plugin]:
                del kind_registry[comp_name]

    def usable(self, kind: str) -> dict[str, Any]:
        """The usable components of one kind, by name."""
        return {name: c.obj for name, c in self.by_kind[kind].items() if c.status == "ok"}

    def _checked(self, record: PluginRecord, kind: str, component: Any, name: str | None) -> ComponentRecord | None:
        if kind in DIRECTORY_KINDS:
            path = Path(component)
            comp = ComponentRecord(kind=kind, name=name or f"{record.name}:{path.name}", plugin=record.name, obj=path)
            if not path.is_dir():
                self._refuse(record, comp, f"{kind.replace('_', ' ')} directory {str(path)!r} does not exist")
                return None
            return comp
        comp_name = name or getattr(component, "name", None)
        if not isinstance(comp_name, str) or not comp_name:
            self._refuse(record, ComponentRecord(kind=kind, name="?", plugin=record.name),
                         f"a {kind} registered by plugin {record.name!r} has no name (object {component!r}); "
                         "give it a 'name' attribute")
            return None
        comp = ComponentRecord(kind=kind, name=comp_name, plugin=record.name, obj=component)
        label = f"{kind} {comp_name!r} (plugin {record.name!r})"
        problem = shape_problem(kind, component)
        if problem:
            self._refuse(record, comp, f"{label} {problem}")
            return None
        declared_layer = getattr(component, "layer", None)
        if kind == "detector" or declared_layer is not None:
            try:
                layer = validate_layer(declared_layer, label)
            except LayerError as exc:
                self._refuse(record, comp, str(exc), exc)
                return None
            comp.layer, comp.assumes = layer, tuple(sorted(getattr(component, "assumes", ()) or ()))
            check = check_assumptions(label, layer, comp.assumes)
            if not check.ok:
                self._refuse(record, comp, f"refused: {check.message()}", status="incompatible")
                return None
        return comp

    def _refuse(self, record: PluginRecord, comp: ComponentRecord, message: str, exc: BaseException | None = None,
                status: PluginStatus = "failed") -> None:
        comp.status = "incompatible" if status == "incompatible" else "refused"
        comp.error = message
        record.components.append(comp)
        self._fail(record, message, exc, status)


def shape_problem(kind: str, component: Any) -> str | None:
    """What ``component`` lacks to be a ``kind`` (``REQUIRED``, a callable ``detect`` and a ``kind`` for
    a detector, a callable ``create`` for a backend factory), None when nothing."""
    missing = [attr for attr in REQUIRED.get(kind, ()) if not hasattr(component, attr)]
    if missing:
        return f"lacks {', '.join(repr(m) for m in missing)}"
    if kind == "detector":
        if not callable(component.detect):
            return "has a 'detect' that is not callable"
        if not isinstance(getattr(component, "kind", None), str):
            return "declares no 'kind' (bypass, mode_signal, unhealthy, broken, ...)"
    if kind == "backend" and not callable(component.create):
        return "has a 'create' that is not callable"
    return None
