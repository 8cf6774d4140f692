"""No model judges its own lineage (seed 001's thesis; SPEC, "One turn", 8).

One rule decides whether two models share a lineage (``relation``): the same configured backend,
the same model id (case-insensitive), or the same declared ``family`` is the **same** lineage;
two declared families that differ (and neither backend nor model id shared) are **different**;
a backend that declares no family makes the relation **unknown** — never different.

It is applied to every edge where one model's output is judged, by the model that *actually ran*
on each side (its call records: after fallbacks, the tokens-per-minute guard, a breaker), never
the planned one:

- gears 2-4: the verifier against the analyst, reviewer or reviser whose text it verifies;
- the final verifier against the consolidator (or the corrective reviser);
- the model judge (``pipeline.judge = "model"``) against the step it judges;
- the cascade's cross-evaluation: depth evaluates breadth and breadth evaluates depth;
- the fact-check reconciler against the advocate and the challenger.

``[verification] same_lineage`` says what a same (or unknown) lineage does:

- ``degrade`` (default): the verdict stands, labelled (``lineage: same`` or ``unknown`` and the
  reason, in the verdict's data and the step file); the turn names the contingency
  ``self-verification`` (severity degraded), so it cannot end ``ok`` on that verdict;
- ``refuse``: the edge is re-routed before the call to the first installed backend of another
  lineage (the judging role's fallback chain, then every configured backend in order, as the
  breadth slot does); when none exists, or the model that ran is still not of another lineage,
  the verdict is BROKEN with the reason;
- ``allow``: labelled, no contingency.

A judge that is no model (the grounding verifier, the heuristic judge) has no lineage: its edge is
labelled ``not-a-model``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ora_core.kernel.components import ComponentRegistry
from ora_core.kernel.config import OraConfig
from ora_core.kernel.models import ModelCallRecord
from ora_core.kernel.trace import TurnContext

if TYPE_CHECKING:
    from ora_core.engine.backends import Pool

Relation = Literal["same", "unknown", "different", "not-a-model"]
Policy = Literal["degrade", "refuse", "allow"]
CONTINGENCY = "self-verification"
#: The worse of two relations comes first.
_RANK = {"same": 0, "unknown": 1, "different": 2, "not-a-model": 3}


class ModelIdentity(BaseModel):
    """Who ran (or is planned to run) a model call: the configured backend, its model id and family."""

    model_config = ConfigDict(extra="forbid")

    backend: str
    model: str = ""
    family: str = ""
    provider: str = ""
    role: str = ""

    def label(self) -> str:
        family = self.family or "family undeclared"
        return f"{self.backend} ({self.model or 'no model id'}, {family})"


class LineageCheck(BaseModel):
    """One judged edge, as the trace keeps it (a verdict's ``data["lineage"]``, a step's output)."""

    model_config = ConfigDict(extra="forbid")

    edge: str
    relation: Relation
    reason: str
    policy: Policy
    #: labelled (degrade/allow), re-routed (refuse found another lineage), refused (refuse found none:
    #: the verdict is BROKEN), independent (different lineage, or no model judged)
    action: Literal["labelled", "re-routed", "refused", "independent"]
    author: ModelIdentity | None = None
    judges: list[ModelIdentity] = Field(default_factory=list)
    routed_to: str = ""  # refuse: the backend the edge was re-routed to

    @property
    def flagged(self) -> bool:
        """The edge judged its own (or an unknown) lineage: labelled, and named unless allowed."""
        return self.relation in ("same", "unknown")


def relation(a: ModelIdentity, b: ModelIdentity) -> tuple[Relation, str]:
    """Whether ``a`` and ``b`` share a lineage, and why."""
    if a.backend and a.backend == b.backend:
        return "same", f"same backend ({a.backend!r})"
    if a.model.strip() and a.model.strip().lower() == b.model.strip().lower():
        return "same", f"same model id {a.model!r}"
    fa, fb = a.family.strip().lower(), b.family.strip().lower()
    if fa and fb:
        if fa == fb:
            return "same", f"same family {a.family!r}"
        return "different", f"families {a.family!r} ({a.backend}) and {b.family!r} ({b.backend}) differ"
    undeclared = [x.backend for x in (a, b) if not x.family.strip()]
    return "unknown", (f"backend(s) {', '.join(repr(n) for n in dict.fromkeys(undeclared))} declare no family: "
                       "the lineage is unknown, never counted as different")


def worst(relations: Iterable[tuple[Relation, str]]) -> tuple[Relation, str]:
    """The worst relation of several (same before unknown before different)."""
    found = sorted(relations, key=lambda r: _RANK[r[0]])
    return found[0] if found else ("not-a-model", "no model judged")


def policy_of(config: OraConfig) -> Policy:
    return getattr(config.verification, "same_lineage", "degrade")


def planned_identity(config: OraConfig, backend: str, role: str = "") -> ModelIdentity:
    settings = config.backends.get(backend)
    if settings is None:
        return ModelIdentity(backend=backend, role=role)
    return ModelIdentity(backend=backend, model=settings.model, family=settings.family, provider=settings.type,
                         role=role)


def identity_of(record: ModelCallRecord) -> ModelIdentity:
    """The model that ran a recorded call (``ModelCallRecord``)."""
    return ModelIdentity(backend=record.backend, model=record.effective_model, family=record.family,
                         provider=record.effective_provider, role=record.role)


#: The model judge's calls (``reliability.judge``) are recorded in the step they judge: they are that
#: step's judges, never its author.
JUDGE_PROMPT_KEY = "reliability.judge"


def ran_in(turn: TurnContext, step: str, since: int = 0, *, judge: bool = False) -> list[ModelIdentity]:
    """The models that answered in ``step`` (calls that failed are not judges of anything), from
    the turn's ``since``-th call on: the step's own calls, or (``judge``) the model judge's in it."""
    found = [identity_of(c) for c in turn.calls[since:] if c.step == step and c.error is None and c.backend
             and (c.prompt_key == JUDGE_PROMPT_KEY) == judge]
    unique: dict[tuple[str, str], ModelIdentity] = {}
    for identity in found:
        unique.setdefault((identity.backend, identity.model), identity)
    return list(unique.values())


