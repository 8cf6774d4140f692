"""The Ora distributions installed in this environment, for ``ora --version -v`` and ``ora plugins install``.

An Ora distribution is ``ora-core``, or one that publishes an entry point in the ``ora`` group (a
plugin), or one that requires ``ora-core`` (a plugin without entry points yet, or a meta-distribution
such as ``ora-default``). Read from the installed metadata, never imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata

CORE_DISTRIBUTION = "ora-core"
ENTRY_POINT_GROUP = "ora"
#: The name at the start of a requirement string (``ora-core[http]>=0.3; extra == "x"`` -> ``ora-core``).
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical(name: str) -> str:
    """PEP 503's normalised form: ``Ora_Core`` and ``ora.core`` are ``ora-core``."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class OraDistribution:
    """One installed Ora distribution: its name and version, the ``ora`` entry points it publishes,
    and why it counts as Ora's (``core``, ``plugin`` or ``requires ora-core``)."""

    name: str
    version: str
    entry_points: tuple[str, ...]
    why: str

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "version": self.version, "entry_points": list(self.entry_points), "why": self.why}


def _requires_core(dist: metadata.Distribution) -> bool:
    for requirement in dist.requires or ():
        found = _REQUIREMENT_NAME.match(requirement)
        if found and canonical(found.group(1)) == CORE_DISTRIBUTION:
            return True
    return False


def ora_distributions() -> list[OraDistribution]:
    """Every installed Ora distribution, ora-core first, then by name (one row per name: the first
    on ``sys.path`` wins, as for imports)."""
    found: dict[str, OraDistribution] = {}
    for dist in metadata.distributions():
        name = canonical(dist.metadata["Name"] or "")
        if not name or name in found:
            continue
        eps = tuple(sorted(ep.name for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP))
        if name == CORE_DISTRIBUTION:
            why = "core"
        elif eps:
            why = "plugin"
        elif _requires_core(dist):
            why = f"requires {CORE_DISTRIBUTION}"
        else:
            continue
        found[name] = OraDistribution(name=name, version=dist.version, entry_points=eps, why=why)
    return sorted(found.values(), key=lambda d: (d.name != CORE_DISTRIBUTION, d.name))


def installed_version(name: str) -> str | None:
    """The installed version of distribution ``name``, None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
