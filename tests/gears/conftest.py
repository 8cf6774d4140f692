"""Helpers for the gear tests: a host with the real first-party plugins registered in process
(no autoload), scripted-backend rules per role, a scripted retriever and a scripted verifier,
and readers for the on-disk trace."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ora_core import hookimpl
from ora_core.kernel.errors import VerifierError
from ora_core.kernel.models import Chunk, EmptyDiagnosis, Provenance, Retrieval, Verdict, VerdictStatus
from ora_core.testing import ComponentsPlugin, make_host, make_runtime, scripted_config

PROMPT = "Cui bono on the harness paradigm shift in commercial AI?"
CLEANED = "Cui bono on the harness paradigm shift in commercial AI: who benefits and who pays?"


def prose(tag: str, words: int = 48) -> str:
    """A healthy, deterministic reply of ``words`` words carrying ``tag``."""
    base = ["the", "evidence", "supports", "a", "careful", "reading", "of", "who", "gains", "and", "who",
            "pays", "as", "harness", "vendors", "bundle", "models", "with", "tooling", "and", "customers",
            "shift", "their", "budgets", "accordingly"]
    body = " ".join(base[i % len(base)] for i in range(words))
    return f"{tag}: {body.capitalize()}."


def reply(tag: str, confidence: float | None = 0.9, extra: str = "") -> str:
    text = prose(tag) + (f"\n\n{extra}" if extra else "")
    return text + (f"\nCONFIDENCE: {confidence:.2f}" if confidence is not None else "")


EVALUATION = "\n".join(f"## {i}. {name}\nNone found beyond the general point that {name.lower()} matter."
                       for i, name in enumerate(["UNSUPPORTED CLAIMS", "SKIPPED INFERENTIAL STEPS",
                                                 "MISPLACED CONFIDENCE", "CONFABULATED SPECIFICS",
                                                 "MISSING CONSIDERATIONS", "CRITERIA CHECK",
                                                 "REQUIRED CHANGES"], 1))
REVISION_RECORD = ("## CRITICISMS ACCEPTED\n- missing stakeholder: end users — added\n"
                   "## CRITICISMS REJECTED\n- motive claim — the analysis never asserts motive")
VERDICT_PASS = "Checked each claim against the evidence package; all are supported.\n\n## VERDICT\nVERDICT: PASS"
VERDICT_FAIL = ("The analysis states a figure the evidence does not hold.\n\n## VERDICT\nVERDICT: FAIL\n"
                "- unsupported figure")

PHASE_A = {"match": "PHASE A CLEANUP", "on": "system",
           "reply": f"CLEANED PROMPT:\n{CLEANED}\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"}


def role(pattern: str, text: str, on: str = "system") -> dict[str, str]:
    return {"match": pattern, "reply": text, "on": on}


def cascade_rules(**over: str) -> list[dict[str, str]]:
    """Rules for a healthy Gear 4 turn; ``over`` replaces a role's reply (keys below)."""
    replies = {
        "depth": reply("DEPTH-ANALYSIS"),
        "breadth": reply("BREADTH-ANALYSIS"),
        "evaluate_depth": EVALUATION + "\nCONFIDENCE: 0.90",
        "evaluate_breadth": EVALUATION + "\nCONFIDENCE: 0.90",
        "revise_depth": reply("DEPTH-REVISED", extra=REVISION_RECORD),
        "revise_breadth": reply("BREADTH-REVISED", extra=REVISION_RECORD),
        "rerevise": reply("RE-REVISED", extra=REVISION_RECORD),
        "consolidate": reply("CONSOLIDATED"),
        "correct": reply("CORRECTED"),
        "verify": VERDICT_PASS,
        "gear2": reply("GEAR2-ANALYSIS"),
        "gear3_depth": reply("GEAR3-DEPTH"),
        "gear3_review": reply("GEAR3-REVIEWED"),
        "gear3_breadth": reply("GEAR3-BREADTH-ALONE"),
    }
    unknown = set(over) - set(replies) - {"first"}
    assert not unknown, f"unknown roles {unknown}"
    replies.update({k: v for k, v in over.items() if k != "first"})
    rules = [PHASE_A]
    rules += list(over.get("first", []))  # type: ignore[arg-type]
    rules += [
        role("ROLE: VERIFIER", replies["verify"]),
        role("ROLE: RE-REVISER", replies["rerevise"]),
        role("ROLE: CORRECTIVE REVISER", replies["correct"]),
        role("ROLE: EVALUATOR.*critiquing the DEPTH", replies["evaluate_depth"]),
        role("ROLE: EVALUATOR.*critiquing the BREADTH", replies["evaluate_breadth"]),
        role("ROLE: REVISER.*the DEPTH stream", replies["revise_depth"]),
        role("ROLE: REVISER.*the BREADTH stream", replies["revise_breadth"]),
        role("ROLE: CONSOLIDATOR", replies["consolidate"]),
        role(r"ROLE: ANALYST \(gear 2\)", replies["gear2"]),
        role(r"ROLE: DEPTH ANALYST \(gear 3\)", replies["gear3_depth"]),
        role(r"ROLE: BREADTH REVIEWER", replies["gear3_review"]),
        role(r"ROLE: BREADTH ANALYST \(gear 3\)", replies["gear3_breadth"]),
        role("ROLE: DEPTH ANALYST", replies["depth"]),
        role("ROLE: BREADTH ANALYST", replies["breadth"]),
    ]
    return rules


