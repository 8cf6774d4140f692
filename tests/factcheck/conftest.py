"""Helpers for the fact-check tests: an evidence retriever whose chunks carry a source type and a
direction label, a non-LLM verifier, scripted replies for each debate role, a host with the real
first-party plugins registered in process (no autoload), and a reader for the on-disk trace."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ora_core import hookimpl
from ora_core.kernel.errors import RetrievalError
from ora_core.kernel.models import Chunk, EmptyDiagnosis, Provenance, Retrieval, Verdict, VerdictStatus
from ora_core.testing import ComponentsPlugin, make_host, make_runtime, scripted_config

CLAIM = "Nuclear energy is safe enough to be part of the energy mix."
PHASE_A = {"match": "PHASE A CLEANUP", "on": "system",
           "reply": f"CLEANED PROMPT:\n{CLAIM}\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"}
CONTRARIAN_MARKERS = ("evidence against the claim", "evidence for the claim", "disputed", "confirmed")


def doc(n: int, source_type: str, direction: str | None = None, *, text: str = "") -> dict[str, Any]:
    """An evidence note of at least 40 characters, numbered ``n``."""
    body = text or f"Item {n}: a report on reactor safety records and incident rates over several decades."
    return {"text": body, "source": f"notes/item-{n}.md", "source_type": source_type, "direction": direction}


def pool(*specs: tuple[int, str, str | None]) -> list[dict[str, Any]]:
    """``pool((3, "government_report", "supports"), ...)``: that many docs of each kind, numbered on."""
    docs: list[dict[str, Any]] = []
    for count, source_type, direction in specs:
        for _ in range(count):
            docs.append(doc(len(docs) + 1, source_type, direction))
    return docs


class EvidenceRetriever:
    """The concept stream: every doc, up to ``k``; a query carrying a contrarian template's words
    gets ``contrarian`` docs instead (or raises, with ``fail_contrarian``). ``latency_s`` is what
    each retrieval reports taking."""

    name = "evidence-vault"
    stream = "concept"

    def __init__(self, docs: list[dict[str, Any]], *, contrarian: list[dict[str, Any]] = (),  # type: ignore[assignment]
                 latency_s: float = 0.0, fail_contrarian: bool = False) -> None:
        self.docs, self.contrarian = docs, list(contrarian)
        self.latency_s, self.fail_contrarian = latency_s, fail_contrarian
        self.queries: list[str] = []

    @staticmethod
    def is_contrarian(query: str) -> bool:
        return any(m in query for m in CONTRARIAN_MARKERS)

    def retrieve(self, query: str, filters: Any, k: int, ctx: Any) -> Retrieval:
        self.queries.append(query)
        contrarian = self.is_contrarian(query)
        if contrarian and self.fail_contrarian:
            raise RetrievalError("evidence-vault: the index shard for this query is offline")
        docs = self.contrarian if contrarian else self.docs
        prefix = "c" if contrarian else "r"
        chunks = [Chunk(id=f"{prefix}-{d['source']}", text=d["text"], provenance=Provenance(
            collection="facts", source=d["source"], source_type=d["source_type"], score=0.8, stream=self.stream,
            extra={"direction": d["direction"]} if d.get("direction") else {})) for d in docs[:k]]
        diagnosis = None if chunks else EmptyDiagnosis(empty_reason="no_match", collection_total_count=len(docs))
        return Retrieval(stream=self.stream, query=query, chunks=chunks, empty_diagnosis=diagnosis,
                         retriever=self.name, latency_s=self.latency_s)

    def research_queries(self) -> list[str]:
        return [q for q in self.queries if not self.is_contrarian(q)]

    def contrarian_queries(self) -> list[str]:
        return [q for q in self.queries if self.is_contrarian(q)]


class GroundingStandIn:
    """A non-LLM verifier registered like ora-grounding: FAIL when the subject holds ``fail_marker``."""

    name = "stand-in-grounding"

    def __init__(self, fail_marker: str = "[[UNGROUNDED]]") -> None:
        self.fail_marker = fail_marker
        self.subjects: list[str] = []
        self.packages: list[Any] = []

    def verify(self, subject: str, package: Any, criteria: str, ctx: Any) -> Verdict:
        self.subjects.append(subject)
        self.packages.append(package)
        failed = self.fail_marker in subject
        return Verdict(status=VerdictStatus.FAIL if failed else VerdictStatus.PASS, verifier=self.name,
                       reasons=["a statement the evidence lacks" if failed else "every statement found"],
                       score=0.1 if failed else 0.9)


Components = ComponentsPlugin  # an in-process plugin registering retrievers and verifiers


def verdict(truth: int, certainty: int, cited: str = "E1, E2",
            reasoning: str = "Items E1 and E2 describe the safety record the claim rests on.") -> str:
    return f"```\nTRUTH: {truth}\nCERTAINTY: {certainty}\nCITED: {cited}\n```\n{reasoning}\nCONFIDENCE: 0.90"


def fenced(*lines: str, prose: str = "The block above is my answer.") -> str:
    return "```\n" + "\n".join(lines) + f"\n```\n{prose}\nCONFIDENCE: 0.90"


NO_POINTS = fenced("POINT: none", prose="I checked the advocate's reading against my items.")
VALID = fenced("GROUNDED: yes", "DIRECTION: consistent", "ISSUES: none", prose="The reasoning names its items.")


def role(pattern: str, reply: str, on: str = "system") -> dict[str, str]:
    return {"match": pattern, "reply": reply, "on": on}


def debate_rules(*, advocate: str = verdict(70, 80), runs: tuple[str, ...] = (verdict(70, 80), verdict(72, 80)),
          challenger: str = NO_POINTS, reconciler: str | None = None, validation: str = VALID,
          directions: str = fenced("E1: supports"), first: list[dict[str, str]] = ()) -> list[dict[str, str]]:  # type: ignore[assignment]
    """Scripted replies, one per debate role (``first``: rules tried before them)."""
    return [PHASE_A, *first,
            *[role(f"SELF-CONSISTENCY RUN {i} OF", reply) for i, reply in enumerate(runs, 1)],
            role(r"ROLE: FACT-CHECK ADVOCATE\.", advocate),
            role("ROLE: FACT-CHECK CHALLENGER", challenger),
            role("ROLE: FACT-CHECK RECONCILER", reconciler if reconciler is not None else advocate),
            role("ROLE: FACT-CHECK VALIDATOR", validation),
            role("ROLE: EVIDENCE DIRECTION LABELLER", directions)]


class Trace:
    """Read a turn's trace directory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def step(self, name: str) -> dict[str, Any]:
        matches = sorted(self.path.glob(f"[0-9][0-9]-{name}.json"))
        assert matches, f"no step file for {name!r}: {self.steps()}"
        return json.loads(matches[-1].read_text())

    def steps(self) -> list[str]:
        return [p.stem[3:] for p in sorted(self.path.glob("[0-9][0-9]-*.json"))]

    def jsonl(self, name: str) -> list[dict[str, Any]]:
        path = self.path / name
        return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []

    def contingencies(self) -> list[str]:
        return [c["name"] for c in self.jsonl("contingencies.jsonl")]

    def turn(self) -> dict[str, Any]:
        return json.loads((self.path / "turn.json").read_text())


