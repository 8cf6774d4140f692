"""What a turn's two shared spaces hold after a real turn (Gear 4, first-party plugins): ``turn.data``
only the keys the engine publishes to plugins (``ora_core.kernel.ctx_data``) and the plugins' own,
``turn.stash`` the engine's typed slots."""

from __future__ import annotations

from typing import Any

from ora_core import hookimpl
from ora_core.engine.context import CONTEXT, FENCE
from ora_core.engine.prompts import PHASE_A
from ora_core.kernel.ctx_data import PUBLISHED
from ora_core.kernel.models import ContextPackage, PhaseAResult


class TurnDataRecorder:
    """Records, as a turn ends, what its ``data`` and ``stash`` hold."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.stash: dict[str, Any] = {}

    @hookimpl
    def ora_turn_finished(self, turn: Any, result: Any) -> None:
        self.data = dict(turn.data)
        self.stash = {"phase_a": turn.stash.get(PHASE_A), "context": turn.stash.get(CONTEXT),
                      "fence": turn.stash.get(FENCE)}


def test_after_a_turn_data_holds_only_published_keys_and_the_engines_state_is_in_typed_slots(gears):
    recorder = TurnDataRecorder()
    result, _trace, _ = gears.run(plugins=[recorder])
    assert result.status in ("ok", "degraded"), result
    published = {key.name for key in PUBLISHED}
    assert "modes" in recorder.data and "evidence" in recorder.data
    assert set(recorder.data) <= published, sorted(set(recorder.data) - published)
    assert isinstance(recorder.stash["phase_a"], PhaseAResult)
    assert isinstance(recorder.stash["context"], ContextPackage)
    assert isinstance(recorder.stash["fence"], str) and len(recorder.stash["fence"]) == 8
