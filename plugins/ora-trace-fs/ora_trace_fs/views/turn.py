"""One turn as a page: what the turn view shows, built from the trace files on disk.

Failure first: the steps that went wrong (FAIL, BROKEN, degraded) head the page and are open
where they stand in the pipeline; a verification step shows its verdict, reasons and unsupported
claims beside the evidence chunks it was checked against (with provenance). Every model output
and chunk is carried here as plain text; the template escapes it (autoescape), nothing here
marks anything safe.

A file that cannot be read is named on the page (``problems``) and the rest is still shown.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from ora_core.api.html import svg

from ..index import LOG_NAMES, step_stream
from ..reading import TraceReadError, load_json, open_turn_status

FAILING_VERDICTS = ("FAIL", "BROKEN")
MARK_KEY = "instruction_like"  # provenance.extra key the engine sets on an instruction-like chunk
WARNING_PREFIXES = ("[warning", "[degraded")  # the headers the engine puts on an answer it could not stand behind
PIPELINE_LANE = "pipeline"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def step_span(doc: dict[str, Any]) -> tuple[datetime, datetime] | None:
    """A step document's (start, end), or None when it has no finish (or no readable times)."""
    try:
        return datetime.fromisoformat(doc["started_at"]), datetime.fromisoformat(doc["finished_at"])
    except (KeyError, TypeError, ValueError):
        return None


def pick(record: Any, **defaults: Any) -> dict[str, Any]:
    """``record``'s values for exactly the keys of ``defaults`` (the default where absent or
    null): a template sees every key it uses, whatever a log line held."""
    record = record if isinstance(record, dict) else {}
    return {k: (record.get(k) if record.get(k) is not None else d) for k, d in defaults.items()}


def supplement_row(record: Any) -> dict[str, Any]:
    return pick(record, step="", n=0, gap="", query="", streams=[], failed_streams=[], chunks=0, resolved=None,
                resolution="")


def model_call_row(event: Any) -> dict[str, Any]:
    """One recorded model call: the ledger columns, and the call verbatim (the messages sent, the
    parameters, the raw output or a failure's partial output), which the page shows collapsed."""
    row = pick(event, role="", prompt_key="", planned_provider="", planned_model="", effective_provider="",
               effective_model="", prompt_tokens=0, completion_tokens=0, latency_s=None, attempts=1, mismatch=False,
               call=0, step_call=0, backend="", planned_backend="", family="", why="", finish_reason="",
               output=None, error=None)
    record = event if isinstance(event, dict) else {}
    row["messages"] = [pick(m, role="?", content="") for m in record.get("messages") or [] if isinstance(m, dict)]
    row["params_json"] = pretty_json(record.get("params") or {})
    row["error_json"] = pretty_json(row["error"]) if row["error"] else ""
    return row


def budget_view(budget: Any) -> dict[str, Any] | None:
    if not isinstance(budget, dict):
        return None
    view = pick(budget, level="?", estimated_input_tokens=None, context_window=None, target_backend="",
                reserved_output_tokens=None, utilization=None)
    view["signals"] = [pick(sig, code="", name="", detail="") for sig in budget.get("signals") or []]
    return view


def is_failing(verdict: str, degraded: bool) -> bool:
    return verdict in FAILING_VERDICTS or verdict == "DEGRADED" or degraded


def verdict_class(verdict: str, degraded: bool = False) -> str:
    """The CSS class of a verdict or status badge."""
    v = verdict.upper()
    if v in ("FAIL", "HALTED"):
        return "s-fail"
    if v in ("BROKEN", "INTERRUPTED", "UNREADABLE"):
        return "s-broken"
    if v in ("DEGRADED",) or degraded:
        return "s-degraded"
    if v in ("PASS", "OK"):
        return "s-ok"
    if v in ("RUNNING", "NEEDS_CLARIFICATION"):
        return "s-info"
    return "s-other"


