"""``ora bench``: seed 003's reliability bench on Ora. Documents × inject modes, each scenario a turn.

Every scenario asks the document's question on the ``cui-bono`` mode (Gear 4, the adversarial
cascade), with the document served as the concept stream's evidence by the ``bench-documents``
retriever of the probe pack, and one inject mode (``none`` is the clean baseline). Its trace goes
to ``<run dir>/<document>/<inject>/``; ``bench-run.json`` records the plan. The metrics are then
read back from those files (``bench_metrics.compute_metrics``).

Two ways to run it:

- **scripted** (the default): every role on the offline scripted backend (two of them, so the
  breadth slot has a model of its own), over the bundled default configuration only (no user
  file, no environment overrides), with the heuristic judge and the ``model`` verifier answering
  from the same script. The script is a fixed policy, not the results: the analysts quote their
  document verbatim; when retrieval failed they ask for a supplement and then admit a COVERAGE
  GAP; the evaluators, revisers and consolidator write prose that claims nothing specific; the
  verifier passes. The faults are the injectors'; the figures are whatever the traces then show,
  identical run to run.
- **configured** (``--config``): the same matrix on the user's configuration and models; only the
  retrieval of the documents, the mode and the trace location are the bench's. Not deterministic.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ora_core.engine.app import Ora
from ora_core.engine.gears.prompts import ACCEPTED, EVALUATION_SECTIONS, REJECTED
from ora_core.engine.measure.bench_metrics import MANIFEST, BenchMetrics
from ora_core.kernel.config import DEFAULT_CONFIG_PATH, RolesConfig, deep_merge, load_config, user_data_dir
from ora_core.kernel.errors import OraError

INJECTS: tuple[str, ...] = ("none", "lowconf", "hallucination", "persistent", "coverage", "verifier-exception",
                            "verifier-garbage", "backend-timeout", "rate-limit", "rag-down")
BENCH_MODE = "cui-bono"
RETRIEVER = "bench-documents"
PACK_PLUGIN = "probes-default"
Kind = Literal["scripted", "configured"]

#: Seed 003's published figures (its README, "Measured"): the anchor printed beside Ora's.
SEED_003: dict[str, Any] = {
    "judge_catch_rate": {"value": 1.0, "text": "100% (6/6)"},
    "retry_recovery_rate": {"value": 6 / 9, "text": "66.7% (6/9)"},
    "avg_attempts_at_boundary": {"value": 2.0, "text": "2.0"},
    "deterministic_zero_overhead": {"value": True, "text": "true"},
    "scenario_success_rate": {"value": 9 / 13, "text": "69.2% (9/13)"},
}


class BenchError(Exception):
    """The bench cannot run (no documents, a malformed one, a mode not loaded): the message says why."""


# --- documents ----------------------------------------------------------------------------------------

_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class BenchDocument:
    name: str
    path: Path
    title: str
    question: str
    body: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()

    def sentences(self) -> list[str]:
        flat = " ".join(self.body.split())
        return [s.strip() for s in _SENTENCE.split(flat) if len(s.split()) >= 6]


def load_document(path: Path) -> BenchDocument:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"bench document {path}: cannot be read ({exc})") from None
    match = _FRONT.match(text)
    if match is None:
        raise BenchError(f"bench document {path}: no front matter (title, question)")
    try:
        meta = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as exc:
        raise BenchError(f"bench document {path}: malformed front matter: {exc}") from None
    missing = [k for k in ("title", "question") if not isinstance(meta.get(k), str) or not meta[k].strip()]
    if missing:
        raise BenchError(f"bench document {path}: front matter lacks {', '.join(missing)}")
    doc = BenchDocument(name=path.stem, path=path, title=meta["title"].strip(), question=meta["question"].strip(),
                        body=text[match.end():].strip())
    if len(doc.sentences()) < 4:
        raise BenchError(f"bench document {path}: needs at least four sentences of six words or more to quote")
    return doc


def document_dirs(host: Any, explicit: Iterable[Path | str] = ()) -> list[Path]:
    """``explicit`` directories, else the ``bench/`` directory of every registered probe pack."""
    given = [Path(d).expanduser() for d in explicit]
    if given:
        return given
    packs = sorted(host.components("probe_pack").items()) if host is not None else []
    return [Path(d) / "bench" for _, d in packs if (Path(d) / "bench").is_dir()]


def load_documents(directory: Path) -> list[BenchDocument]:
    if not directory.is_dir():
        raise BenchError(f"bench document directory {str(directory)!r} does not exist")
    docs = [load_document(p) for p in sorted(directory.glob("*.md")) if not p.name.upper().startswith("README")]
    if not docs:
        raise BenchError(f"bench document directory {directory} holds no document (*.md other than README)")
    return docs


# --- the scripted model -------------------------------------------------------------------------------------

def _prose(lead: str, title: str) -> str:
    return (f"{lead} on the note about {title.lower()}: it keeps to what the note says about who gains and who "
            "pays, and it names each group only where the note does. the reasoning follows the mechanism the "
            "note describes step by step, and where the note is silent the text says so instead of filling "
            "the gap from memory.")


def _confident(text: str) -> str:
    return text + "\nCONFIDENCE: 0.90"


def scripted_rules(doc: BenchDocument) -> list[dict[str, str]]:
    """The script every role follows for ``doc`` (module docstring): the first matching rule wins."""
    s = doc.sentences()
    title = doc.title
    evaluation = "\n".join(f"## {i}. {name}\nNone found beyond the general point that {name.lower()} matter."
                           for i, name in enumerate(EVALUATION_SECTIONS, 1))
    record = (f"## {ACCEPTED}\n- the critique's request to name the limits of the note: added\n"
              f"## {REJECTED}\n- none")
    gap = _confident(f"## COVERAGE GAP\nThe note about {title.lower()} could not be retrieved, and the "
                     "supplement found nothing either. Without it there is no evidence in front of me about who "
                     "gains and who pays, so this analysis names the gap instead of answering from memory; "
                     "every claim about the groups involved would be a guess.")
    request = ("## SUPPLEMENTAL RAG REQUEST\n"
               f"Gap: the note about {title.lower()} is missing from the evidence package\n"
               f"Query terms: {title}\n"
               "Why: the analysis rests on what that note says")

    def analyst(lead: str, quotes: list[str]) -> str:
        lines = "\n".join(f'> "{q}"' for q in quotes)
        return _confident(f"{_prose(lead, title)}\n\n{lines}")

    def role(pattern: str, reply: str, on: str = "system") -> dict[str, str]:
        return {"match": pattern, "reply": reply, "on": on}

    prose = _confident(_prose("The analysis", title))
    return [
        role("PHASE A CLEANUP", f"CLEANED PROMPT:\n{doc.question}\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"),
        role(r"(?s)ROLE: (?:DEPTH |BREADTH )?ANALYST.*## SUPPLEMENTAL RAG RESULT", gap, on="any"),
        role(r"(?s)\] retrieval FAILED.*ROLE: (?:DEPTH |BREADTH )?ANALYST", request),
        role("ROLE: VERIFIER", "Checked each claim against the evidence package; none goes beyond it.\n\n"
                               "## VERDICT\nVERDICT: PASS"),
        role("ROLE: RE-REVISER", _confident(f"{_prose('The re-revised analysis', title)}\n\n{record}")),
        role("ROLE: CORRECTIVE REVISER", _confident(_prose("The corrected answer", title))),
        role("ROLE: EVALUATOR", _confident(evaluation)),
        role("ROLE: REVISER", _confident(f"{_prose('The revised analysis', title)}\n\n{record}")),
        role("ROLE: CONSOLIDATOR", _confident(_prose("The consolidated answer", title))),
        role("ROLE: BREADTH REVIEWER", prose),
        role("ROLE: DEPTH ANALYST", analyst("The depth analysis", s[0:2])),
        role("ROLE: BREADTH ANALYST", analyst("The breadth analysis", s[2:4])),
        role("ROLE: ANALYST", analyst("The analysis", s[0:2])),
    ]


def scripted_overrides(doc: BenchDocument) -> dict[str, Any]:
    rules = scripted_rules(doc)
    backends = {name: {"type": "scripted", "model": f"bench-scripted-{name[-1]}", "family": f"bench-{name[-1]}",
                       "options": {"rules": rules, "default": _confident(_prose("The answer", doc.title))}}
                for name in ("bench-a", "bench-b")}
    roles = {role: "bench-a" for role in RolesConfig.model_fields}
    # two families, so that no model judges its own output: the breadth slot and the final verifier
    # (which checks the consolidator's answer, written on bench-a) on bench-b
    roles["breadth"] = roles["final_verifier"] = "bench-b"
    return {"backends": backends, "roles": roles,
            "verification": {"verifier": "model", "final_verifier": "model"},
            "pipeline": {"judge": "heuristic", "warmup": False, "best_guess": False},
            "plugins": {"trace-fs": {"fsync": False}}}


def bench_overrides(doc: BenchDocument, trace_root: Path) -> dict[str, Any]:
    """What every scenario sets whatever the models: the document as concept evidence, one stream,
    the trace in the scenario's own directory (committed before the turn returns)."""
    return {"retrieval": {"streams": {"concept": True, "conversation": False, "relationship": False, "web": False},
                          "retrievers": {"concept": RETRIEVER}},
            "plugins": {PACK_PLUGIN: {"bench_documents": str(doc.path.parent)}},
            "pipeline": {"conversation_id": "bench"},
            "trace": {"enabled": True, "root": str(trace_root), "durability": "turn"}}


