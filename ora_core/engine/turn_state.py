"""The state one analytical turn carries from step to step: ``GearContext``.

It sits beneath everything that takes it (the model-step machinery in ``reliability``, the
verification dispatch, the step prompts, the gears), and imports nothing of theirs, so each of
them names its type without an import cycle. ``GearContext.pool`` is the turn's ``RoutedPool``
(``ora_core.engine.backends``): the shared backend pool with this turn's role overrides.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ora_core.engine.backends import RoutedPool
from ora_core.engine.context import fence_id, fenced, render_evidence
from ora_core.engine.runtime import Runtime
from ora_core.kernel.models import ContextPackage, EvidencePackage, Retrieval
from ora_core.kernel.modes import Mode
from ora_core.kernel.trace import TurnContext

__all__ = ["GearContext"]


@dataclass
class GearContext:
    """One analytical turn (gears 2-5): its runtime and trace, the mode (None when it could not be
    loaded), the context package, the supplement results fetched so far, the verdicts, the warnings
    shipped with the answer, and the pool its steps call through."""

    runtime: Runtime
    turn: TurnContext
    mode: Mode | None
    package: ContextPackage
    gear: int
    overrides: dict[str, str] = field(default_factory=dict)
    supplements: list[Retrieval] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: The pool the steps call through: the runtime's, planned by ``overrides`` (built, never given:
    #: ``dataclasses.replace`` with other overrides builds the copy's own).
    pool: RoutedPool = field(init=False, repr=False)
    #: The answer withheld when it failed verification (``on_fail = "evidence"``); a list, so copies of
    #: the context made for one edge (``dataclasses.replace``) share it.
    withheld: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pool = RoutedPool(self.runtime.pool, self.overrides)

    def section(self, name: str) -> str:
        text = self.package.mode_sections.get(name, "")
        if not text.strip() and self.mode is not None:
            text = self.mode.section(name)
        return text.strip()

    def backend_for(self, role: str) -> str:
        name: str = self.overrides.get(role) or getattr(self.runtime.config.roles, role)
        return name

    def add_supplements(self, retrievals: list[Retrieval]) -> None:
        self.supplements.extend(retrievals)

    def evidence(self) -> EvidencePackage:
        chunks = self.package.chunks() + [c for r in self.supplements for c in r.chunks]
        return EvidencePackage(chunks=chunks, context=self.package, supplements=list(self.supplements),
                               prompt=self.package.cleaned_prompt)

    def evidence_block(self) -> str:
        """The evidence every analytical step of the turn shares: the package's chunks in their
        data fences with provenance, named gaps, and what supplements fetched so far."""
        return render_evidence(self.package, fence=fence_id(self.turn)) + self.supplement_block()

    def supplement_block(self) -> str:
        chunks = [(r.stream, c) for r in self.supplements for c in r.chunks]
        if not chunks:
            return ""
        fence = fence_id(self.turn)
        lines = ["\n\n## SUPPLEMENTAL EVIDENCE (fetched by earlier steps of this turn)"]
        lines += [fenced(chunk, stream, fence) for stream, chunk in chunks]
        return "\n".join(lines)
