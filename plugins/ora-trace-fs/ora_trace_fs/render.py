"""Markdown for one step file: what came in, what went out, its health, what happened."""

from __future__ import annotations

from typing import Any

from .pretty import dumps_pretty

SPECIAL_OUTPUT = ("signal_strength_summary", "empty_diagnosis", "budget", "rag_failures")


def _block(value: Any) -> str:
    if isinstance(value, str):
        fence = "~~~~" if "```" in value else "```"
        return f"{fence}text\n{value}\n{fence}"
    return "```json\n" + dumps_pretty(value) + "\n```"


def _signal_summary(summary: dict[str, Any]) -> list[str]:
    lines = ["### Signal strength summary (friction-reducer audit)", ""]
    if summary.get("single_signal_high_confidence"):
        lines += ["> ⚠️ **single_signal_high_confidence**: a high-confidence dispatch rests on exactly one "
                  "strong signal.", ""]
    lines += [
        f"- total matches: {summary.get('total_matches', 0)} "
        f"(strong {summary.get('strong_matches', 0)}, weak {summary.get('weak_matches', 0)})",
        f"- dispatched mode: {summary.get('dispatched_mode') or '—'}",
        f"- strong signals behind it: {', '.join(summary.get('strong_signals_for_dispatched') or []) or 'none'}",
        f"- weak signals behind it: {', '.join(summary.get('weak_signals_for_dispatched') or []) or 'none'}",
        "",
    ]
    return lines


def render_step_markdown(doc: dict[str, Any]) -> str:
    health = doc.get("health") or {}
    output = doc.get("output") or {}
    lines = [f"# Step {doc.get('index', 0):02d} — {doc.get('step')}", ""]
    verdict = health.get("verdict", "?")
    flag = " ⚠️ degraded" if health.get("degraded") else ""
    lines += [f"**Verdict:** {verdict}{flag} · **latency:** {health.get('latency_s', 0):.4f} s · "
              f"**started:** {doc.get('started_at')}", ""]
    if health.get("contingencies"):
        lines += ["**Contingencies:** " + ", ".join(f"`{c}`" for c in health["contingencies"]), ""]
    if output.get("pending_clarification"):
        lines += ["> ❓ **Pending clarification:** " + str(output["pending_clarification"]), ""]
    if output.get("pending_clarification_swallowed"):
        lines += ["> ❓ **Clarification kept (best guess continued):** "
                  + str(output["pending_clarification_swallowed"]), ""]
    if isinstance(output.get("signal_strength_summary"), dict):
        lines += _signal_summary(output["signal_strength_summary"])
    empty = output.get("empty_diagnosis")
    if isinstance(empty, dict) and empty:
        lines += ["### Empty retrievals", ""]
        for stream, diag in empty.items():
            reason = (diag or {}).get("empty_reason", "undiagnosed") if diag is not None else "undiagnosed"
            lines.append(f"- **{stream}**: `{reason}`" + (f" — {diag.get('detail')}" if diag and diag.get("detail")
                                                          else ""))
        lines.append("")
    if output.get("rag_failures"):
        lines += ["### RAG failures (empty context, named)", ""]
        for f in output["rag_failures"]:
            lines.append(f"- **{f.get('stream')}** via `{f.get('retriever')}`: {f.get('error_class')}: "
                         f"{f.get('message')}")
        lines.append("")
    if isinstance(output.get("budget"), dict):
        b = output["budget"]
        lines += ["### Budget signals", "",
                  f"level **{b.get('level')}**, ~{b.get('estimated_input_tokens')} tokens of "
                  f"{b.get('context_window')} ({b.get('target_backend')}), utilisation {b.get('utilization')}",
                  ""]
        lines += [f"- {s.get('code')} `{s.get('name')}` {s.get('detail', '')}" for s in b.get("signals", [])]
        lines.append("")
    if "answer" in output:
        lines += ["## Answer", "", _block(output["answer"]), ""]
    lines += ["## Input", ""]
    for key, value in (doc.get("input") or {}).items():
        lines += [f"### {key}", "", _block(value), ""]
    lines += ["## Output", ""]
    for key, value in output.items():
        if key in SPECIAL_OUTPUT or key == "answer":
            continue
        lines += [f"### {key}", "", _block(value), ""]
    events = doc.get("events") or []
    if events:
        lines += ["## Events", ""]
        for e in events:
            name = e.get("name") or e.get("role") or e.get("stream") or ""
            lines.append(f"- `{e.get('kind')}` {name}".rstrip())
        lines.append("")
    return "\n".join(lines)
