"""Markdown for one step file: what came in, what went out, its health, what happened."""

from __future__ import annotations

import html
import re
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
_LEAD_OUTPUT = frozenset((*_SKIPPED_OUTPUT, "lineage"))  # rendered ahead of Input (``_special_output``)


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
    if not _LEAD_OUTPUT.isdisjoint(output) or "pending_clarification" in output \
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
    calls = doc.get("calls") or []
    if calls:
        parts.append("## Model calls\n\n")
        parts += [_call_markdown(c, safe) for c in calls if isinstance(c, dict)]
    events = doc.get("events") or []
    if events:
        parts.append("## Events\n\n")
        for e in events:
            name = e.get("name") or e.get("role") or e.get("stream") or ""
            parts.append(f"- `{e.get('kind')}` {name}".rstrip() + "\n")
        parts.append("\n")
    return "".join(parts)[:-1]


_BACKTICKS = re.compile(r"`{3,}")


def _fenced(text: str, lang: str = "text") -> str:
    """``text`` in a code fence longer than any run of backticks inside it (a model's output may
    hold fences of its own)."""
    if "```" not in text:  # no run of three: the plain fence (a substring test, far cheaper than the scan)
        return f"```{lang}\n{text}\n```\n"
    longest = max(len(m.group(0)) for m in _BACKTICKS.finditer(text))
    fence = "`" * (longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}\n"


def _call_markdown(call: dict[str, Any], safe: bool) -> str:
    """One model call, collapsed (``<details>``): what exactly was sent, what came back, why."""
    who = call.get("backend") or call.get("effective_provider") or "?"
    family = f" ({call['family']})" if call.get("family") else ""
    tokens = f"{call.get('prompt_tokens', 0)}→{call.get('completion_tokens', 0)} tokens"
    latency = call.get("latency_s")
    summary = (f"Call {call.get('step_call', '?')} (turn call {call.get('call', '?')}) · {call.get('why') or '—'} · "
               f"{who}{family} `{call.get('effective_model') or '?'}` · {call.get('finish_reason') or '—'} · {tokens}"
               + (f" · {latency:.2f} s" if isinstance(latency, (int, float)) else ""))
    parts = [f"<details>\n<summary>{html.escape(summary, quote=False)}</summary>\n\n"]
    for message in call.get("messages") or []:
        if isinstance(message, dict):
            parts.append(f"#### {message.get('role', '?')}\n\n{_fenced(str(message.get('content', '')))}\n")
    output = call.get("output")
    if call.get("error"):
        parts.append("#### error\n\n" + _block(call["error"], safe) + "\n\n")
        parts.append("#### partial output\n\n" + (_fenced(output) if isinstance(output, str) else "none received\n")
                     + "\n")
    else:
        parts.append("#### output\n\n" + (_fenced(output) if isinstance(output, str) else "none\n") + "\n")
    parts.append("#### parameters\n\n" + _block(call.get("params") or {}, safe) + "\n\n</details>\n\n")
    return "".join(parts)


def _lineage_line(edge: dict[str, Any]) -> str:
    """A judged edge in one line: who judged whose output, their relation, what the policy did."""
    def who(identity: Any) -> str:
        if not isinstance(identity, dict):
            return "an unrecorded model"
        return (f"{identity.get('backend') or '?'} ({identity.get('model') or 'no model id'}, "
                f"{identity.get('family') or 'family undeclared'})")

    relation = edge.get("relation", "?")
    flag = "⚠️ " if relation in ("same", "unknown") else ""
    judges = ", ".join(who(j) for j in edge.get("judges") or []) or "no model"
    return (f"> {flag}**Lineage: {relation}** ({edge.get('reason', '')}) — {edge.get('edge', '')}: judged by "
            f"{judges} on the output of {who(edge.get('author'))}; same_lineage = {edge.get('policy', '?')}: "
            f"{edge.get('action', '?')}" + (f" to {edge['routed_to']}" if edge.get("routed_to") else ""))


def _special_output(lines: list[str], output: dict[str, Any]) -> None:
    """The sections some steps' outputs carry, before Input: each ends with an empty line."""
    if isinstance(output.get("lineage"), dict):
        lines += [_lineage_line(output["lineage"]), ""]
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