def first_party(*extra: object) -> Any:
    import ora_broken
    import ora_bypass
    import ora_evidence_guard
    import ora_health_detectors
    import ora_inject
    import ora_scripted
    import ora_signals
    import ora_trace_fs
    from ora_grounding.detector import UnsupportedSpecificsDetector

    import ora_modes

    class Specifics:
        @hookimpl
        def ora_register_detectors(self, register: Any) -> None:
            register(UnsupportedSpecificsDetector())

    return make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs, ora_broken, ora_health_detectors,
                     ora_evidence_guard, ora_inject, Specifics(), *extra)


@pytest.fixture
def fc(tmp_path: Path) -> Any:
    """``fc.run(docs=..., rules=..., prompt=..., fact_check={...}, **config)`` ->
    ``(result, Trace, runtime, retriever, verifier)``."""
    from ora_core.engine import run_turn

    def runtime(*, rules_: list[dict[str, str]], retriever: Any, verifier: Any, **config: Any) -> Any:
        config.setdefault("plugins", {}).setdefault("trace-fs", {"fsync": False})
        config.setdefault("verification", {"verifier": verifier.name})
        retrieval = config.setdefault("retrieval", {})
        retrieval.setdefault("k", 12)
        retrieval.setdefault("streams", {"conversation": False, "relationship": False})
        config.setdefault("fact_check", {}).setdefault("direction", "provenance")
        resolved = scripted_config(tmp_path / "traces", rules=rules_, **config)
        host = first_party(Components(retrievers=[retriever], verifiers=[verifier]))
        return make_runtime(host, resolved, stderr=io.StringIO())

    def run(*, docs: list[dict[str, Any]] | None = None, rules: list[dict[str, str]] | None = None,
            prompt: str = CLAIM, retriever: Any = None, verifier: Any = None, inject: str | None = None,
            **config: Any) -> tuple[Any, ...]:
        retriever = retriever or EvidenceRetriever(docs if docs is not None else pool(
            (3, "government_report", "supports"), (3, "news_primary", "contradicts")))
        verifier = verifier or GroundingStandIn()
        rt = runtime(rules_=rules if rules is not None else debate_rules(), retriever=retriever,
                     verifier=verifier, **config)
        result = run_turn(rt, prompt, mode="fact-check", inject=inject)
        assert result.trace_path, rt.stderr.getvalue()
        return result, Trace(result.trace_path), rt, retriever, verifier

    return SimpleNamespace(run=run, runtime=runtime, pool=pool, doc=doc, verdict=verdict, rules=debate_rules,
                           role=role, fenced=fenced, Retriever=EvidenceRetriever, Verifier=GroundingStandIn,
                           CLAIM=CLAIM, NO_POINTS=NO_POINTS, VALID=VALID, PHASE_A=PHASE_A)