def scenario_config(doc: BenchDocument, trace_root: Path, kind: Kind, config_path: str | Path | None) -> Any:
    overrides = bench_overrides(doc, trace_root)
    if kind == "scripted":
        return load_config(DEFAULT_CONFIG_PATH, env={}, overrides=deep_merge(scripted_overrides(doc), overrides))
    return load_config(config_path, overrides=overrides)


def bench_hash(docs: list[BenchDocument], injects: Iterable[str], kind: Kind, base_hash: str) -> str:
    """A hash of what the figures depend on: the base configuration, the documents' bytes, the
    inject modes, the kind of run and the scripted overrides (paths of this run left out)."""
    plan = {"kind": kind, "base": base_hash, "injects": list(injects), "mode": BENCH_MODE,
            "documents": {d.name: d.sha256 for d in docs},
            "scripted": {d.name: scripted_overrides(d) for d in docs} if kind == "scripted" else None}
    return hashlib.sha256(json.dumps(plan, sort_keys=True, default=str).encode()).hexdigest()[:16]


# --- running --------------------------------------------------------------------------------------------------

class ScenarioRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    document: str
    inject: str
    trace_root: str  # relative to the run directory
    error: str | None = None  # the scenario could not run (named); its figures are missing
    duration_s: float = 0.0


class BenchRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ora_version: str
    kind: Kind
    deterministic: bool
    bench_hash: str
    base_config_hash: str
    config_sources: list[str]
    started_at: str
    duration_s: float = 0.0
    documents: dict[str, str]  # name -> sha256
    injects: list[str]
    scenarios: list[ScenarioRecord] = Field(default_factory=list)


def default_out_dir() -> Path:
    return user_data_dir() / "bench-runs" / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


def run_bench(host: Any, docs: list[BenchDocument], out_dir: Path, *, kind: Kind = "scripted",
              config_path: str | Path | None = None, injects: Iterable[str] = INJECTS, version: str = "",
              on_start: Callable[[str, str, int, int], None] | None = None,
              on_event: Callable[[Any], None] | None = None,
              on_done: Callable[[ScenarioRecord], None] | None = None) -> BenchRun:
    """Run every document × inject scenario; write ``bench-run.json``; return the plan as run."""
    injects = list(injects)
    known = set(host.components("fault_injector")) | {"none"}
    unknown = [i for i in injects if i not in known]
    if unknown:
        raise BenchError(f"unknown inject mode(s) {', '.join(unknown)}; registered: {', '.join(sorted(known))}")
    if RETRIEVER not in host.components("retriever"):
        raise BenchError(f"the {RETRIEVER!r} retriever is not registered: the {PACK_PLUGIN} plugin (the bundled "
                         "probe pack) provides it; is it disabled?")
    base = load_config(DEFAULT_CONFIG_PATH, env={}) if kind == "scripted" else load_config(config_path)
    run = BenchRun(ora_version=version, kind=kind, deterministic=kind == "scripted",
                   bench_hash=bench_hash(docs, injects, kind, base.hash), base_config_hash=base.hash,
                   config_sources=base.sources, started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   documents={d.name: d.sha256 for d in docs}, injects=injects)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    total = len(docs) * len(injects)
    number = 0
    for doc in docs:
        for inject in injects:
            number += 1
            if on_start is not None:
                on_start(doc.name, inject, number, total)
            record = _run_scenario(host, doc, inject, out_dir, kind, config_path, on_event)
            run.scenarios.append(record)
            if on_done is not None:
                on_done(record)
    run.duration_s = round(time.perf_counter() - started, 3)
    (out_dir / MANIFEST).write_text(run.model_dump_json(indent=2), encoding="utf-8")
    return run


