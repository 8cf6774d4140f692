"""Typed slots on a turn: a ``Stash`` holds one value per ``StashKey[T]``, and the key says its type.

The engine's steps share state through the turn (Phase A's result, the warm-up jobs, the evidence
fence, the fault injector ...). Each such slot is a ``StashKey`` declared once, beside the code
that owns it, with the type of its value: ``turn.stash[PHASE_A]`` is a ``PhaseAResult`` to an editor
and to mypy, and a key nobody declared cannot be read by a misspelt string. Keys are compared by
identity: two keys with the same name are two slots. (The idea is pytest's ``Stash``; this is a
small one of Ora's own.)

Plugins do not use the stash: what the engine hands them is ``ctx.data`` (``kernel/ctx_data.py``).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")
D = TypeVar("D")

__all__ = ["Stash", "StashKey"]


class StashKey(Generic[T]):
    """One slot of a ``Stash`` whose values are ``T``. ``name`` is for messages and ``repr`` only:
    the key itself (its identity) is what finds the value."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StashKey({self.name!r})"


class Stash:
    """Values by ``StashKey``: ``stash[key] = value``, ``stash[key]`` (a ``KeyError`` naming the key
    when nothing is there), ``get``, ``setdefault``, ``pop``, ``del``, ``in``."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[StashKey[Any], object] = {}

    def __setitem__(self, key: StashKey[T], value: T) -> None:
        self._values[key] = value

    def __getitem__(self, key: StashKey[T]) -> T:
        try:
            return self._values[key]  # type: ignore[return-value]  # set only through __setitem__ with a T
        except KeyError:
            raise KeyError(f"nothing is stashed under {key.name!r} in this turn") from None

    @overload
    def get(self, key: StashKey[T]) -> T | None: ...

    @overload
    def get(self, key: StashKey[T], default: D) -> T | D: ...

    def get(self, key: StashKey[T], default: object = None) -> object:
        return self._values.get(key, default)

    def setdefault(self, key: StashKey[T], default: T) -> T:
        """The value under ``key``; ``default`` (stored) when there is none."""
        return self._values.setdefault(key, default)  # type: ignore[return-value]  # a T under a StashKey[T]

    def pop(self, key: StashKey[T], default: D) -> T | D:
        """Remove the value under ``key`` and return it (``default`` when there is none)."""
        return self._values.pop(key, default)  # type: ignore[return-value]  # a T under a StashKey[T]

    def __delitem__(self, key: StashKey[T]) -> None:
        try:
            del self._values[key]
        except KeyError:
            raise KeyError(f"nothing is stashed under {key.name!r} in this turn") from None

    def __contains__(self, key: StashKey[Any]) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Stash({', '.join(k.name for k in self._values)})"
