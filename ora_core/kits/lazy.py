"""Lazy components: register a component by name without importing its module.

``ora --help`` and ``ora plugins list`` load every plugin, and a plugin's entry-point module is
imported to register its components. A backend factory whose module imports httpx, llama.cpp or
Playwright at the top would put that import on every command's start-up path. A plugin registers
a ``LazyBackendFactory`` instead: its ``name`` is known at once; the real factory is imported the
first time anything else is asked of it (``create``, or any other attribute), once.

    @hookimpl
    def ora_register_backends(register):
        register(LazyBackendFactory("openai", "ora_openai.backend:OpenAIFactory",
                                    options="ora_openai.options:OpenAIOptions"))

``options`` names the model of ``[backends.<name>] options`` (``options_model``), kept as its
target: the kernel imports it (a light module) only to validate a configuration.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any


class LazyBackendFactory:
    """A backend factory known by ``name``; ``target`` (``"module:attribute"``) names the real
    factory class (instantiated with no arguments) or instance, imported on first use. An import
    error surfaces at that first use, as the plugin's own exception."""

    #: Backends run on no pipeline layer and assume nothing of one (the kernel probes these at load).
    layer: str | None = None
    assumes: frozenset[str] = frozenset()
    #: The ``"module:Class"`` of the model of this type's ``options`` (None: none declared); read by the
    #: kernel without importing the real factory.
    options_model: str | None = None

    def __init__(self, name: str, target: str, *, options: str | None = None) -> None:
        for what in (target, options):
            if what is None:
                continue
            module, sep, attribute = what.partition(":")
            if not sep or not module or not attribute:
                raise ValueError(f"lazy target {what!r} must be 'module:attribute'")
        self.name = name
        self.target = target
        self.options_model = options
        self._real: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._real is not None

    def resolve(self) -> Any:
        """The real factory (imported and built once)."""
        if self._real is None:
            with self._lock:
                if self._real is None:
                    module, _, attribute = self.target.partition(":")
                    obj = getattr(importlib.import_module(module), attribute)
                    self._real = obj() if isinstance(obj, type) else obj
        return self._real

    def create(self, settings: Any) -> Any:
        return self.resolve().create(settings)

    def __getattr__(self, attribute: str) -> Any:
        # Only reached for attributes this proxy lacks: delegate to the real factory.
        if attribute.startswith("__") or attribute in {"_real", "_lock", "target", "name", "options_model"}:
            raise AttributeError(attribute)
        return getattr(self.resolve(), attribute)

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "not loaded"
        return f"LazyBackendFactory({self.name!r}, {self.target!r}, {state})"


#: the last text lower-cased for a prefilter test, and its lower case: the detectors of one
#: output test it one after another (one entry, replaced whole, so threads never see half of it)
_last_lower: tuple[str, str] = ("", "")


class LazyPattern:
    """A regular expression compiled on first use; otherwise it behaves as the compiled
    ``re.Pattern`` (every attribute is delegated). Detector modules hold dozens of patterns, and
    every ``ora`` command imports every plugin: compiling them at import would put tens of
    milliseconds on each command's start-up for patterns most commands never run.

    ``search``, ``findall`` and ``finditer`` over a whole text first test the literals every
    match must contain (``ora_core.kits.prefilter``): when none occurs, the scan is skipped and the
    answer is the one the scan would have given (no match)."""

    __slots__ = ("_compiled", "_flags", "_need", "_source")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = pattern
        self._flags = flags
        self._compiled: Any = None
        self._need: Any = None

    def compiled(self) -> Any:
        if self._compiled is None:
            import re

            from ora_core.kits.prefilter import required_literal_sets

            compiled = re.compile(self._source, self._flags)
            need = required_literal_sets(self._source, self._flags)
            self._need = (tuple(tuple(sorted(r, key=len, reverse=True)) for r in need[0]), need[1]) if need else None
            self._compiled = compiled
        return self._compiled

    def cannot_match(self, text: Any) -> bool:
        """True when ``text`` lacks every literal of one of a match's requirements (so no scan
        can find one);
        see ``ora_core.kits.prefilter`` (under IGNORECASE only an ASCII text can be ruled out)."""
        global _last_lower
        if self._compiled is None:
            self.compiled()
        need = self._need
        if need is None or type(text) is not str:
            return False
        literals, icase = need
        if icase:
            if not text.isascii():
                return False
            last = _last_lower
            if last[0] is text:
                text = last[1]
            else:
                lower = text.lower()
                _last_lower = (text, lower)
                text = lower
        for requirement in literals:  # a match needs a literal of each requirement
            for literal in requirement:
                if literal in text:
                    break
            else:
                return True  # no literal of this one: no match
        return False

    # The hot methods, spelled out: reaching them through ``__getattr__`` (a failed lookup
    # first) cost ~1 ms per Gear-4 turn across the detectors.
    def search(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and self.cannot_match(args[0]):
            return None
        return (self._compiled or self.compiled()).search(*args, **kwargs)

    def match(self, *args: Any, **kwargs: Any) -> Any:
        return (self._compiled or self.compiled()).match(*args, **kwargs)

    def fullmatch(self, *args: Any, **kwargs: Any) -> Any:
        return (self._compiled or self.compiled()).fullmatch(*args, **kwargs)

    def findall(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and self.cannot_match(args[0]):
            return []
        return (self._compiled or self.compiled()).findall(*args, **kwargs)

    def finditer(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and self.cannot_match(args[0]):
            return iter(())
        return (self._compiled or self.compiled()).finditer(*args, **kwargs)

    def sub(self, *args: Any, **kwargs: Any) -> Any:
        return (self._compiled or self.compiled()).sub(*args, **kwargs)

    def split(self, *args: Any, **kwargs: Any) -> Any:
        return (self._compiled or self.compiled()).split(*args, **kwargs)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.compiled(), attribute)

    def __repr__(self) -> str:
        return f"LazyPattern({self._source!r}, {self._flags})"


def lazy_compile(pattern: str, flags: int = 0) -> LazyPattern:
    """``re.compile`` deferred to first use (see ``LazyPattern``)."""
    return LazyPattern(pattern, flags)


def lazy_exports(package: str, names: dict[str, str]) -> Any:
    """A module ``__getattr__`` (PEP 562) importing ``package.<submodule>`` for each public name
    on first access: ``__getattr__ = lazy_exports(__name__, {"OpenAIFactory": "backend"})``."""

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
