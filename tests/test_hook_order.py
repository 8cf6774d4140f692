"""Hooks are dispatched through pluggy's callers, in pluggy's order: ``tryfirst`` implementations first,
``trylast`` ones last, the rest last-registered first (pluggy's LIFO) — while a plugin that raises
fails alone (its call is its own ``subset_hook_caller``) and ``ORA_DEBUG_HOOKS`` is pluggy's
hook-call monitoring."""

from __future__ import annotations

import io
from typing import Any

import pytest
import typer

from ora_core import hookimpl
from ora_core.testing import make_host

ORDER_SPEC = [("first-registered", {}), ("tryfirst", {"tryfirst": True}), ("middle", {}),
              ("trylast", {"trylast": True}), ("last-registered", {})]
PLUGGY_ORDER = ["tryfirst", "last-registered", "middle", "first-registered", "trylast"]


def _observer(name: str, order: list[str], fail: bool = False, **flags: Any) -> object:
    class Observer:
        @hookimpl(**flags)
        def ora_turn_started(self, turn: Any) -> None:
            order.append(name)
            if fail:
                raise RuntimeError(f"{name} broke")

    return Observer()


def _host(order: list[str], failing: str = "") -> Any:
    host = make_host()
    for name, flags in ORDER_SPEC:
        host.register_plugin(_observer(name, order, fail=name == failing, **flags), name=name)
    return host


def test_observers_run_tryfirst_first_trylast_last_and_otherwise_last_registered_first():
    order: list[str] = []
    _host(order).call_observers("ora_turn_started", lambda plugin, exc: None, turn=object())
    assert order == PLUGGY_ORDER


def test_the_order_is_the_one_pluggy_itself_calls():
    ours: list[str] = []
    _host(ours).call_observers("ora_turn_started", lambda plugin, exc: None, turn=object())
    theirs: list[str] = []
    _host(theirs).pm.hook.ora_turn_started(turn=object())
    assert ours == theirs


def test_a_plugin_that_raises_fails_alone_and_is_named():
    order: list[str] = []
    failures: list[tuple[str, str]] = []
    _host(order, failing="middle").call_observers(
        "ora_turn_started", lambda plugin, exc: failures.append((plugin, str(exc))), turn=object())
    assert order == PLUGGY_ORDER  # the ones after it ran too
    assert failures == [("middle", "middle broke")]


def test_commands_are_registered_in_pluggy_order():
    order: list[str] = []

    def commands(name: str, **flags: Any) -> object:
        class Commands:
            @hookimpl(**flags)
            def ora_register_commands(self, cli: Any, ora: Any) -> None:
                order.append(name)

        return Commands()

    host = make_host()
    for name, flags in ORDER_SPEC:
        host.register_plugin(commands(name, **flags), name=name)
    host.register_commands(typer.Typer(), None)
    assert order == PLUGGY_ORDER


def test_debug_hooks_is_pluggy_s_monitoring_naming_the_plugin_and_how_it_ended():
    order: list[str] = []
    host = make_host(env={"ORA_DEBUG_HOOKS": "1"})
    host.debug_stream = io.StringIO()
    for name, flags in ORDER_SPEC[:2]:
        host.register_plugin(_observer(name, order, fail=name == "tryfirst", **flags), name=name)
    host.call_observers("ora_turn_started", lambda plugin, exc: None, turn=object())
    lines = [line for line in host.debug_stream.getvalue().splitlines() if "ora_turn_started" in line]
    assert len(lines) == 2
    assert lines[0].startswith("ora hooks: ora_turn_started <- tryfirst (") and lines[0].endswith("raised RuntimeError")
    assert lines[1].startswith("ora hooks: ora_turn_started <- first-registered (") and lines[1].endswith(" ms ok")
    with pytest.raises(RuntimeError):  # a call straight through pluggy: monitored too (and not isolated)
        host.pm.hook.ora_turn_started(turn=object())
    last = host.debug_stream.getvalue().splitlines()[-1]
    assert "<- first-registered (" in last and "tryfirst (" in last and last.endswith("raised RuntimeError")