def chunk_view(chunk: dict[str, Any], marks: dict[str, list[str]]) -> dict[str, Any]:
    prov = chunk.get("provenance") or {}
    extra = prov.get("extra") or {}
    rules = list(marks.get(str(chunk.get("id")), []))
    for mark in extra.get(MARK_KEY) or []:
        name = mark.get("name") if isinstance(mark, dict) else str(mark)
        if name and name not in rules:
            rules.append(name)
    return {
        "id": str(chunk.get("id", "")), "text": str(chunk.get("text", "")),
        "source": str(prov.get("source", "")), "heading": str(prov.get("heading") or ""),
        "collection": str(prov.get("collection", "")), "stream": str(prov.get("stream") or ""),
        "type": str(prov.get("type") or ""), "source_type": str(prov.get("source_type") or ""),
        "approved": bool(prov.get("approved")), "score": prov.get("score"),
        "ingested_at": str(prov.get("ingested_at") or ""), "title": str(extra.get("title") or ""),
        "retrieved_by": str(extra.get("retrieved_by") or ""), "instruction_like": rules,
    }


def marked_segments(text: str, claims: list[str]) -> list[tuple[str, bool]]:
    """``text`` cut into (piece, is part of an unsupported claim) so a template can mark the
    claims where they stand without building HTML from untrusted text."""
    spans: list[tuple[int, int]] = []
    for claim in sorted({c.strip() for c in claims}, key=len, reverse=True):  # the longest claims first
        if len(claim) < 3:
            continue
        start = text.find(claim)
        while start >= 0 and any(start < end and start + len(claim) > begin for begin, end in spans):
            start = text.find(claim, start + 1)  # that one overlaps a claim marked already: the next
        if start >= 0:
            spans.append((start, start + len(claim)))
    spans.sort()
    pieces: list[tuple[str, bool]] = []
    at = 0
    for start, end in spans:
        if start > at:
            pieces.append((text[at:start], False))
        pieces.append((text[start:end], True))
        at = end
    if at < len(text):
        pieces.append((text[at:], False))
    return pieces


def split_answer(answer: str) -> tuple[list[str], str]:
    """The warning header lines of an answer (``[warning: ...]``, ``[degraded — ...]``), and the rest."""
    lines = answer.split("\n")
    warnings = []
    while lines and lines[0].lstrip().lower().startswith(WARNING_PREFIXES):
        warnings.append(lines.pop(0))
    return warnings, "\n".join(lines)


def _contingencies(doc: dict[str, Any], health: dict[str, Any], logged: list[dict[str, Any]],
                   final_health: dict[str, Any]) -> list[dict[str, str]]:
    """The step's contingencies with severity and detail: from its events, the turn's contingency
    log (one may fire for a step after it finished: "FAIL after correction, shipped with a
    warning"), and the names its health lists at the step's end and at the turn's."""
    found: list[dict[str, str]] = []
    names: set[str] = set()
    for e in [*(e for e in doc.get("events") or [] if e.get("kind") == "contingency"), *logged]:
        if e.get("name") in names:
            continue
        names.add(str(e.get("name")))
        found.append({"name": str(e.get("name", "")), "severity": str(e.get("severity") or ""),
                      "detail": str(e.get("detail") or "")})
    for n in [*(health.get("contingencies") or []), *(final_health.get("contingencies") or [])]:
        if n not in names:
            names.add(str(n))
            found.append({"name": str(n), "severity": "", "detail": ""})
    return found


