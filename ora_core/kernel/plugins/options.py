"""Plugins' options models: the ``[plugins.<table>]`` tables plugins declare (``ora_register_options``)
and the ``options_model`` a backend factory declares for ``[backends.<name>] options``.

A model must be a pydantic model that forbids unknown keys (``ora_core.api.PluginOptions``); one
that is not is refused on its plugin's record (a table) or named in a ``PluginError`` (a backend's).
``kernel/config.py`` validates the configuration's tables against them.
"""

from __future__ import annotations

import importlib
from typing import Any

from ora_core.kernel.errors import PluginError
from ora_core.kernel.plugins.records import PluginRecord, describe_exception
from ora_core.kernel.plugins.registry import ComponentRegistry


class OptionsModels:
    """The options models of the components in ``registry``; a backend's model is looked up (and,
    for a ``"module:Class"`` target, imported) once per factory."""

    def __init__(self, registry: ComponentRegistry) -> None:
        self._registry = registry
        self._backend_models: dict[str, tuple[Any, Any]] = {}  # type -> (factory, its options model)

    def declare(self, record: PluginRecord, model: Any, table: str | None) -> None:
        """``ora_register_options``: ``model`` declares ``[plugins.<table>]`` (default: the plugin's name)."""
        from ora_core.kernel.config import forbids_extra_keys

        name = record.name if table is None else table
        if not isinstance(name, str) or not name.strip():
            self._registry.refuse(record, "options", str(table), f"plugin {record.name!r} declared options with "
                                                                 f"table {table!r}: a table name must be text")
            return
        if not forbids_extra_keys(model):
            self._registry.refuse(record, "options", name,
                                  f"options {name!r} (plugin {record.name!r}): {model!r} is not a pydantic model "
                                  "that forbids unknown keys; subclass ora_core.api.PluginOptions (extra='forbid')")
            return
        self._registry.add(record, "options", model, name)

    def for_table(self, table: str) -> Any:
        """The model a loaded plugin declared for ``[plugins.<table>]``, or None."""
        comp = self._registry.by_kind["options"].get(table)
        return comp.obj if comp is not None and comp.status == "ok" else None

    def for_backend(self, backend_type: str) -> Any:
        """The options model the factory of ``backend_type`` declares (``options_model``: a model class,
        or a ``"module:Class"`` target, imported here), None when it declares none or no usable plugin
        registers the type. A target that cannot be imported or is no model that forbids unknown keys
        is a ``PluginError`` naming the type, its plugin and the target."""
        comp = self._registry.by_kind["backend"].get(backend_type)
        if comp is None or comp.status != "ok":
            return None
        cached = self._backend_models.get(backend_type)
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
                raise PluginError(f"{where}, which cannot be imported: {describe_exception(exc)}") from exc
        if model is not None and not forbids_extra_keys(model):
            raise PluginError(f"{where}: not a pydantic model that forbids unknown keys "
                              "(subclass ora_core.api.PluginOptions)")
        self._backend_models[backend_type] = (comp.obj, model)
        return model
