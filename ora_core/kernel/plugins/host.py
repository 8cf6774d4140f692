"""``PluginHost``: a pluggy ``PluginManager`` plus Ora's records and component registries.

Nothing runs at import time: the CLI calls ``PluginHost.load_entrypoints()``, which finds the
entry points (``discovery.py``), has stevedore import the chosen ones (``loading.py``) and
registers each module with pluggy here: a hook implementation that matches no hookspec is refused
with a did-you-mean, a wrapper refused (``dispatch.py`` says why), and a plugin that fails any
step is recorded with its entry point, distribution, version and error while the rest still load
(``ORA_STRICT_PLUGINS=1`` makes failures fatal). Components are collected (the ``ora_register_*``
hooks called) on the first look at the records or the registry, so ``ora --help`` imports none.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import IO, Any

import pluggy

from ora_core.kernel import hookspecs
from ora_core.kernel.errors import PluginError, RegistrationError
from ora_core.kernel.plugins.discovery import EntryPointCache, scan_entry_points
from ora_core.kernel.plugins.dispatch import call_order, call_plugin, monitor_hook_calls, unknown_hook_message
from ora_core.kernel.plugins.loading import env_list, load_group
from ora_core.kernel.plugins.options import OptionsModels
from ora_core.kernel.plugins.records import ComponentRecord, PluginRecord, PluginStatus, describe_exception
from ora_core.kernel.plugins.registry import ComponentRegistry

ENTRY_POINT_GROUP = "ora"


class PluginHost:
    """A pluggy ``PluginManager`` plus Ora's records and component registries."""

    def __init__(self, *, strict: bool | None = None, env: Mapping[str, str] | None = None) -> None:
        self.env = dict(os.environ if env is None else env)
        self.strict = (self.env.get("ORA_STRICT_PLUGINS", "") == "1") if strict is None else strict
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._records: dict[str, PluginRecord] = {}
        #: Plugins loaded from entry points whose components are not collected yet: collection
        #: (calling their ``ora_register_*`` hooks) waits for the first look at the records or the
        #: registry, so a command that needs neither (``ora --help``) imports no component.
        self._uncollected: list[tuple[object, PluginRecord]] = []
        self._collect_lock = threading.RLock()
        self._collecting = False
        self._registry = ComponentRegistry(hookspecs.REGISTRY_HOOKS.values(), self._record_failure)
        self._options = OptionsModels(self._registry)
        self._commands_registered = False
        self.debug_hooks = self.env.get("ORA_DEBUG_HOOKS", "") == "1"
        self.debug_stream: IO[str] | None = None  # where ORA_DEBUG_HOOKS writes (default: sys.stderr)
        if self.debug_hooks:
            monitor_hook_calls(self.pm, lambda: self.debug_stream)
        self.entry_point_cache: EntryPointCache | None = None  # how the last scan was served
        #: True once ``load_entrypoints`` ran: the host then knows what is installed (an options
        #: table naming no plugin is an error, not only a warning: ``config.options_problems``).
        self.scanned = False

    # --- loading -------------------------------------------------------------------------

    def load_entrypoints(self, group: str = ENTRY_POINT_GROUP, *,
                         cache: EntryPointCache | None = None) -> list[PluginRecord]:
        """Load every entry point of ``group`` (``loading.load_group``) and register each imported
        module; return the records of this call. ``cache``: serve the scan from it (the CLI's); None scans."""
        found = cache.entry_points(group) if cache is not None else scan_entry_points(group)
        self.entry_point_cache = cache
        self.scanned = True
        if cache is not None and self.debug_hooks:
            self._debug(f"ora plugins: {cache.describe()}\n")
        loaded = load_group(group, found, self._records, allow=env_list(self.env.get("ORA_PLUGINS")),
                            block=env_list(self.env.get("ORA_DISABLE_PLUGINS")) or set(),
                            on_import_failure=lambda record, exc: self._record_failure(
                                record, f"import failed: {describe_exception(exc)}", exc))
        for record, plugin in loaded.plugins:
            self._register(plugin, record, collect=self.strict)
        return loaded.records

    def register_plugin(self, plugin: object, name: str | None = None, *, distribution: str = "",
                        version: str = "") -> PluginRecord:
        """Register an in-process plugin object (tests, embedding applications)."""
        pname = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        record = PluginRecord(
            name=pname,
            distribution=distribution or "(in-process)",
            version=version,
            module=getattr(plugin, "__name__", type(plugin).__module__),
        )
        self.collect_pending()
        if pname in self._records:
            raise PluginError(f"a plugin named {pname!r} is already registered")
        self._register(plugin, record)
        self._records[pname] = record
        return record

    def unregister_plugin(self, name: str) -> None:
        """Remove a plugin and every component it supplied."""
        self.collect_pending()
        record = self._records.pop(name, None)
        if self.pm.has_plugin(name):
            self.pm.unregister(name=name)
        self._registry.remove_plugin(name)
        if record is not None:
            record.components.clear()

    def _record_failure(self, record: PluginRecord, message: str, exc: BaseException | None,
                        status: PluginStatus = "failed") -> None:
        record.fail(status, message)
        if self.strict:
            origin = record.distribution or "in-process"
            raise PluginError(f"plugin {record.name!r} ({origin}): {message}") from exc

    def _register(self, plugin: object, record: PluginRecord, *, collect: bool = True) -> None:
        try:
            self.pm.register(plugin, name=record.name)
        except Exception as exc:  # noqa: BLE001 - pluggy's validation errors, recorded
            self._record_failure(record, f"registration failed: {describe_exception(exc)}", exc)
            return
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            self.pm.unregister(name=record.name)
            self._record_failure(record, unknown_hook_message(plugin, exc), exc)
            return
        wrappers = [f"{hc.name} ({'wrapper=True' if impl.wrapper else 'hookwrapper=True'})"
                    for hc in self.pm.get_hookcallers(plugin) or []
                    for impl in hc.get_hookimpls()
                    if impl.plugin is plugin and (impl.wrapper or impl.hookwrapper)]
        if wrappers:
            self.pm.unregister(name=record.name)
            self._record_failure(record, "hook implementation(s) marked as wrappers are not supported: "
                                 + ", ".join(wrappers) + ". Ora calls each plugin's implementations through a "
                                 "pluggy caller of their own (one plugin at a time, so that a failing plugin "
                                 "is isolated and named), so a wrapper would wrap only its own plugin's call, "
                                 "never the others'. Remove the wrapper flag and implement the hook plainly.", None)
            return
        record.hooks = sorted(
            hc.name for hc in self.pm.get_hookcallers(plugin) or [] if hc.name.startswith("ora_")
        )
        if collect:
            self._collect_all(plugin, record)
        else:
            self._uncollected.append((plugin, record))

    # --- collection ----------------------------------------------------------------------

    @property
    def records(self) -> dict[str, PluginRecord]:
        """Every plugin's record (its components collected first: a hook that raises there
        changes its status)."""
        self.collect_pending()
        return self._records

    @property
    def registry(self) -> dict[str, dict[str, ComponentRecord]]:
        """The components by kind and name (collected first)."""
        self.collect_pending()
        return self._registry.by_kind

    def collect_pending(self) -> None:
        """Call the ``ora_register_*`` hooks of the plugins loaded but not collected yet, in load
        order. Strict mode collects at load (a failure is fatal there, as before). Thread-safe: a
        second thread waits until every plugin is collected (a plugin leaves the list only once its
        components are in); a registration hook looking at the host meanwhile sees what exists."""
        if not self._uncollected:
            return
        with self._collect_lock:
            if self._collecting:
                return
            self._collecting = True
            try:
                while self._uncollected:
                    plugin, record = self._uncollected[0]
                    if record.status == "ok":
                        self._collect_all(plugin, record)
                    self._uncollected.pop(0)
            finally:
                self._collecting = False

    def _collect_all(self, plugin: object, record: PluginRecord) -> None:
        for hook_name, kind in hookspecs.REGISTRY_HOOKS.items():
            self._collect(plugin, record, hook_name, kind)

    def _collect(self, plugin: object, record: PluginRecord, hook_name: str, kind: str) -> None:
        hook = getattr(self.pm.hook, hook_name)
        if not any(i.plugin is plugin for i in hook.get_hookimpls()):
            return
        register: Callable[..., None]
        if kind == "options":  # register(Model, table=...): the table defaults to the plugin's name
            def register(component: Any, *, table: str | None = None) -> None:
                self._options.declare(record, component, table)
        else:
            def register(component: Any, *, name: str | None = None, _kind: str = kind) -> None:
                self._registry.add(record, _kind, component, name)

        try:
            self.call_plugin(plugin, hook_name, register=register)
        except RegistrationError as exc:
            self._record_failure(record, str(exc), exc)
        except Exception as exc:  # noqa: BLE001 - a plugin's hook raising is recorded
            self._record_failure(record, f"{hook_name} raised {describe_exception(exc)}", exc)

    # --- components and options ------------------------------------------------------------

    def components(self, kind: str) -> dict[str, Any]:
        """The usable components of one kind, by name."""
        self.collect_pending()
        return self._registry.usable(kind)

    def detectors(self, layer: str | None = None, kind: str | None = None) -> list[Any]:
        """Usable detectors, optionally only those on ``layer`` and/or of ``kind``, by name."""
        return [
            c.obj for name, c in sorted(self.registry["detector"].items())
            if c.status == "ok" and (layer is None or c.layer == layer)
            and (kind is None or getattr(c.obj, "kind", None) == kind)
        ]

    def get(self, kind: str, name: str) -> Any:
        try:
            return self.registry[kind][name].obj
        except KeyError:
            known = ", ".join(sorted(self.registry[kind])) or "none"
            raise PluginError(f"no {kind} named {name!r} is registered (registered: {known})") from None

    def embedder(self, name: str) -> Any:
        """The embedder registered as ``name``; a ``PluginError`` listing the registered ones."""
        registered = self.components("embedder")
        if name not in registered:
            known = ", ".join(sorted(registered)) or "none (install ora-minilm)"
            raise PluginError(f"no embedder named {name!r} is registered (registered embedders: {known})")
        return registered[name]

    def options_models(self) -> dict[str, Any]:
        """Every declared ``[plugins.<table>]`` and its options model, by table name."""
        return self.components("options")

    def options_model(self, table: str) -> Any:
        """The model a loaded plugin declared for ``[plugins.<table>]``, or None."""
        self.collect_pending()
        return self._options.for_table(table)

    def backend_options_model(self, backend_type: str) -> Any:
        """The options model the factory of ``backend_type`` declares (``OptionsModels.for_backend``)."""
        self.collect_pending()
        return self._options.for_backend(backend_type)

    def plugin_versions(self) -> dict[str, str]:
        return {r.name: r.version for r in self.records.values() if r.status != "disabled"}

    def summary(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in sorted(self.records.values(), key=lambda r: r.name)]

    def problems(self) -> list[PluginRecord]:
        return [r for r in self.records.values() if r.status in {"failed", "incompatible"}]

    # --- dispatch ------------------------------------------------------------------------------

    def register_commands(self, cli: Any, ora: Any = None) -> None:
        """Let each plugin add CLI commands; a plugin whose hook raises is recorded, not fatal.

        ``ora`` is the ``CommandContext`` the commands get (configuration, host)."""
        if self._commands_registered:
            return
        self._commands_registered = True
        for impl in self.call_order("ora_register_commands"):
            record = self._records.get(impl.plugin_name)
            try:
                self.call_plugin(impl.plugin, "ora_register_commands", cli=cli, ora=ora)
            except Exception as exc:  # noqa: BLE001 - recorded on the plugin's record
                if record is None:
                    raise
                self._record_failure(record, f"ora_register_commands raised {describe_exception(exc)}", exc)

    def call_observers(self, hook_name: str, on_error: Callable[[str, BaseException], None],
                       **kwargs: Any) -> None:
        """Call an observer hook plugin by plugin, in pluggy's order (``call_order``);
        ``on_error(plugin, exc)`` records a failure and the others still run."""
        for impl in self.call_order(hook_name):
            try:
                self.call_plugin(impl.plugin, hook_name, **kwargs)
            except Exception as exc:  # noqa: BLE001 - handed to on_error, which records it
                on_error(impl.plugin_name, exc)

    def call_order(self, hook_name: str) -> list[pluggy.HookImpl]:
        """The implementations of ``hook_name`` in the order pluggy calls them (``dispatch.call_order``)."""
        return call_order(self.pm, hook_name)

    def call_plugin(self, plugin: object, hook_name: str, **kwargs: Any) -> list[Any]:
        """Call one plugin's implementation(s) of ``hook_name`` through pluggy (``dispatch.call_plugin``)."""
        return call_plugin(self.pm, plugin, hook_name, **kwargs)

    def _debug(self, line: str) -> None:
        stream = self.debug_stream or sys.stderr
        stream.write(line)
        stream.flush()