def _verdict_view(doc: dict[str, Any], chunks: list[dict[str, Any]]) -> dict[str, Any] | None:
    verdict = (doc.get("output") or {}).get("verdict")
    if not isinstance(verdict, dict):
        return None
    inputs = doc.get("input") or {}
    unsupported = [str(c) for c in verdict.get("unsupported_claims") or []]
    claims_by_text = {}
    data = verdict.get("data") or {}
    for c in data.get("claims") or [] if isinstance(data.get("claims"), list) else []:
        if isinstance(c, dict) and c.get("claim"):
            claims_by_text[str(c["claim"])] = c
    claims = []
    for claim in unsupported:
        detail = claims_by_text.get(claim, {})
        claims.append({"claim": claim, "best_evidence": str(detail.get("best_evidence") or ""),
                       "best_source": str(detail.get("best_source") or ""), "score": detail.get("score"),
                       "missing": [str(m) for m in detail.get("missing_specifics") or []]})
    sources = [str(s) for s in inputs.get("evidence_sources") or []]
    evidence = [c for c in chunks if c["source"] in sources] if sources else []
    missing = sorted(set(sources) - {c["source"] for c in evidence})
    subject = str(inputs.get("subject") or "")
    return {
        "status": str(verdict.get("status", "?")), "verifier": str(verdict.get("verifier", "")),
        "score": verdict.get("score"), "reasons": [str(r) for r in verdict.get("reasons") or []],
        "unsupported": claims, "raw_output": str(verdict.get("raw_output") or ""),
        "subject": marked_segments(subject, unsupported), "criteria": str(inputs.get("criteria") or ""),
        "evidence": evidence, "evidence_count": inputs.get("evidence_chunks"), "evidence_sources": sources,
        "missing_sources": missing, "data": {k: v for k, v in data.items() if k not in ("claims",)},
    }


def _routing(output: dict[str, Any]) -> dict[str, Any] | None:
    candidates = output.get("candidates")
    if not isinstance(candidates, list) or not candidates or "audit" not in output:
        return None  # only pre-routing carries per-mode scores with their audit
    rows = []
    for c in candidates:
        if isinstance(c, dict):
            rows.append({"mode": str(c.get("mode", "")), "gear": c.get("gear"), "score": c.get("score"),
                         "vocabulary": c.get("vocabulary"), "semantic": c.get("semantic"),
                         "strong": ", ".join(map(str, c.get("strong") or [])),
                         "weak": ", ".join(map(str, c.get("weak") or []))})
    audit = output.get("audit") if isinstance(output.get("audit"), dict) else {}
    return {"candidates": rows, "audit": audit, "reasoning": str(output.get("reasoning") or ""),
            "dispatched": str(output.get("mode") or ""), "confidence": str(output.get("classification_confidence")
                                                                          or "")}


def _lanes(steps: list[dict[str, Any]]) -> list[str]:
    """Timeline lanes: the pipeline's own, then each stream's (depth, breadth) side by side; a
    step overlapping another of its lane gets a lane of its own (``name 2``)."""
    lanes: list[str] = []
    ends: dict[str, float] = {}
    for step in sorted(steps, key=lambda s: (s["start"] is None, s["start"] or 0.0, s["index"])):
        if step["start"] is None:
            continue
        base = step["stream"] or PIPELINE_LANE
        lane, k = base, 1
        while ends.get(lane, -1.0) > step["start"] + 1e-6:
            k += 1
            lane = f"{base} {k}"
        ends[lane] = step["start"] + step["duration"]
        step["lane"] = lane
        if lane not in lanes:
            lanes.append(lane)
    return sorted(lanes, key=lambda name: name != PIPELINE_LANE)  # the pipeline's own first, streams in order


