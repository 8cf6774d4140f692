"""What the engine puts in ``ctx.data`` for plugins: each key declared once, with its type.

``ctx.data`` is the turn's scratch space that plugins share (a plain ``dict``: a detector reads
``ctx.data["clock"]``, a retriever may keep a cache under a key named after its plugin). The engine
writes the keys below into it, and only these; its own state between steps is in ``turn.stash``
(typed slots, ``kernel/stash.py``), which plugins never need. ``docs/hooks.md`` lists the same keys
(``tests/test_typed_turn.py`` keeps the two equal).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from ora_core.kernel.models import Chunk, EvidencePackage, StepMaterial
    from ora_core.kernel.modes import ModeLibrary

T = TypeVar("T")


class DataKey(Generic[T]):
    """A key of ``ctx.data`` the engine fills: ``name`` is the string plugins read, ``T`` the type of
    its value, ``meaning`` when it is there and what it holds (the line ``docs/hooks.md`` shows)."""

    __slots__ = ("meaning", "name")

    def __init__(self, name: str, meaning: str) -> None:
        self.name = name
        self.meaning = meaning

    def __repr__(self) -> str:
        return f"DataKey({self.name!r})"

    def get(self, data: Mapping[str, Any]) -> T | None:
        value: T | None = data.get(self.name)
        return value

    def put(self, data: MutableMapping[str, Any], value: T) -> None:
        data[self.name] = value

    def drop(self, data: MutableMapping[str, Any]) -> None:
        data.pop(self.name, None)

    @contextmanager
    def given(self, data: MutableMapping[str, Any], value: T) -> Iterator[T]:
        """``value`` under this key for the block (a detection), gone after it."""
        data[self.name] = value
        try:
            yield value
        finally:
            data.pop(self.name, None)


MODES: DataKey[ModeLibrary] = DataKey(
    "modes", "every loaded mode, from Stage 0 on")
CLOCK: DataKey[dict[str, str]] = DataKey(
    "clock", "Gear 1, a time or date question: the system clock reading (`utc` and `local` ISO timestamps, "
    "`timezone`, `utc_offset`)")
CHUNK: DataKey[Chunk] = DataKey(
    "chunk", "`context_package` detectors: the retrieved chunk being screened (its provenance), during its "
    "screening")
EVIDENCE: DataKey[EvidencePackage] = DataKey(
    "evidence", "the detectors of an analytical step's output (gears 2-5) and of a verifier's raw output: the "
    "step's evidence package (it stays until the next step's replaces it)")
MATERIAL: DataKey[StepMaterial] = DataKey(
    "material", "the detectors of an analytical step's output (and of a verifier's `ask_model` reply): what the "
    "step gave its model, during the detection")
EXPECTED_MIN_WORDS: DataKey[int] = DataKey(
    "expected_min_words", "the detectors of a model step's output: the fewest words the step expects (1 in "
    "Gear 1), during the detection")
VERIFIER_QUOTED: DataKey[list[str]] = DataKey(
    "verifier_quoted", "the detectors of a verifier's output: the texts the verifier was shown (its subject, the "
    "evidence), which it may quote, during the detection")

#: Every key the engine writes into ``ctx.data``, in the order ``docs/hooks.md`` lists them.
PUBLISHED: tuple[DataKey[Any], ...] = (MODES, CLOCK, CHUNK, EVIDENCE, MATERIAL, EXPECTED_MIN_WORDS, VERIFIER_QUOTED)
