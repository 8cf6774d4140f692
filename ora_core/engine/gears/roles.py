"""Role slots: the breadth slot excludes the depth slot's model (seed 001's selection constraint).

The rule, applied when gears 3 and 4 start (a deterministic step, ``role-slots``):

1. Depth runs on ``roles.depth``. Breadth runs on ``roles.breadth`` unless that backend is the
   same lineage as depth's: the same backend, the same model id (case-insensitive), or the
   same ``family`` when both backends declare one.
2. Then the candidates, in order: ``roles.breadth``'s fallback chain (its ``fallbacks``,
   followed transitively), then every other configured backend in configuration order. The
   first whose backend type is installed and whose lineage differs from depth's takes the
   breadth slot for this turn (contingency ``breadth-slot-substituted-for-diversity``).
3. When no candidate differs, the turn still runs on ``roles.breadth`` and records the
   contingency ``diversity-unavailable`` (degraded: the cascade's two streams share a model).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ora_core.engine.backends import BackendPool
from ora_core.engine.lineage import ModelIdentity, relation
from ora_core.engine.turn_state import GearContext
from ora_core.kernel.components import ComponentRegistry
from ora_core.kernel.config import BackendConfig, OraConfig
from ora_core.kernel.stash import StashKey

STEP = "role-slots"


class Candidate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: str
    model: str
    family: str
    installed: bool
    same_lineage: str  # why it matches depth ("" when it differs)


class SlotChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    depth: str
    depth_model: str
    depth_family: str
    breadth_configured: str
    breadth: str
    breadth_model: str
    breadth_family: str
    diversity: str  # ok | substituted | unavailable
    reason: str = ""
    candidates: list[Candidate] = Field(default_factory=list)


def same_lineage(a_name: str, a: BackendConfig, b_name: str, b: BackendConfig) -> str:
    """Why backends ``a`` and ``b`` count as the same model for diversity ("" if they do not): the
    lineage rule (``ora_core.engine.lineage.relation``). A slot whose lineage is only unknown (a
    family undeclared) is not excluded here; the verification edges label it (``lineage``)."""
    rel, why = relation(ModelIdentity(backend=a_name, model=a.model, family=a.family),
                        ModelIdentity(backend=b_name, model=b.model, family=b.family))
    return why if rel == "same" else ""


def choose_breadth(config: OraConfig, pool: BackendPool, host: ComponentRegistry | None) -> SlotChoice:
    """Which backend takes the breadth slot (the rule above), from the configuration, the pool's fallback
    chains and the backend types ``host`` has installed."""
    depth_name, breadth_name = config.roles.depth, config.roles.breadth
    depth, breadth = config.backends[depth_name], config.backends[breadth_name]
    clash = same_lineage(depth_name, depth, breadth_name, breadth)
    base = dict(depth=depth_name, depth_model=depth.model, depth_family=depth.family,
                breadth_configured=breadth_name)
    if not clash:
        return SlotChoice(**base, breadth=breadth_name, breadth_model=breadth.model, breadth_family=breadth.family,
                          diversity="ok", reason="roles.breadth differs from roles.depth")
    installed = set(host.components("backend")) if host is not None else set()
    order = [n for n in pool.chain(breadth_name)[1:]]
    order += [n for n in config.backends if n not in order and n not in (depth_name, breadth_name)]
    candidates = []
    for name in order:
        settings = config.backends[name]
        candidates.append(Candidate(backend=name, model=settings.model, family=settings.family,
                                    installed=settings.type in installed,
                                    same_lineage=same_lineage(depth_name, depth, name, settings)))
    chosen = next((c for c in candidates if c.installed and not c.same_lineage), None)
    if chosen is None:
        return SlotChoice(**base, breadth=breadth_name, breadth_model=breadth.model, breadth_family=breadth.family,
                          diversity="unavailable", candidates=candidates,
                          reason=f"roles.breadth ({breadth_name}) has the {clash} as roles.depth ({depth_name}) "
                                 f"and no other configured backend of a different model is installed")
    return SlotChoice(**base, breadth=chosen.backend, breadth_model=chosen.model, breadth_family=chosen.family,
                      diversity="substituted", candidates=candidates,
                      reason=f"roles.breadth ({breadth_name}) has the {clash} as roles.depth ({depth_name}); "
                             f"{chosen.backend} ({chosen.model}) is the first candidate of a different model")


#: The breadth slot chosen for this turn (``resolve_slots``, gears 3 and 4).
ROLE_SLOTS: StashKey[SlotChoice] = StashKey("role_slots")


def resolve_slots(gc: GearContext) -> SlotChoice:
    """The deterministic ``role-slots`` step: pick the breadth backend and route it for the turn."""
    turn = gc.turn
    with turn.step(STEP, kind="deterministic", gear=gc.gear, depth=gc.runtime.config.roles.depth,
                   breadth=gc.runtime.config.roles.breadth) as step:
        step.health.kind = "deterministic"
        choice = choose_breadth(gc.runtime.config, gc.runtime.pool, turn.host)
        if choice.diversity == "substituted":
            gc.overrides["breadth"] = choice.breadth
            step.contingency("breadth-slot-substituted-for-diversity", choice.reason, severity="info",
                             configured=choice.breadth_configured, chosen=choice.breadth)
        elif choice.diversity == "unavailable":
            step.contingency("diversity-unavailable", choice.reason, severity="degraded",
                             depth=choice.depth, breadth=choice.breadth)
        step.output.update(choice.model_dump(mode="json"))
    turn.stash[ROLE_SLOTS] = choice
    return choice
