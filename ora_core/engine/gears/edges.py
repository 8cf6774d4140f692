"""The verification edges a configuration plans, before any turn runs (``ora config check``): who
judges whose output in each gear, as planned (the breadth slot as the diversity rule picks it, the
re-routing ``same_lineage`` would do), and the lineage each edge gets (``ora_core.engine.lineage``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ora_core.engine.backends import BackendPool, RoutedPool
from ora_core.engine.gears.roles import choose_breadth
from ora_core.engine.lineage import ModelIdentity, Relation, planned_identity, policy_of, relation, route
from ora_core.kernel.components import ComponentRegistry
from ora_core.kernel.config import OraConfig


class PlannedEdge(BaseModel):
    """One verification edge of a configuration, as it would run before any turn (planned backends)."""

    model_config = ConfigDict(extra="forbid")

    gear: str  # where the edge is: "2", "3", "4", "5", "2-4" (the model judge)
    edge: str
    author_role: str
    author: ModelIdentity
    judge_role: str
    judge: ModelIdentity | None  # None: no model judges (a non-LLM verifier)
    judge_kind: str  # model | verifier <name> (non-LLM) | verifier <name> (not installed)
    relation: Relation
    reason: str
    outcome: str  # what same_lineage does with it


def _verifier_is_model(host: ComponentRegistry | None, name: str) -> tuple[bool | None, str]:
    if host is None:
        return None, f"{name} (no plugin host)"
    from ora_core.kernel.errors import PluginError

    try:
        verifier = host.get("verifier", name)
    except PluginError:
        return None, f"{name} (not installed)"
    uses = bool(getattr(verifier, "uses_model", False))
    return uses, "model" if uses else f"{name} (non-LLM)"


def planned_edges(config: OraConfig, host: ComponentRegistry) -> list[PlannedEdge]:
    """Every verification edge the configuration plans, with the lineage each gets under its
    ``same_lineage``: the routing a turn would do (``route``) applied to the planned backends."""
    slots = choose_breadth(config, BackendPool(config, host), host)
    # gears 3-4 run the breadth slot on the backend the diversity rule picks (``gears/roles.py``)
    pool = RoutedPool(BackendPool(config, host), {"breadth": slots.breadth})
    policy = policy_of(config)

    def backend_of(role: str) -> str:
        return pool.planned(role)[0]
    verifier_model, verifier_kind = _verifier_is_model(host, config.verification.verifier)
    final_model, final_kind = _verifier_is_model(host, config.verification.final_verifier)
    edges: list[PlannedEdge] = []

    def add(gear: str, edge: str, author_role: str, judge_role: str, kind: str, is_model: bool | None,
            prefer_role: str = "") -> None:
        author = planned_identity(config, backend_of(author_role), author_role)
        if not is_model:
            edges.append(PlannedEdge(gear=gear, edge=edge, author_role=author_role, author=author,
                                     judge_role=judge_role, judge=None, judge_kind=kind, relation="not-a-model",
                                     reason="no model judges this edge", outcome="independent (no model)"))
            return
        prefer = backend_of(prefer_role) if prefer_role else None
        routed, refused = route(config, host, pool, judge_role, author, policy, prefer)
        backend = routed or backend_of(judge_role)
        judge = planned_identity(config, backend, judge_role)
        rel, why = relation(author, judge)
        if refused:
            outcome = f"refused: {refused}"
        elif rel == "different":
            outcome = f"re-routed to {routed}" if routed and routed != prefer else "independent"
        elif policy == "degrade":
            outcome = "labelled; contingency self-verification (the turn cannot end ok)"
        elif policy == "allow":
            outcome = "labelled (allowed)"
        else:
            outcome = "BROKEN (refuse)"
        edges.append(PlannedEdge(gear=gear, edge=edge, author_role=author_role, author=author, judge_role=judge_role,
                                 judge=judge, judge_kind=kind, relation=rel, reason=why, outcome=outcome))

    add("2", "verifier on the analyst", "analyst", "verifier", verifier_kind, verifier_model)
    add("2-3", "verifier on a re-revision", "reviser", "verifier", verifier_kind, verifier_model)
    add("3", "review: breadth reviews depth", "depth", "breadth", "model", True)
    add("3", "verifier on the breadth review", "breadth", "verifier", verifier_kind, verifier_model,
        prefer_role="depth")
    add("4", "cross-evaluation: breadth evaluates depth", "depth", "breadth", "model", True)
    add("4", "cross-evaluation: depth evaluates breadth", "breadth", "depth", "model", True)
    add("4", "cross-verification of the depth stream", "depth", "verifier", verifier_kind, verifier_model,
        prefer_role="breadth")
    add("4", "cross-verification of the breadth stream", "breadth", "verifier", verifier_kind, verifier_model,
        prefer_role="depth")
    add("4", "final verifier on the consolidator", "consolidator", "final_verifier", final_kind, final_model)
    add("5", "reconciler on the advocate", "advocate", "reconciler", "model", True)
    add("5", "reconciler on the challenger", "challenger", "reconciler", "model", True)
    add("5", "verifier on the reconciled verdict", "reconciler", "verifier", verifier_kind, verifier_model,
        prefer_role="advocate")
    if config.pipeline.judge == "model":
        for role in ("analyst", "depth", "breadth", "reviser", "consolidator"):
            add("2-4", f"model judge on the {role}", role, "verifier", "model", True)
    return edges
