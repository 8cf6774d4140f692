"""Plugin loading: entry points one at a time, in isolation, with our own record of each.

First-party plugins are loaded exactly like third-party ones: from the ``ora`` entry-point
group. A plugin that fails to import, register, or pass ``check_pending`` is recorded with its
entry point, distribution, version and error, and the rest still load (``ORA_STRICT_PLUGINS=1``
makes failures fatal). ``ORA_PLUGINS`` is an allow-list (empty string: none at all),
``ORA_DISABLE_PLUGINS`` a block-list; both match an entry-point or distribution name and can
switch first-party plugins off too.

Nothing here runs at import time: the CLI calls ``PluginHost.load_entrypoints()``.

The scan of the installed distributions for entry points (~20 ms with ~150 installed, and
every ``ora`` command pays it) can be served from an ``EntryPointCache``: the CLI passes one,
other callers scan. It is keyed by the environment's distributions, so it never serves a stale
plugin set: the interpreter, every ``sys.path`` entry, each directory's modification time, and
each ``*.dist-info``/``*.egg-info`` in it with the modification time and size of its
``entry_points.txt`` and of its metadata (name, version). Only the scan is cached: every plugin
module is still imported and registered on every command. Anything else that could find
distributions (a ``sys.meta_path`` finder with ``find_distributions`` other than the standard
path finder) bypasses the cache. A cache that cannot be read or written is rebuilt or skipped,
and said so on stderr; ``ORA_PLUGIN_CACHE`` names the file, or turns the cache off (``off``);
``ORA_DEBUG_HOOKS=1`` also prints how the scan was served.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import inspect
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any, Literal

import pluggy

from ora_core.kernel import hookspecs
from ora_core.kernel.errors import PluginError, RegistrationError
from ora_core.kernel.layers import LayerError, check_assumptions, validate_layer

ENTRY_POINT_GROUP = "ora"
PluginStatus = Literal["ok", "failed", "incompatible", "disabled"]


@dataclass
class ComponentRecord:
    """One registered (or refused) component and the plugin that supplied it."""

    kind: str
    name: str
    plugin: str
    obj: Any = field(repr=False, default=None)
    layer: str | None = None
    assumes: tuple[str, ...] = ()
    status: Literal["ok", "incompatible", "refused"] = "ok"
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
    """Our own record of a plugin; never read back out of pluggy's private state."""

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
        # "failed" outranks "incompatible" outranks "ok"
        rank = {"ok": 0, "disabled": 0, "incompatible": 1, "failed": 2}
        if rank[status] >= rank[self.status]:
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


@dataclass(frozen=True)
class FoundEntryPoint:
    """One entry point of a group, with the distribution that publishes it."""

    entry_point: metadata.EntryPoint
    distribution: str
    version: str


def scan_entry_points(group: str) -> list[FoundEntryPoint]:
    """Every entry point of ``group`` in the installed distributions (``importlib.metadata``),
    in the order the scan finds them."""
    found = []
    for ep in metadata.entry_points(group=group):
        dist = ep.dist
        found.append(FoundEntryPoint(ep, dist.metadata["Name"] if dist is not None else "",
                                     dist.version if dist is not None else ""))
    return found


CACHE_FORMAT = 1
_INFO_SUFFIXES = (".dist-info", ".egg-info")


def environment_key() -> str | None:
    """A digest of everything ``importlib.metadata`` reads to find distributions and their
    entry points; None when no key can be made (``environment_key_or_why`` says why)."""
    return environment_key_or_why()[0]


