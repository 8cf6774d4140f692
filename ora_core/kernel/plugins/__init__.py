"""Plugins: found, loaded, registered, dispatched; each plugin and component recorded.

First-party plugins are loaded exactly like third-party ones: from the ``ora`` entry-point group.
The jobs, one module each:

- ``discovery``: the entry points of a group, and our cache of that scan (``EntryPointCache``);
- ``loading``: which entry points are imported (allow/block lists, a name two distributions
  publish refused), imported by stevedore's ``ExtensionManager``, failures on the records;
- ``host``: ``PluginHost``, the pluggy ``PluginManager`` with our records, registration (unknown
  hooks with a did-you-mean, wrappers refused) and lazy component collection;
- ``dispatch``: hook calls through pluggy one plugin at a time, and ``ORA_DEBUG_HOOKS``;
- ``registry``: the components by kind and name, each checked before it is accepted;
- ``options``: the options models plugins and backend factories declare;
- ``records``: ``PluginRecord`` and ``ComponentRecord``, what ``ora plugins list`` prints.

``ORA_PLUGINS`` is an allow-list (empty string: none at all), ``ORA_DISABLE_PLUGINS`` a block-list
(entry-point or distribution names, first-party plugins included), ``ORA_STRICT_PLUGINS=1`` makes a
plugin failure fatal, ``ORA_PLUGIN_CACHE`` moves or turns off the entry-point cache.
"""

from __future__ import annotations

from ora_core.kernel.plugins.discovery import (
    EntryPointCache,
    FoundEntryPoint,
    environment_key,
    environment_key_or_why,
    scan_entry_points,
)
from ora_core.kernel.plugins.host import ENTRY_POINT_GROUP, PluginHost
from ora_core.kernel.plugins.records import ComponentRecord, PluginRecord, PluginStatus

__all__ = [
    "ENTRY_POINT_GROUP",
    "ComponentRecord",
    "EntryPointCache",
    "FoundEntryPoint",
    "PluginHost",
    "PluginRecord",
    "PluginStatus",
    "environment_key",
    "environment_key_or_why",
    "scan_entry_points",
]