def author_of(turn: TurnContext, step: str) -> ModelIdentity | None:
    """The model whose output a step handed on: its last call that answered (the model judge's
    calls in it aside)."""
    for record in reversed(turn.calls):
        if record.step == step and record.error is None and record.backend and record.prompt_key != JUDGE_PROMPT_KEY:
            return identity_of(record)
    return None


Authors = ModelIdentity | list[ModelIdentity]


def _authors(author: Authors | None) -> list[ModelIdentity]:
    return [] if author is None else [author] if isinstance(author, ModelIdentity) else list(author)


def against(authors: Authors, judge: ModelIdentity) -> tuple[Relation, str]:
    """The worst relation of ``judge`` to each of ``authors``."""
    return worst(relation(a, judge) for a in _authors(authors))


def alternative(config: OraConfig, host: ComponentRegistry | None, pool: Pool, author: Authors, role: str,
                prefer: str | None = None) -> tuple[str | None, list[dict[str, Any]]]:
    """The first installed backend of a lineage different from every author's for ``role``: ``prefer``
    first (seed 001 step 6: the other stream's backend), then the role's planned backend and its
    fallback chain, then every other configured backend in configuration order. Returns the name
    (None when there is none) and every candidate looked at, with its relation."""
    planned = pool.planned(role)[0]
    order = ([prefer] if prefer else []) + pool.chain(planned)
    order += [n for n in config.backends if n not in order]
    installed = set(host.components("backend")) if host is not None else set()
    candidates = []
    chosen = None
    for name in dict.fromkeys(order):
        settings = config.backends.get(name)
        if settings is None:
            continue
        rel, why = against(author, planned_identity(config, name))
        candidates.append({"backend": name, "installed": settings.type in installed, "relation": rel, "reason": why})
        if chosen is None and rel == "different" and settings.type in installed:
            chosen = name
    return chosen, candidates