def diverse(rules: list[dict[str, str]], *, latency_s: float = 0.0, family: str = "other") -> dict[str, Any]:
    """Config overrides: a second scripted backend of another model for the breadth slot and the final
    verifier (the consolidator runs on ``local``: a model verifier of another lineage checks it)."""
    opts = {"rules": rules, "latency_s": latency_s}
    return {"backends": {"local": {"options": opts},
                         "other": {"type": "scripted", "model": "scripted-2", "family": family, "options": opts}},
            "roles": {"breadth": "other", "final_verifier": "other"}}


class ScriptedRetriever:
    """An in-memory concept index: a chunk matches when it shares a word with the query."""

    def __init__(self, docs: list[dict[str, str]], name: str = "vault", stream: str = "concept") -> None:
        self.name, self.stream, self.docs = name, stream, docs
        self.queries: list[str] = []

    def retrieve(self, query: str, filters: Any, k: int, ctx: Any) -> Retrieval:
        self.queries.append(query)
        words = set(re.findall(r"[a-z0-9]{4,}", query.lower()))
        hits = [d for d in self.docs if words & set(re.findall(r"[a-z0-9]{4,}", d["text"].lower()))]
        chunks = [Chunk(id=f"{self.name}-{i}", text=d["text"],
                        provenance=Provenance(collection=self.name, source=d.get("source", f"notes/{i}.md"),
                                              score=0.8, stream=self.stream))
                  for i, d in enumerate(hits[:k])]
        diagnosis = None if chunks else EmptyDiagnosis(
            empty_reason="index_empty" if not self.docs else "no_match", collection_total_count=len(self.docs))
        return Retrieval(stream=self.stream, query=query, chunks=chunks, empty_diagnosis=diagnosis,
                         retriever=self.name)


class ScriptedVerifier:
    """A registered (non-model) verifier: FAIL while the subject carries ``fail_marker``,
    raise while it carries ``raise_marker``, else PASS."""

    name = "scripted-verifier"

    def __init__(self, fail_marker: str = "[[FAIL]]", raise_marker: str = "[[RAISE]]",
                 returns: Any = None) -> None:
        self.fail_marker, self.raise_marker, self.returns = fail_marker, raise_marker, returns
        self.packages: list[Any] = []

    def verify(self, subject: str, package: Any, criteria: str, ctx: Any) -> Verdict:
        self.packages.append(package)
        if self.returns is not None:
            return self.returns
        if self.raise_marker and self.raise_marker in subject:
            raise VerifierError("the checker's index is corrupt")
        status = VerdictStatus.FAIL if self.fail_marker and self.fail_marker in subject else VerdictStatus.PASS
        return Verdict(status=status, verifier=self.name, reasons=[f"scripted {status.value}"],
                       raw_output=f"scripted {status.value}")


