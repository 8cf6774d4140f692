"""Markdown for one step file: what came in, what went out, its health, what happened."""

from __future__ import annotations

from typing import Any

from .encoding import accepted, pretty

SPECIAL_OUTPUT = ("signal_strength_summary", "empty_diagnosis", "budget", "rag_failures")


def _block(value: Any, safe: bool = False) -> str:
    if isinstance(value, str):
        fence = "~~~~" if "```" in value else "```"
        return f"{fence}text\n{value}\n{fence}"
    return "```json\n" + pretty(value, safe=safe) + "\n```"


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


def _sections(parts: list[str], values: dict[str, Any], safe: bool, skip: frozenset[str] = frozenset()) -> None:
    """``### key`` and its block per entry: each line of the text ends in a newline. ``safe``:
    the values belong to a document ``encoding.compact`` accepted."""
    for key, value in values.items():
        if key in skip:
            continue
        if type(value) is str:
            fence = "~~~~" if "```" in value else "```"
            parts.append(f"### {key}\n\n{fence}text\n{value}\n{fence}\n\n")
        else:
            parts.append(f"### {key}\n\n{_block(value, safe)}\n\n")


_SKIPPED_OUTPUT = frozenset((*SPECIAL_OUTPUT, "answer"))


def render_step_markdown(doc: dict[str, Any]) -> str:
    health = doc.get("health") or {}
    output = doc.get("output") or {}
    verdict = health.get("verdict", "?")
    flag = " ⚠️ degraded" if health.get("degraded") else ""
    # Built as "line\n" chunks (the text is its lines joined by newlines; the last is empty).
    parts = [f"# Step {doc.get('index', 0):02d} — {doc.get('step')}\n\n"
             f"**Verdict:** {verdict}{flag} · **latency:** {health.get('latency_s', 0):.4f} s · "
             f"**started:** {doc.get('started_at')}\n\n"]
    if health.get("contingencies"):
        parts.append("**Contingencies:** " + ", ".join(f"`{c}`" for c in health["contingencies"]) + "\n\n")
    if not _SKIPPED_OUTPUT.isdisjoint(output) or "pending_clarification" in output \
            or "pending_clarification_swallowed" in output:
        lines: list[str] = []
        _special_output(lines, output)
        if lines:
            parts.append("\n".join(lines) + "\n")
    parts.append("## Input\n\n")
    safe = accepted(doc)
    _sections(parts, doc.get("input") or {}, safe)
    parts.append("## Output\n\n")
    _sections(parts, output, safe, _SKIPPED_OUTPUT)
    events = doc.get("events") or []
    if events:
        parts.append("## Events\n\n")
        for e in events:
            name = e.get("name") or e.get("role") or e.get("stream") or ""
            parts.append(f"- `{e.get('kind')}` {name}".rstrip() + "\n")
        parts.append("\n")
    return "".join(parts)[:-1]


def _special_output(lines: list[str], output: dict[str, Any]) -> None:
    """The sections some steps' outputs carry, before Input: each ends with an empty line."""
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