def environment_key_or_why() -> tuple[str | None, str]:
    """``(key, "")``, or ``(None, why)``: another finder could find distributions, or a directory
    of ``sys.path`` could not be listed (then nothing is cached)."""
    for finder in sys.meta_path:
        if getattr(finder, "find_distributions", None) is not None and finder is not PathFinder:
            return None, f"the import finder {type(finder).__name__} can also find distributions"
    parts = [sys.version, sys.prefix, sys.executable]
    for entry in sys.path:
        parts.append(f"path {entry}")
        where = entry or "."
        try:
            st = os.stat(where)
        except OSError:
            parts.append("-")
            continue
        if not os.path.isdir(where):
            parts.append(f"file {st.st_mtime_ns} {st.st_size}")
            continue
        parts.append(f"dir {st.st_mtime_ns}")
        try:
            names = sorted(os.listdir(where))
        except OSError as exc:
            return None, f"cannot list {where} on sys.path ({type(exc).__name__}: {exc})"
        infos = [n for n in names if n.lower().endswith(_INFO_SUFFIXES)]
        if entry.lower().endswith(".egg"):
            infos += [n for n in names if n.lower() == "egg-info"]
        for name in infos:
            parts.append(name)
            # the entry points, and the name and version (METADATA; PKG-INFO in an egg-info)
            metadata_file = "METADATA" if name.lower().endswith(".dist-info") else "PKG-INFO"
            for member in ("entry_points.txt", metadata_file):
                try:
                    st = os.stat(os.path.join(where, name, member))
                    parts.append(f"{st.st_mtime_ns} {st.st_size}")
                except (FileNotFoundError, NotADirectoryError):  # none, or an egg-info that is a file
                    parts.append("-")
                except OSError as exc:
                    return None, f"cannot stat {os.path.join(where, name, member)} ({type(exc).__name__}: {exc})"
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest(), ""


@dataclass
class EntryPointCache:
    """Entry points of a scan, kept in ``path`` under the environment's key (see the module
    docstring). ``status`` says how the last ``entry_points`` call was served: ``hit``, ``miss``
    (the environment changed, or no cache yet), ``rebuilt`` (the file was unreadable or
    malformed), ``bypassed`` (no key could be made), ``off``; ``problem`` names what went wrong
    with the file, if anything (a problem is also written to ``stderr``)."""

    path: Path | None
    stderr: Any = None
    status: str = "unused"
    problem: str = ""

    @classmethod
    def for_environment(cls, env: Mapping[str, str], stderr: Any = None) -> EntryPointCache:
        """The cache file of this interpreter's environment in the user cache directory, or the
        one ``ORA_PLUGIN_CACHE`` names; ``ORA_PLUGIN_CACHE=off`` turns it off."""
        setting = env.get("ORA_PLUGIN_CACHE", "").strip()
        if setting.lower() in {"off", "0", "false", "no"}:
            return cls(None, stderr, status="off")
        if setting:
            return cls(Path(setting).expanduser(), stderr)
        digest = hashlib.sha256(f"{sys.prefix}\0{sys.executable}".encode("utf-8", "surrogateescape")).hexdigest()
        return cls(_user_cache_dir(env) / f"entry-points-{digest[:16]}.json", stderr)

    def entry_points(self, group: str) -> list[FoundEntryPoint]:
        if self.path is None:
            self.status = "off"
            return scan_entry_points(group)
        key, why = environment_key_or_why()
        if key is None:  # not a failure (a full scan is what no cache does): named in describe()
            self.status, self.problem = "bypassed", f"no environment key: {why}"
            return scan_entry_points(group)
        stored = self._read()
        if stored is not None and stored.get("key") == key and group in stored["groups"]:
            self.status = "hit"
            return [FoundEntryPoint(metadata.EntryPoint(name=row[0], value=row[1], group=group), row[2], row[3])
                    for row in stored["groups"][group]]
        if self.status != "rebuilt":
            self.status = "miss"
        found = scan_entry_points(group)
        groups = stored["groups"] if stored is not None and stored.get("key") == key else {}
        groups[group] = [[f.entry_point.name, f.entry_point.value, f.distribution, f.version] for f in found]
        self._write({"format": CACHE_FORMAT, "key": key, "groups": groups})
        return found

    def _read(self) -> dict[str, Any] | None:
        """The stored cache, None when there is none; a malformed one is reported and rebuilt."""
        assert self.path is not None
        try:
            raw = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):  # no cache yet (writing it will say why if it cannot)
            return None
        except OSError as exc:
            self._report("rebuilt", f"cannot read it ({type(exc).__name__}: {exc})")
            return None
        try:
            stored = json.loads(raw)
            problem = _cache_shape_problem(stored)
        except ValueError as exc:
            problem = f"not JSON ({exc})"
        if problem:
            self._report("rebuilt", problem)
            return None
        return stored

    def _write(self, data: dict[str, Any]) -> None:
        assert self.path is not None
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(data, separators=(",", ":")))
            os.replace(tmp, self.path)
        except OSError as exc:
            self._report(self.status, f"cannot write it ({type(exc).__name__}: {exc}); the next command "
                                      "scans again")
            try:
                if tmp.exists():
                    tmp.unlink()
            except OSError as cleanup:
                self.problem += f"; and its temporary file {tmp} remains: {cleanup}"

    def _report(self, status: str, problem: str) -> None:
        self.status = status
        self.problem = problem
        what = "rebuilt from a full scan" if status == "rebuilt" else "the entry points came from a full scan"
        print(f"ora: the plugin entry-point cache {self.path}: {problem}; {what} "
              "(ORA_PLUGIN_CACHE=off turns the cache off)", file=self.stderr or sys.stderr)

    def describe(self) -> str:
        return f"entry points: cache {self.status} ({self.path or 'no file'})" + (
            f": {self.problem}" if self.problem else "")


