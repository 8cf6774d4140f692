"""Loading the entry points of a group: Ora chooses which to import, stevedore imports them.

Before anything is imported, each entry point found (``discovery.py``) gets its record, in
entry-point name order: a name a second distribution publishes is refused naming both
distributions (the first keeps it; both records stay listed), and one the allow-list
(``ORA_PLUGINS``) leaves out or the block-list (``ORA_DISABLE_PLUGINS``) names is ``disabled`` and
never imported. The rest are imported by stevedore's ``ExtensionManager`` (``invoke_on_load=False``:
a plugin is a module of hook implementations, nothing to call), one at a time: one that raises is
handed to its ``on_load_failure_callback``, which records it on the plugin's record (``import
failed: ...``) while the others still load. stevedore re-raises an ``AssertionError`` from its
load loop; here it is a broken plugin like any other, recorded the same way. stevedore's
``verify_requirements`` is not passed: in stevedore 5.10 (the version required) it is a deprecated no-op (a missing
requirement shows as the plugin's import failure). Registering the imported modules with pluggy
is the host's (``host.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from stevedore import ExtensionManager
from stevedore.extension import Extension

from ora_core.kernel.plugins.discovery import FoundEntryPoint
from ora_core.kernel.plugins.records import PluginRecord

ImportFailure = Callable[[PluginRecord, BaseException], None]


@dataclass
class LoadedGroup:
    """What one ``load_group`` call did: every record it made (entry-point name order) and the
    plugin modules it imported, each with its record."""

    records: list[PluginRecord]
    plugins: list[tuple[PluginRecord, object]]


def env_list(value: str | None) -> set[str] | None:
    """``"a, b;c"`` -> ``{"a", "b", "c"}``; None when the variable is not set."""
    if value is None:
        return None
    return {item.strip() for item in value.replace(";", ",").split(",") if item.strip()}


def load_group(group: str, found: Iterable[FoundEntryPoint], records: MutableMapping[str, PluginRecord], *,
               allow: set[str] | None, block: set[str], on_import_failure: ImportFailure) -> LoadedGroup:
    """Record every entry point of ``found`` in ``records`` (by name; a refused duplicate under a key
    of its own) and import the ones allowed through stevedore; ``on_import_failure(record, exc)``
    records an import that raised (and may raise itself: strict mode)."""
    made: list[PluginRecord] = []
    chosen: list[tuple[PluginRecord, metadata.EntryPoint]] = []
    for item in sorted(found, key=lambda f: f.entry_point.name):
        ep = item.entry_point
        record = PluginRecord(name=ep.name, distribution=item.distribution, version=item.version,
                              entry_point=f"{ep.name} = {ep.value}", module=ep.module)
        made.append(record)
        if ep.name in records:
            first = records[ep.name]
            record.fail("failed", f"entry point name {ep.name!r} is published by distribution "
                                  f"{first.distribution!r} and by distribution {record.distribution!r}; "
                                  f"{record.distribution!r} is refused ({first.distribution!r}, loaded first, "
                                  "keeps the name)")
            records[clash_key(ep.name, record.distribution, records)] = record
            continue
        records[ep.name] = record
        names = {ep.name, record.distribution}
        if (allow is not None and not names & allow) or names & block:
            record.status = "disabled"
            why = "ORA_DISABLE_PLUGINS" if names & block else "ORA_PLUGINS allow-list"
            record.errors.append(f"disabled by {why}")
            continue
        chosen.append((record, ep))
    by_entry_point = {id(ep): record for record, ep in chosen}

    def failed(manager: Any, ep: metadata.EntryPoint, exc: BaseException) -> None:
        cause = exc.__cause__ if isinstance(exc, _AssertionAtImport) and exc.__cause__ is not None else exc
        on_import_failure(by_entry_point[id(ep)], cause)

    manager = _ChosenEntryPoints(group, [ep for _, ep in chosen], failed)
    return LoadedGroup(made, [(by_entry_point[id(ext.entry_point)], ext.plugin) for ext in manager.extensions])


def clash_key(name: str, distribution: str, records: Mapping[str, Any]) -> str:
    """A key for a refused entry point that shares ``name`` with one already recorded."""
    key = f"{name} ({distribution or 'unknown distribution'})"
    n = 2
    while key in records:
        key = f"{name} ({distribution or 'unknown distribution'} #{n})"
        n += 1
    return key


class _AssertionAtImport(Exception):
    """An ``AssertionError`` raised by a plugin's import, carried (as its cause) to the failure callback."""


class _ChosenEntryPoints(ExtensionManager[Any]):
    """stevedore's ``ExtensionManager`` over the entry points Ora chose (``list_entry_points``), not
    over stevedore's own scan and cache (``discovery.py`` says why)."""

    def __init__(self, group: str, chosen: list[metadata.EntryPoint],
                 on_failure: Callable[[Any, metadata.EntryPoint, BaseException], None]) -> None:
        self._chosen = chosen
        super().__init__(group, invoke_on_load=False, on_load_failure_callback=on_failure)

    def list_entry_points(self) -> list[metadata.EntryPoint]:
        return list(self._chosen)

    def _load_one_plugin(self, ep: metadata.EntryPoint, invoke_on_load: bool, invoke_args: tuple[Any],
                         invoke_kwds: dict[str, Any]) -> Extension[Any] | None:
        try:
            return super()._load_one_plugin(ep, invoke_on_load, invoke_args, invoke_kwds)
        except AssertionError as exc:  # stevedore re-raises these; one plugin's must not stop the others
            raise _AssertionAtImport(str(exc)) from exc