def build_turn_view(turn_dir: Path) -> dict[str, Any]:
    """Everything the turn page shows, read from ``turn_dir`` (raises ``TraceReadError`` only when
    ``turn.json`` itself cannot be read; any other unreadable file is named in ``problems``)."""
    turn = load_json(turn_dir / "turn.json")
    problems: list[str] = []
    status = str(turn.get("status") or "?")
    status_why = ""
    if status == "running":
        status, status_why = open_turn_status(turn_dir, turn)
        if status == "closed":
            turn = load_json(turn_dir / "turn.json")
            status, status_why = str(turn.get("status") or "?"), ""
    docs = []
    for f in sorted(turn_dir.glob("[0-9]*-*.json")):
        try:
            docs.append((f.name, load_json(f)))
        except TraceReadError as exc:
            problems.append(str(exc))
    logs: dict[str, list[dict[str, Any]]] = {}
    for name in LOG_NAMES:
        logs[name] = []
        path = turn_dir / name
        if not path.exists():
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            problems.append(f"{path}: {type(exc).__name__}: {exc}")
            continue
        for number, raw in enumerate(text.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                logs[name].append(json.loads(raw))
            except ValueError as exc:
                problems.append(f"{path} line {number}: {exc}")
    chunks: list[dict[str, Any]] = []
    budget: dict[str, Any] | None = None
    for _, doc in docs:
        output = doc.get("output") or {}
        if isinstance(output.get("retrievals"), dict):
            marks = {str(m.get("chunk_id")): [str(r) for r in m.get("rules") or []]
                     for m in output.get("instruction_like") or [] if isinstance(m, dict)}
            for retrieval in output["retrievals"].values():
                for chunk in (retrieval or {}).get("chunks") or []:
                    if isinstance(chunk, dict):
                        chunks.append(chunk_view(chunk, marks))
        if isinstance(output.get("budget"), dict):
            budget = budget_view(output["budget"])
    origin = None
    for _, doc in docs:
        span = step_span(doc)
        if span and (origin is None or span[0] < origin):
            origin = span[0]
    final_health: dict[str, dict[str, Any]] = {}
    health_path = turn_dir / "step-health.json"
    if health_path.exists():
        try:
            final_health = {str(h.get("step")): h for h in load_json(health_path).get("steps") or []
                            if isinstance(h, dict)}
        except TraceReadError as exc:
            problems.append(str(exc))
    logged_by_step: dict[str, list[dict[str, Any]]] = {}
    for record in logs["contingencies.jsonl"]:
        logged_by_step.setdefault(str(record.get("step")), []).append(record)
    supplements_by_step: dict[str, list[dict[str, Any]]] = {}
    for record in logs["supplemental-rag.jsonl"]:
        supplements_by_step.setdefault(str(record.get("step")), []).append(record)
    steps = []
    for file, doc in docs:
        health = doc.get("health") or {}
        output = doc.get("output") or {}
        name = str(doc.get("step", file))
        last = final_health.get(name, health)  # the turn's last word on the step (it may change after it ended)
        verdict = str(last.get("verdict") or ("RUNNING" if doc.get("status") == "running" else "?"))
        degraded = bool(last.get("degraded"))
        span = step_span(doc)
        events = doc.get("events") or []
        step = {
            "index": int(doc.get("index") or 0), "name": name, "file": file,
            "anchor": f"step-{int(doc.get('index') or 0):02d}", "verdict": verdict, "degraded": degraded,
            "failing": is_failing(verdict, degraded), "cls": verdict_class(verdict, degraded),
            "badge_cls": verdict_class(verdict),
            "finished": doc.get("status") == "finished",
            "latency_s": health.get("latency_s"), "kind": str(health.get("kind") or ""),
            "attempts": health.get("attempts"), "regenerations": health.get("regenerations"),
            "confidence": health.get("confidence"), "noncompliance": health.get("noncompliance") or {},
            "stream": step_stream(doc.get("input")),
            "start": (span[0] - origin).total_seconds() if span and origin else None,
            "duration": (span[1] - span[0]).total_seconds() if span else 0.0, "lane": PIPELINE_LANE,
            "contingencies": _contingencies(doc, health, logged_by_step.get(name, []),
                                            final_health.get(name, {})),
            "verdict_view": _verdict_view(doc, chunks),
            "text": output.get("text") if isinstance(output.get("text"), str) else None,
            "answer": output.get("answer") if isinstance(output.get("answer"), str) else None,
            "model_calls": [model_call_row(e) for e in [*(doc.get("calls") or []), *events]
                            if isinstance(e, dict) and e.get("kind") == "model_call"],
            "events": [{"kind": str(e.get("kind")), "json": pretty_json(e)} for e in events
                       if e.get("kind") not in ("contingency", "model_call")],
            "supplements": [supplement_row(r) for r in supplements_by_step.get(name, [])],
            "routing": _routing(output),
            "chunks": chunks if isinstance(output.get("retrievals"), dict) else [],
            "budget": budget_view(output.get("budget")),
            "error": output.get("error") if isinstance(output.get("error"), dict) else None,
            "input_json": pretty_json(doc.get("input") or {}),
            "output_json": pretty_json(output),
        }
        steps.append(step)
    lanes = _lanes(steps)
    spans = [svg.Span(lane=s["lane"], start=s["start"], duration=s["duration"], label=s["name"],
                      cls=s["cls"], title=f"{s['name']}: {s['verdict']}{' (degraded)' if s['degraded'] else ''}, "
                                          f"{s['duration']:.3f} s", href="#" + s["anchor"])
             for s in steps if s["start"] is not None]
    total = (turn.get("timings") or {}).get("total_s")
    timeline = svg.timeline(spans, lanes, title="The turn's steps on a time axis") if spans else None
    answer = str(turn.get("answer") or "")
    warnings, body = split_answer(answer)
    ledger = []
    for entry in turn.get("runtimeRoleModels") or []:
        ledger.append({
            "role": str(entry.get("role", "")), "prompt_key": str(entry.get("promptKey", "")),
            "planned": f"{entry.get('plannedProvider', '')}/{entry.get('plannedModel', '')}",
            "effective": (f"{entry.get('effectiveProvider', '')}/{entry.get('effectiveModel', '')}"
                          if entry.get("effectiveModel") else "— (no model answered)"),
            "mismatch": bool(entry.get("mismatch")), "fallbacks": ", ".join(entry.get("fallbackFlags") or []),
            "tokens": f"{entry.get('promptTokens', 0)} / {entry.get('completionTokens', 0)}",
            "latency_s": entry.get("latencyS"), "attempts": entry.get("attempts"),
            "error": pretty_json(entry["error"]) if entry.get("error") else "", "cached": bool(entry.get("cached")),
        })
    failing = [s for s in steps if s["failing"]]
    return {
        "path": str(turn_dir), "status": status,
        "turn": pick(turn, turn_id=turn_dir.name, conversation_id=turn_dir.parent.name, started_at="?",
                     config_hash="—"), "status_cls": verdict_class(status),
        "status_why": status_why, "prompt": str(turn.get("prompt") or ""), "mode": turn.get("mode"),
        "gear": turn.get("gear"), "total_s": total, "answer_warnings": warnings, "answer_body": body,
        "has_answer": bool(answer), "question": turn.get("question"),
        "steps": steps, "failing": failing, "timeline": timeline, "lanes": lanes,
        "ledger": ledger, "mismatch": any(e["mismatch"] for e in ledger),
        "supplements": [supplement_row(r) for r in logs["supplemental-rag.jsonl"]],
        "rag_failures": [pretty_json(r) for r in logs["rag-failures.jsonl"]],
        "oversight": [pick(r, step="", reason="", verdict="", reasons=[]) for r in logs["oversight-queue.jsonl"]],
        "contingencies": [pick(r, seq="", step="", name="", severity="", detail="")
                          for r in logs["contingencies.jsonl"]],
        "chunks": chunks, "budget": budget, "problems": problems,
        "trace_write_errors": [str(e) for e in turn.get("trace_write_errors") or []],
        "plugins": turn.get("plugins") or {}, "diagnostic": pretty_json(turn["diagnostic"])
        if turn.get("diagnostic") else "",
    }


def render_turn_view(turn_dir: Path) -> str:
    """The turn's page, as one self-contained HTML document."""
    from . import render

    return render("turn.html", **build_turn_view(turn_dir))