def _user_cache_dir(env: Mapping[str, str]) -> Path:
    """``platformdirs.user_cache_dir("ora")``; on Linux spelled out (the XDG rule platformdirs
    follows there), which saves importing it on every command."""
    if sys.platform.startswith("linux"):
        xdg = env.get("XDG_CACHE_HOME", "").strip()
        return (Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "ora"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("ora", appauthor=False))


def _cache_shape_problem(stored: Any) -> str | None:
    if not isinstance(stored, dict) or stored.get("format") != CACHE_FORMAT:
        return f"not a format-{CACHE_FORMAT} cache"
    if not isinstance(stored.get("key"), str) or not isinstance(stored.get("groups"), dict):
        return "no key or groups"
    for group, rows in stored["groups"].items():
        if not isinstance(rows, list) or not all(
                isinstance(row, list) and len(row) == 4 and all(isinstance(v, str) for v in row) for row in rows):
            return f"group {group!r} is malformed"
    return None


def _env_list(value: str | None) -> set[str] | None:
    if value is None:
        return None
    return {item.strip() for item in value.replace(";", ",").split(",") if item.strip()}


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
        self._registry: dict[str, dict[str, ComponentRecord]] = {
            kind: {} for kind in hookspecs.REGISTRY_HOOKS.values()
        }
        self._commands_registered = False
        self.debug_hooks = self.env.get("ORA_DEBUG_HOOKS", "") == "1"
        self.debug_stream: Any = None  # where ORA_DEBUG_HOOKS writes (default: sys.stderr)
        if self.debug_hooks:
            self._monitor_hooks()
        self.entry_point_cache: EntryPointCache | None = None  # how the last scan was served
        #: True once ``load_entrypoints`` ran: the host then knows what is installed (an options
        #: table naming no plugin is an error, not only a warning: ``config.options_problems``).
        self.scanned = False
        self._backend_options: dict[str, tuple[Any, Any]] = {}  # type -> (factory, its options model)

    # --- loading -------------------------------------------------------------------------

    def load_entrypoints(self, group: str = ENTRY_POINT_GROUP, *,
                         cache: EntryPointCache | None = None) -> list[PluginRecord]:
        """Load every entry point of ``group`` one at a time; return the records of this call.
        ``cache``: serve the scan from it (the CLI's); None scans."""
        allow = _env_list(self.env.get("ORA_PLUGINS"))
        block = _env_list(self.env.get("ORA_DISABLE_PLUGINS")) or set()
        loaded: list[PluginRecord] = []
        found = cache.entry_points(group) if cache is not None else scan_entry_points(group)
        self.entry_point_cache = cache
        self.scanned = True
        if cache is not None and self.debug_hooks:
            stream = self.debug_stream or sys.stderr
            stream.write(f"ora plugins: {cache.describe()}\n")
        for item in sorted(found, key=lambda f: f.entry_point.name):
            ep = item.entry_point
            record = PluginRecord(
                name=ep.name,
                distribution=item.distribution,
                version=item.version,
                entry_point=f"{ep.name} = {ep.value}",
                module=ep.module,
            )
            if ep.name in self._records:
                # Two distributions publishing the same entry-point name: the first keeps it, the
                # second is refused by name, and both records stay listed (none overwrites the other).
                first = self._records[ep.name]
                record.fail(
                    "failed",
                    f"entry point name {ep.name!r} is published by distribution {first.distribution!r} "
                    f"and by distribution {record.distribution!r}; {record.distribution!r} is refused "
                    f"({first.distribution!r}, loaded first, keeps the name)",
                )
                self._records[_clash_key(ep.name, record.distribution, self._records)] = record
                loaded.append(record)
                continue
            names = {ep.name, record.distribution}
            if (allow is not None and not names & allow) or names & block:
                record.status = "disabled"
                why = "ORA_DISABLE_PLUGINS" if names & block else "ORA_PLUGINS allow-list"
                record.errors.append(f"disabled by {why}")
                self._remember(record, loaded)
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # noqa: BLE001 - isolation is the point; recorded below
                self._record_failure(record, f"import failed: {_describe(exc)}", exc)
                self._remember(record, loaded)
                continue
            self._register(plugin, record, collect=self.strict)
            self._remember(record, loaded)
        return loaded

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
        return self._registry

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
        for kind_registry in self._registry.values():
            for comp_name in [n for n, c in kind_registry.items() if c.plugin == name]:
                del kind_registry[comp_name]
        if record is not None:
            record.components.clear()

    def _remember(self, record: PluginRecord, loaded: list[PluginRecord]) -> None:
        self._records[record.name] = record
        loaded.append(record)

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
            self._record_failure(record, f"registration failed: {_describe(exc)}", exc)
            return
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            self.pm.unregister(name=record.name)
            self._record_failure(record, _unknown_hook_message(plugin, exc), exc)
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

    def _collect_all(self, plugin: object, record: PluginRecord) -> None:
        for hook_name, kind in hookspecs.REGISTRY_HOOKS.items():
            self._collect(plugin, record, hook_name, kind)

    def _collect(self, plugin: object, record: PluginRecord, hook_name: str, kind: str) -> None:
        hook = getattr(self.pm.hook, hook_name)
        impls = [i for i in hook.get_hookimpls() if i.plugin is plugin]
        if not impls:
            return
        if kind == "options":  # register(Model, table=...): the table defaults to the plugin's name
            def register(component: Any, *, table: str | None = None) -> None:
                self._add_options(record, component, table)
        else:
            def register(component: Any, *, name: str | None = None, _kind: str = kind) -> None:
                self._add_component(record, _kind, component, name)

        try:
            self.call_plugin(plugin, hook_name, register=register)
        except RegistrationError as exc:
            self._record_failure(record, str(exc), exc)
        except Exception as exc:  # noqa: BLE001 - a plugin's hook raising is recorded
            self._record_failure(record, f"{hook_name} raised {_describe(exc)}", exc)

    # --- components ---------------------------------------------------------------------------

    def _add_options(self, record: PluginRecord, model: Any, table: str | None) -> None:
        """``ora_register_options``: ``model`` declares ``[plugins.<table>]`` (default: the plugin's name)."""
        from ora_core.kernel.config import forbids_extra_keys

        name = record.name if table is None else table
        if not isinstance(name, str) or not name.strip():
            message = f"plugin {record.name!r} declared options with table {table!r}: a table name must be text"
            record.components.append(ComponentRecord(kind="options", name=str(table), plugin=record.name,
                                                     status="refused", error=message))
            self._record_failure(record, message, None)
            return
        if not forbids_extra_keys(model):
            message = (f"options {name!r} (plugin {record.name!r}): {model!r} is not a pydantic model that forbids "
                       "unknown keys; subclass ora_core.api.PluginOptions (extra='forbid')")
            record.components.append(ComponentRecord(kind="options", name=name, plugin=record.name,
                                                     status="refused", error=message))
            self._record_failure(record, message, None)
            return
        self._add_component(record, "options", model, name)

    def options_models(self) -> dict[str, Any]:
        """Every declared ``[plugins.<table>]`` and its options model, by table name."""
        return self.components("options")

    def options_model(self, table: str) -> Any:
        """The model a loaded plugin declared for ``[plugins.<table>]``, or None."""
        comp = self.registry["options"].get(table)
        return comp.obj if comp is not None and comp.status == "ok" else None

    def backend_options_model(self, backend_type: str) -> Any:
        """The options model the factory of ``backend_type`` declares (``options_model``: a model class,
        or a ``"module:Class"`` target, imported here), None when it declares none or no usable plugin
        registers the type. A target that cannot be imported or is no model that forbids unknown keys
        is a ``PluginError`` naming the type, its plugin and the target."""
        comp = self.registry["backend"].get(backend_type)
        if comp is None or comp.status != "ok":
            return None
        cached = self._backend_options.get(backend_type)
        if cached is not None and cached[0] is comp.obj:
            return cached[1]
        from ora_core.kernel.config import forbids_extra_keys

        declared = getattr(comp.obj, "options_model", None)
        model = declared
        where = f"backend type {backend_type!r} (plugin {comp.plugin!r}) declares options_model {declared!r}"
        if isinstance(declared, str):
            module, _, attribute = declared.partition(":")
            try:
                model = getattr(importlib.import_module(module), attribute)
            except Exception as exc:  # noqa: BLE001 - a plugin's broken declaration, named
                raise PluginError(f"{where}, which cannot be imported: {_describe(exc)}") from exc
        if model is not None and not forbids_extra_keys(model):
            raise PluginError(f"{where}: not a pydantic model that forbids unknown keys "
                              "(subclass ora_core.api.PluginOptions)")
        self._backend_options[backend_type] = (comp.obj, model)
        return model

    def _add_component(self, record: PluginRecord, kind: str, component: Any, name: str | None) -> None:
        if kind in ("mode_pack", "probe_pack"):  # packs are directories
            path = Path(component)
            comp_name = name or f"{record.name}:{path.name}"
            comp = ComponentRecord(kind=kind, name=comp_name, plugin=record.name, obj=path)
            if not path.is_dir():
                comp.status = "refused"
                comp.error = f"{kind.replace('_', ' ')} directory {str(path)!r} does not exist"
                record.components.append(comp)
                self._record_failure(record, comp.error, None)
                return
        else:
            comp_name = name or getattr(component, "name", None)
            if not isinstance(comp_name, str) or not comp_name:
                message = (
                    f"a {kind} registered by plugin {record.name!r} has no name "
                    f"(object {component!r}); give it a 'name' attribute"
                )
                record.components.append(ComponentRecord(kind=kind, name="?", plugin=record.name,
                                                         status="refused", error=message))
                self._record_failure(record, message, None)
                return
            comp = ComponentRecord(kind=kind, name=comp_name, plugin=record.name, obj=component)
            label = f"{kind} {comp_name!r} (plugin {record.name!r})"
            problem = _shape_problem(kind, component)
            if problem:
                comp.status = "refused"
                comp.error = f"{label} {problem}"
                record.components.append(comp)
                self._record_failure(record, comp.error, None)
                return
            declared_layer = getattr(component, "layer", None)
            if kind == "detector" or declared_layer is not None:
                try:
                    layer = validate_layer(declared_layer, label)
                except LayerError as exc:
                    comp.status = "refused"
                    comp.error = str(exc)
                    record.components.append(comp)
                    self._record_failure(record, comp.error, exc)
                    return
                assumes = tuple(sorted(getattr(component, "assumes", ()) or ()))
                comp.layer, comp.assumes = layer, assumes
                check = check_assumptions(label, layer, assumes)
                if not check.ok:
                    comp.status = "incompatible"
                    comp.error = f"refused: {check.message()}"
                    record.components.append(comp)
                    self._record_failure(record, comp.error, None, status="incompatible")
                    return
        existing = self._registry[kind].get(comp.name)
        if existing is not None:
            comp.status = "refused"
            comp.error = (
                f"{kind} {comp.name!r} is registered twice: by plugin {existing.plugin!r} "
                f"and by plugin {record.name!r}"
            )
            record.components.append(comp)
            self._record_failure(record, comp.error, None)
            return
        self._registry[kind][comp.name] = comp
        record.components.append(comp)

    def components(self, kind: str) -> dict[str, Any]:
        """The usable components of one kind, by name."""
        return {name: c.obj for name, c in self.registry[kind].items() if c.status == "ok"}

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

    def plugin_versions(self) -> dict[str, str]:
        return {r.name: r.version for r in self.records.values() if r.status != "disabled"}

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
                message = f"ora_register_commands raised {_describe(exc)}"
                if record is None:
                    raise
                self._record_failure(record, message, exc)

    def call_observers(self, hook_name: str, on_error: Callable[[str, BaseException], None],
                       **kwargs: Any) -> None:
        """Call an observer hook plugin by plugin, in pluggy's order (``call_order``);
        ``on_error(plugin, exc)`` records a failure and the others still run."""
        for impl in self.call_order(hook_name):
            try:
                self.call_plugin(impl.plugin, hook_name, **kwargs)
            except Exception as exc:  # noqa: BLE001 - handed to on_error, which records it
                on_error(impl.plugin_name, exc)

    def call_order(self, hook_name: str) -> list[Any]:
        """The implementations of ``hook_name`` in the order pluggy calls them: ``tryfirst`` ones
        first, then the rest last-registered first, ``trylast`` ones last (pluggy's LIFO order)."""
        return list(reversed(getattr(self.pm.hook, hook_name).get_hookimpls()))

    def call_plugin(self, plugin: object, hook_name: str, **kwargs: Any) -> list[Any]:
        """Call one plugin's implementation(s) of ``hook_name`` through pluggy's own caller (a
        ``subset_hook_caller`` without the other plugins), so pluggy's dispatch, argument handling
        and hook-call monitoring (``ORA_DEBUG_HOOKS``) apply, while a plugin that raises fails
        alone: its caller raises, and the next plugin's call goes on. ``kwargs``: every argument
        the hookspec offers (each implementation takes the ones it names)."""
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        return self.pm.subset_hook_caller(hook_name, remove_plugins=others)(**kwargs)

    def _monitor_hooks(self) -> None:
        """``ORA_DEBUG_HOOKS=1``: pluggy's hook-call monitoring writes every call to stderr (or
        ``debug_stream``) with its plugin, its duration and how it ended."""
        started: dict[int, list[float]] = {}

        def before(hook_name: str, impls: list[Any], kwargs: Mapping[str, Any]) -> None:
            started.setdefault(threading.get_ident(), []).append(time.perf_counter())

        def after(outcome: Any, hook_name: str, impls: list[Any], kwargs: Mapping[str, Any]) -> None:
            stack = started.get(threading.get_ident()) or [time.perf_counter()]
            ms = (time.perf_counter() - stack.pop()) * 1000
            raised = outcome.exception
            ended = f"raised {type(raised).__name__}" if raised is not None else "ok"
            who = ", ".join(f"{i.plugin_name} ({_module_of(i)})" for i in impls) or "no implementation"
            stream = self.debug_stream or sys.stderr
            stream.write(f"ora hooks: {hook_name} <- {who} {ms:.2f} ms {ended}\n")
            stream.flush()

        self.pm.add_hookcall_monitoring(before, after)

    def embedder(self, name: str) -> Any:
        """The embedder registered as ``name``; a ``PluginError`` listing the registered ones."""
        registered = self.components("embedder")
        if name not in registered:
            known = ", ".join(sorted(registered)) or "none (install ora-minilm)"
            raise PluginError(f"no embedder named {name!r} is registered (registered embedders: {known})")
        return registered[name]

    def summary(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in sorted(self.records.values(), key=lambda r: r.name)]

    def problems(self) -> list[PluginRecord]:
        return [r for r in self.records.values() if r.status in {"failed", "incompatible"}]


