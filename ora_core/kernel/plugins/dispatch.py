"""Calling hooks through pluggy, one plugin at a time, and watching the calls (``ORA_DEBUG_HOOKS``).

Each plugin's implementations are called through a pluggy caller of their own
(``pm.subset_hook_caller`` without the other plugins), in the order pluggy calls them across
plugins: a plugin that raises fails alone and is named, and pluggy's ordering
(``tryfirst``/``trylast``, last-registered first), argument handling and hook-call monitoring
apply. A wrapper (``wrapper=True``/``hookwrapper=True``) would wrap only its own plugin's call
under such callers, never the others', so the host refuses it at load.
"""

from __future__ import annotations

import difflib
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

import pluggy

from ora_core.kernel import hookspecs
from ora_core.kernel.plugins.records import describe_exception


def call_order(pm: pluggy.PluginManager, hook_name: str) -> list[pluggy.HookImpl]:
    """The implementations of ``hook_name`` in the order pluggy calls them: ``tryfirst`` ones
    first, then the rest last-registered first, ``trylast`` ones last (pluggy's LIFO order)."""
    return list(reversed(getattr(pm.hook, hook_name).get_hookimpls()))


def call_plugin(pm: pluggy.PluginManager, plugin: object, hook_name: str, **kwargs: Any) -> list[Any]:
    """Call one plugin's implementation(s) of ``hook_name`` through pluggy's own caller (a
    ``subset_hook_caller`` without the other plugins), so pluggy's dispatch, argument handling
    and hook-call monitoring (``ORA_DEBUG_HOOKS``) apply, while a plugin that raises fails
    alone: its caller raises, and the next plugin's call goes on. ``kwargs``: every argument
    the hookspec offers (each implementation takes the ones it names)."""
    others = [p for p in pm.get_plugins() if p is not plugin]
    result: list[Any] = pm.subset_hook_caller(hook_name, remove_plugins=others)(**kwargs)
    return result


def monitor_hook_calls(pm: pluggy.PluginManager, stream: Callable[[], IO[str] | None]) -> None:
    """``ORA_DEBUG_HOOKS=1``: pluggy's hook-call monitoring writes every call to ``stream()`` (None:
    stderr) with its plugin, its module, its duration and how it ended."""
    started: dict[int, list[float]] = {}

    def before(hook_name: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]) -> None:
        started.setdefault(threading.get_ident(), []).append(time.perf_counter())

    def after(outcome: pluggy.Result[Any], hook_name: str, impls: Sequence[pluggy.HookImpl],
              kwargs: Mapping[str, Any]) -> None:
        stack = started.get(threading.get_ident()) or [time.perf_counter()]
        ms = (time.perf_counter() - stack.pop()) * 1000
        raised = outcome.exception
        ended = f"raised {type(raised).__name__}" if raised is not None else "ok"
        who = ", ".join(f"{i.plugin_name} ({getattr(i.function, '__module__', '?') or '?'})" for i in impls)
        out = stream() or sys.stderr
        out.write(f"ora hooks: {hook_name} <- {who or 'no implementation'} {ms:.2f} ms {ended}\n")
        out.flush()

    pm.add_hookcall_monitoring(before, after)


def unknown_hook_message(plugin: object, exc: BaseException) -> str:
    """Name each hook implementation of ``plugin`` that matches no hookspec, with a did-you-mean."""
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
        return f"unknown hook: {describe_exception(exc)}"
    return "unknown hook " + ", ".join(unknown) + f"; known hooks: {', '.join(known)}"
