"""Our own record of each plugin and of each component it registered (or that was refused).

``ora plugins list`` prints these; nothing here is read back out of pluggy's or stevedore's state.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

PluginStatus = Literal["ok", "failed", "incompatible", "disabled"]
ComponentStatus = Literal["ok", "incompatible", "refused"]

#: "failed" outranks "incompatible" outranks "ok" ("disabled" is set directly, never by a failure).
_RANK: dict[PluginStatus, int] = {"ok": 0, "disabled": 0, "incompatible": 1, "failed": 2}


@dataclass
class ComponentRecord:
    """One registered (or refused) component and the plugin that supplied it."""

    kind: str
    name: str
    plugin: str
    obj: Any = field(repr=False, default=None)
    layer: str | None = None
    assumes: tuple[str, ...] = ()
    status: ComponentStatus = "ok"
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "layer": self.layer,
            "assumes": list(self.assumes),
            "status": self.status,
            "error": self.error,
        }


@dataclass
class PluginRecord:
    """A plugin: where it came from (entry point, distribution, version), its status and errors,
    the hooks it implements and the components it supplied."""

    name: str
    distribution: str = ""
    version: str = ""
    entry_point: str = ""
    module: str = ""
    status: PluginStatus = "ok"
    errors: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    components: list[ComponentRecord] = field(default_factory=list)

    def fail(self, status: PluginStatus, message: str) -> None:
        if _RANK[status] >= _RANK[self.status]:
            self.status = status
        self.errors.append(message)

    def as_dict(self) -> dict[str, Any]:
        by_kind: dict[str, list[str]] = {}
        for comp in self.components:
            if comp.status == "ok":
                by_kind.setdefault(comp.kind, []).append(comp.name)
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "entry_point": self.entry_point,
            "module": self.module,
            "status": self.status,
            "error": "; ".join(self.errors) or None,
            "hooks": sorted(self.hooks),
            "components": by_kind,
            "layers": [c.as_dict() for c in self.components if c.layer is not None or c.error],
        }


def describe_exception(exc: BaseException) -> str:
    """``"ValueError: message at module.py:12"``: the exception and the last frame it passed."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"