def _run_scenario(host: Any, doc: BenchDocument, inject: str, out_dir: Path, kind: Kind,
                  config_path: str | Path | None, on_event: Callable[[Any], None] | None) -> ScenarioRecord:
    started = time.perf_counter()
    rel = f"{doc.name}/{inject}"
    record = ScenarioRecord(document=doc.name, inject=inject, trace_root=rel)
    try:
        resolved = scenario_config(doc, out_dir / rel, kind, config_path)
        ora = Ora(host=host, config=resolved, stderr=io.StringIO())
        if BENCH_MODE not in ora.runtime.modes:
            loaded = ", ".join(sorted(ora.runtime.modes.modes)) or "none"
            raise BenchError(f"mode {BENCH_MODE!r} is not loaded (loaded: {loaded})")
        asyncio.run(ora.arun(doc.question, mode=BENCH_MODE, inject=None if inject == "none" else inject,
                             on_event=on_event))
    except (OraError, BenchError) as exc:
        record.error = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a crashed scenario is named in the plan and in the metrics
        record.error = f"the turn crashed: {type(exc).__name__}: {exc}"
    record.duration_s = round(time.perf_counter() - started, 3)
    return record


# --- results files, comparison ------------------------------------------------------------------------------

class BenchResults(BaseModel):
    """What ``--save`` writes and ``--compare`` reads."""

    model_config = ConfigDict(extra="forbid")

    ora_version: str
    bench_hash: str
    base_config_hash: str
    kind: Kind
    deterministic: bool
    saved_at: str
    run_dir: str
    figures: dict[str, Any]
    per_inject: dict[str, dict[str, Any]]
    seed_003: dict[str, Any] = Field(default_factory=lambda: dict(SEED_003))


def results_of(run: BenchRun, metrics: BenchMetrics, run_dir: Path) -> BenchResults:
    return BenchResults(ora_version=run.ora_version, bench_hash=run.bench_hash, base_config_hash=run.base_config_hash,
                        kind=run.kind, deterministic=run.deterministic,
                        saved_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), run_dir=str(run_dir),
                        figures=metrics.figures(),
                        per_inject={o.inject: {"scenarios": o.scenarios, "statuses": dict(o.statuses),
                                               "designed_held": o.designed_held, "caught": o.caught,
                                               "planted": o.planted} for o in metrics.per_inject})


def load_results(path: Path) -> BenchResults:
    try:
        return BenchResults.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BenchError(f"--compare {str(path)!r} cannot be read: {exc}") from None
    except ValueError as exc:
        raise BenchError(f"--compare {str(path)!r} is not a bench results file: {exc}") from None


def compare(current: BenchResults, previous: BenchResults) -> list[dict[str, Any]]:
    """One row per headline figure and per inject mode's designed-path count: before, now, delta."""
    rows = []
    for key in sorted(set(current.figures) | set(previous.figures)):
        now, before = current.figures.get(key), previous.figures.get(key)
        delta: Any = None
        if isinstance(now, int | float) and isinstance(before, int | float) and not isinstance(now, bool):
            delta = round(now - before, 4)
        elif now != before:
            delta = f"{before} -> {now}"
        rows.append({"figure": key, "before": before, "now": now, "delta": delta})
    for inject in sorted(set(current.per_inject) | set(previous.per_inject)):
        now = current.per_inject.get(inject, {}).get("designed_held")
        before = previous.per_inject.get(inject, {}).get("designed_held")
        delta = now - before if isinstance(now, int) and isinstance(before, int) else None
        rows.append({"figure": f"designed path held: {inject}", "before": before, "now": now, "delta": delta})
    return rows