ComponentPlugin = ComponentsPlugin  # an in-process plugin registering retrievers and verifiers


class SpecificsDetectorPlugin:
    """ora-grounding's ``unsupported-specifics`` detector alone (plain Python, no model): what a
    default install runs on every model output, without registering the grounding verifier."""

    @hookimpl
    def ora_register_detectors(self, register: Any) -> None:
        from ora_grounding.detector import UnsupportedSpecificsDetector

        register(UnsupportedSpecificsDetector())


def first_party(*extra: object, inject: bool = True) -> Any:
    import ora_broken
    import ora_bypass
    import ora_evidence_guard
    import ora_health_detectors
    import ora_inject
    import ora_scripted
    import ora_signals
    import ora_trace_fs

    import ora_modes

    plugins: list[object] = [ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs, ora_broken,
                             ora_health_detectors, ora_evidence_guard, SpecificsDetectorPlugin()]
    if inject:
        plugins.append(ora_inject)
    return make_host(*plugins, *extra)


class Trace:
    """Read a turn's trace directory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def step(self, name: str) -> dict[str, Any]:
        matches = sorted(self.path.glob(f"[0-9][0-9]-{name}.json"))
        assert matches, f"no step file for {name!r}: {self.steps()}"
        return json.loads(matches[-1].read_text())

    def has_step(self, name: str) -> bool:
        return bool(list(self.path.glob(f"[0-9][0-9]-{name}.json")))

    def markdown(self, name: str) -> str:
        return sorted(self.path.glob(f"[0-9][0-9]-{name}.md"))[-1].read_text()

    def steps(self) -> list[str]:
        return [p.stem[3:] for p in sorted(self.path.glob("[0-9][0-9]-*.json"))]

    def jsonl(self, name: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.path / name).read_text().splitlines() if line]

    def contingencies(self) -> list[str]:
        return [c["name"] for c in self.jsonl("contingencies.jsonl")]

    def health(self) -> dict[str, Any]:
        return json.loads((self.path / "step-health.json").read_text())

    def step_health(self, name: str) -> dict[str, Any]:
        found = [s for s in self.health()["steps"] if s["step"] == name]
        assert found, f"no health for {name!r}: {[s['step'] for s in self.health()['steps']]}"
        return found[0]

    def turn(self) -> dict[str, Any]:
        return json.loads((self.path / "turn.json").read_text())


@pytest.fixture
def gears(tmp_path: Path) -> Any:
    """``gears.run(rules=..., plugins=[...], prompt=..., mode=..., inject=..., **config)`` ->
    ``(result, Trace, runtime)``."""
    from ora_core.engine import run_turn

    def runtime(*, rules: list[dict[str, str]] | None = None, plugins: list[object] = (),  # type: ignore[assignment]
                inject: bool = True, **config: Any) -> Any:
        config.setdefault("plugins", {}).setdefault("trace-fs", {"fsync": False})
        resolved = scripted_config(tmp_path / "traces", rules=rules if rules is not None else cascade_rules(),
                                   **config)
        return make_runtime(first_party(*plugins, inject=inject), resolved, stderr=io.StringIO())

    def run(*, prompt: str = PROMPT, mode: str | None = "cui-bono", inject_mode: str | None = None,
            **kw: Any) -> tuple[Any, Trace, Any]:
        rt = runtime(**kw)
        result = run_turn(rt, prompt, mode=mode, inject=inject_mode)
        assert result.trace_path, rt.stderr.getvalue()
        return result, Trace(result.trace_path), rt

    return SimpleNamespace(
        run=run, runtime=runtime, tmp_path=tmp_path, Trace=Trace, rules=cascade_rules, reply=reply, prose=prose,
        role=role, diverse=diverse, Retriever=ScriptedRetriever, Verifier=ScriptedVerifier, Plugin=ComponentPlugin,
        EVALUATION=EVALUATION, REVISION_RECORD=REVISION_RECORD, PASS=VERDICT_PASS, FAIL=VERDICT_FAIL,
        PROMPT=PROMPT, CLEANED=CLEANED, PHASE_A=PHASE_A,
    )