def route(config: OraConfig, host: ComponentRegistry | None, pool: Pool, role: str, author: Authors, policy: Policy,
          prefer: str | None = None) -> tuple[str, str]:
    """Where a judging ``role`` runs for one edge, decided before the call: ``(backend, "")`` to
    re-route it for this edge, ``("", "")`` to keep its planned backend, ``("", why)`` when
    ``refuse`` finds no installed backend of another lineage (the edge is then not judged).

    ``prefer`` (a backend) is taken when its lineage differs from the author's (seed 001 step 6:
    each cascade stream verified by the other stream's model). Under ``refuse`` a planned backend
    of the same or an unknown lineage is replaced by ``alternative``'s choice."""
    planned = pool.planned(role)[0]
    if prefer and prefer != planned and against(author, planned_identity(config, prefer))[0] == "different":
        return prefer, ""
    if policy != "refuse" or against(author, planned_identity(config, planned))[0] == "different":
        return "", ""
    chosen, candidates = alternative(config, host, pool, author, role, prefer)
    if chosen is None:
        looked = "; ".join(f"{c['backend']}: {c['relation']}" + ("" if c["installed"] else " (not installed)")
                           for c in candidates)
        return "", (f"same_lineage = 'refuse' and no installed backend of a lineage different from "
                    f"{label(author)} can take the {role} role (looked at: {looked or 'none'})")
    return chosen, ""


def label(author: Authors | None) -> str:
    return " and ".join(a.label() for a in _authors(author)) or "an unrecorded model"


def check(edge: str, author: Authors | None, judges: list[ModelIdentity], policy: Policy, *,
          routed_to: str = "") -> LineageCheck:
    """The edge's lineage, judged by the models that ran on both sides (with several authors, the
    worst pair decides, and ``author`` is that pair's author)."""
    authors = _authors(author)
    if not judges:
        return LineageCheck(edge=edge, relation="not-a-model", policy=policy, action="independent",
                            author=authors[0] if authors else None,
                            reason="no model judged this output (a non-LLM check)")
    if not authors:
        return LineageCheck(edge=edge, relation="unknown", policy=policy, author=None, judges=judges,
                            action="refused" if policy == "refuse" else "labelled",
                            reason="the model that wrote the judged output is not on record")
    pairs = sorted(((relation(a, j), a) for a in authors for j in judges), key=lambda p: _RANK[p[0][0]])
    (rel, why), author = pairs[0]
    if rel == "different":
        action: Any = "re-routed" if routed_to else "independent"
    elif policy == "refuse":
        action = "refused"
    else:
        action = "labelled"
    return LineageCheck(edge=edge, relation=rel, reason=why, policy=policy, action=action, author=author,
                        judges=judges, routed_to=routed_to)


def refused(edge: str, author: Authors | None, config: OraConfig, backend: str, role: str,
            why: str) -> LineageCheck:
    """The check of an edge ``refuse`` did not let run: the planned judge (``backend``) against the
    author, and ``why`` no backend of another lineage could take it."""
    return check(edge, author, [planned_identity(config, backend, role)], "refuse").model_copy(update={"reason": why})


def record(turn: TurnContext, step: str, result: LineageCheck) -> None:
    """Name a flagged edge in the turn: ``self-verification`` (degraded) under ``degrade``; under
    ``refuse`` the caller turns the verdict BROKEN and names ``<step>-lineage-refused``; under
    ``allow`` nothing (the label stays in the step file)."""
    if not result.flagged:
        return
    detail = (f"{result.edge}: {result.relation} lineage ({result.reason}); judge "
              f"{', '.join(j.label() for j in result.judges) or '?'} on output of {label(result.author)}")
    if result.policy == "degrade":
        turn.contingency(CONTINGENCY, step,
                         detail + "; the verdict is kept, labelled, and the turn cannot end ok on it",
                         severity="degraded", edge=result.edge, relation=result.relation)
    elif result.policy == "refuse":
        turn.contingency(f"{step}-lineage-refused", step,
                         detail + "; same_lineage = 'refuse' and no backend of another lineage ran: not verified",
                         severity="degraded", edge=result.edge, relation=result.relation)