_REQUIRED: dict[str, tuple[str, ...]] = {
    "detector": ("detect",),
    "backend": ("create",),
    "retriever": ("retrieve", "stream"),
    "verifier": ("verify",),
    "trace_sink": ("open_turn", "handle", "close_turn"),
    "fault_injector": ("inject",),
    "embedder": ("embed", "dimension"),
}


def _shape_problem(kind: str, component: Any) -> str | None:
    missing = [attr for attr in _REQUIRED.get(kind, ()) if not hasattr(component, attr)]
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


def _unknown_hook_message(plugin: object, exc: BaseException) -> str:
    """Name each hook implementation that matches no hookspec, with a did-you-mean."""
    known = [name for name in dir(hookspecs) if name.startswith("ora_")]
    unknown = []
    for attr in dir(plugin):
        if attr.startswith("_") or attr in known:
            continue
        if getattr(getattr(plugin, attr, None), f"{hookspecs.PROJECT}_impl", None) is None:
            continue
        close = difflib.get_close_matches(attr, known, n=1, cutoff=0.6)
        unknown.append(f"{attr!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    if not unknown:
        return f"unknown hook: {_describe(exc)}"
    return "unknown hook " + ", ".join(unknown) + f"; known hooks: {', '.join(known)}"


def _clash_key(name: str, distribution: str, records: Mapping[str, Any]) -> str:
    """A key for a refused entry point that shares ``name`` with one already recorded."""
    key = f"{name} ({distribution or 'unknown distribution'})"
    n = 2
    while key in records:
        key = f"{name} ({distribution or 'unknown distribution'} #{n})"
        n += 1
    return key


def _module_of(impl: Any) -> str:
    return getattr(impl.function, "__module__", "?") or "?"


def _describe(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def iter_distributions(records: Iterable[PluginRecord]) -> set[str]:
    return {r.distribution for r in records if r.distribution}


def hook_signature(hook_name: str) -> inspect.Signature:
    """The public signature of a hookspec (used by docs and meta-tests)."""
    return inspect.signature(getattr(hookspecs, hook_name))
