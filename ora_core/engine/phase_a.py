"""Phase A: cleanup through the configured ``phase_a`` model.

The model returns the cleaned prompt, a corrections log and the items it had to infer. The
inferred items are assumptions: ``ora_core.engine.prompts`` puts them into every later system prompt
under ``PHASE A ASSUMPTIONS (NOT USER-STATED FACTS)`` (seed 000, #10), and they are kept out
of retrieval queries. A backend failure or an unparseable reply is a named contingency and the
raw prompt goes on unchanged, never an empty one. A reply whose CLEANED PROMPT is the template's own
placeholder (``<the cleaned prompt>``, any case, with or without brackets, or another template line
echoed back) is unparseable too, named ``phase-a-placeholder-used-raw-prompt``; template lines echoed
as corrections or inferred items are left out, named ``phase-a-placeholder-items-dropped``.

Structured output: when the ``phase_a`` backend can constrain its reply to a JSON schema (its
``structured_output``), Phase A asks for one JSON object (``TASK_STRUCTURED``, ``RESPONSE_SCHEMA``)
instead of the three sections. A constrained reply is validated (``StructuredReply``); one that does
not validate (cut at its token budget, an empty cleaned prompt, the template echoed) is unparseable
as before (``phase-a-unparseable-used-raw-prompt``, the raw prompt goes on). A backend without the
capability, or a fallback that answered unconstrained, is read as text (a JSON object first, then
the three sections).

Skipping (``[pipeline] phase_a``): ``"auto"`` (the default) skips Phase A when the ``phase_a`` backend
runs the compact prompt profile, the bundled tiny model's (``benchmarks/phase_a_structured.py``: its
text replies never parse, and its constrained ones parse but do not keep the request's meaning);
``"skip"`` always, ``"run"`` never. A skipped Phase A is a step of its own that makes no model call,
names ``phase-a-skipped-profile`` (or ``phase-a-skipped-config``) and passes the raw prompt on.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from ora_core.engine.backends import Pool, call_role
from ora_core.engine.profiles import profile_of
from ora_core.engine.prompts import PHASE_A, build_messages
from ora_core.kernel.config import OraConfig
from ora_core.kernel.errors import BackendError
from ora_core.kernel.models import PhaseAResult, StopUnless
from ora_core.kernel.trace import StepRecorder, TurnContext

STEP = "phase-a"
PROMPT_KEY = "phase_a.cleanup"

TASK = """\
PHASE A CLEANUP. You prepare the user's prompt for analysis; you do not answer it.
Fix spelling and grammar without changing the meaning, and make implicit scope explicit only
where the prompt itself supports it. Reply with exactly these three sections and nothing else:

CLEANED PROMPT:
<the cleaned prompt>
CORRECTIONS:
- <one line per correction, or "- none">
INFERRED ITEMS:
- <one line per assumption you had to make to interpret the prompt, or "- none">"""

#: The task for a backend that constrains its reply to ``RESPONSE_SCHEMA`` (the grammar or the server
#: enforces the keys; this text says what goes in them).
TASK_STRUCTURED = """\
PHASE A CLEANUP. You prepare the user's prompt for analysis; you do not answer it.
Fix spelling and grammar without changing the meaning, and make implicit scope explicit only
where the prompt itself supports it. Reply with one JSON object:
"cleaned_prompt": the user's prompt, corrected: still the user's request, never its answer;
"corrections": one short line per correction you made, [] if none;
"inferred_items": one short line per assumption you had to make to interpret the prompt, [] if none."""

SCHEMA_NAME = "phase_a"
#: What a constrained Phase A reply is: portable to OpenAI's strict mode (every key required, no
#: other key); its size is bounded by ``reply_token_cap``, not by the schema.
RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "cleaned_prompt": {"type": "string"},
        "corrections": {"type": "array", "items": {"type": "string"}},
        "inferred_items": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["cleaned_prompt", "corrections", "inferred_items"],
    "additionalProperties": False,
}


class StructuredReply(BaseModel):
    """A constrained Phase A reply, validated (``RESPONSE_SCHEMA``, and a cleaned prompt with text)."""

    model_config = ConfigDict(extra="forbid")

    cleaned_prompt: str
    corrections: list[str]
    inferred_items: list[str]

    @field_validator("cleaned_prompt")
    @classmethod
    def _has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the cleaned prompt is empty")
        return value.strip()


UNPARSEABLE = "phase-a-unparseable-used-raw-prompt"
SKIPPED_PROFILE = "phase-a-skipped-profile"
SKIPPED_CONFIG = "phase-a-skipped-config"

_SECTION = re.compile(r"^\s*(CLEANED PROMPT|CORRECTIONS|INFERRED ITEMS)\s*:\s*", re.M | re.I)
REPLY_OVERHEAD_TOKENS = 96  # section headers, corrections and inferred items
#: A reply with no CLEANED PROMPT section in its first this-many characters will not parse: a
#: backend that watches its reply stops it there (``StopUnless``) instead of letting a model
#: that answers the question run on to the reply cap (the bundled tiny model does: ~130 tokens,
#: ~2 s, every turn). Generous enough for a preamble ("Here is the cleaned prompt:").
HEADER_WITHIN_CHARS = 200
_NONE = {"none", "n/a", "nothing", "-", ""}
PLACEHOLDER_CONTINGENCY = "phase-a-placeholder-used-raw-prompt"
PLACEHOLDER_ITEMS_CONTINGENCY = "phase-a-placeholder-items-dropped"


def _template_key(line: str) -> str:
    """A line as compared with the template's: no list mark, brackets, quotes, case or spacing."""
    text = line.strip().lstrip("-*•").strip().strip("<>[]()\"'`").strip().rstrip(".").strip()
    return re.sub(r"\s+", " ", text).lower()


#: The template's own placeholder lines (``<the cleaned prompt>``, ``- <one line per correction ...>``):
#: a reply that hands one back as content has filled nothing in.
TEMPLATE_PLACEHOLDERS = frozenset(_template_key(m) for m in re.findall(r"<([^>\n]+)>", TASK))


def is_template_placeholder(text: str) -> bool:
    """``text`` is nothing but lines of Phase A's own template echoed back (any case, with or without
    brackets or list marks): ``<the cleaned prompt>``, ``The cleaned prompt``, ``- <one line per ...>``."""
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and all(_template_key(line) in TEMPLATE_PLACEHOLDERS for line in lines)


def reply_token_cap(prompt: str) -> int:
    """The most a Phase A reply needs: the prompt echoed (cleaned) plus short lists; a model
    that ignores the format and answers instead stops there, not at the backend's max_tokens."""
    return REPLY_OVERHEAD_TOKENS + 2 * (len(prompt) // 4 + 1)


def cut_in_cleaned_prompt(text: str, finish_reason: str) -> bool:
    """The reply stopped at its token budget (``length``) with no section after CLEANED PROMPT:
    what was parsed as the cleaned prompt may be a fragment."""
    heads = [m.group(1).upper() for m in _SECTION.finditer(text)]
    return finish_reason == "length" and (not heads or heads[-1] == "CLEANED PROMPT")


def _sections(text: str) -> dict[str, str]:
    heads = list(_SECTION.finditer(text))
    sections: dict[str, str] = {}
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        sections.setdefault(head.group(1).upper(), text[head.end():end].strip())
    return sections


def parse_phase_a(text: str) -> dict[str, Any] | None:
    """The three sections of a Phase A reply, or None when the cleaned prompt is missing or is the
    template's own placeholder echoed back (``echoed_placeholder`` says which). Correction and
    inferred-item lines that echo the template are left out (``template_lines_dropped``)."""
    cleaned = _sections(text).get("CLEANED PROMPT", "").strip()
    if not cleaned or is_template_placeholder(cleaned):
        return None
    sections = _sections(text)
    return {"cleaned_prompt": cleaned, "corrections": _items(sections.get("CORRECTIONS", "")),
            "inferred_items": _items(sections.get("INFERRED ITEMS", ""))}


def echoed_placeholder(text: str) -> str | None:
    """The CLEANED PROMPT section of a reply when it is only the template's placeholder, else None."""
    cleaned = _sections(text).get("CLEANED PROMPT", "").strip()
    return cleaned if cleaned and is_template_placeholder(cleaned) else None


def template_lines_dropped(text: str) -> list[str]:
    """The CORRECTIONS and INFERRED ITEMS lines of a reply that echo the template (left out)."""
    sections = _sections(text)
    return [line.strip() for name in ("CORRECTIONS", "INFERRED ITEMS")
            for line in sections.get(name, "").splitlines() if line.strip() and is_template_placeholder(line)]


def _items(block: str) -> list[str]:
    return _kept(block.splitlines())


def _kept(lines: list[str]) -> list[str]:
    items = []
    for line in lines:
        item = line.strip().lstrip("-*•").strip()
        if item.lower().rstrip(".") not in _NONE and not is_template_placeholder(item):
            items.append(item)
    return items


def parse_structured(text: str) -> tuple[dict[str, Any] | None, str, list[str]]:
    """A JSON Phase A reply (``RESPONSE_SCHEMA``): ``(parse_phase_a``'s dict``, "", entries left out)``, or
    ``(None, what is wrong, [])``. Correction and inferred-item entries that say "none" or only echo the
    template are left out (the template echoes are returned, to be named); a cleaned prompt that is the
    template's placeholder is no cleaned prompt."""
    try:
        reply = StructuredReply.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}" for e in exc.errors()[:3])
        return None, f"the reply does not validate against Phase A's schema ({problems})", []
    if is_template_placeholder(reply.cleaned_prompt):
        return None, f"the cleaned prompt is the template's own wording ({reply.cleaned_prompt[:120]!r})", []
    dropped = [item.strip() for item in (*reply.corrections, *reply.inferred_items)
               if item.strip() and is_template_placeholder(item)]
    return {"cleaned_prompt": reply.cleaned_prompt, "corrections": _kept(reply.corrections),
            "inferred_items": _kept(reply.inferred_items)}, "", dropped


def _json_object(text: str) -> str | None:
    """The outermost ``{...}`` of an unconstrained reply asked for JSON (text or a code fence around it
    allowed) when that is one JSON object, else None (the reply is then read as sections)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        return text[start:end + 1] if isinstance(json.loads(text[start:end + 1]), dict) else None
    except ValueError:
        return None


def skip_reason(config: OraConfig, backend: str) -> tuple[str, str] | None:
    """``(contingency, why)`` when ``[pipeline] phase_a`` says Phase A does not run for this turn."""
    setting = config.pipeline.phase_a
    if setting == "skip":
        return SKIPPED_CONFIG, '[pipeline] phase_a = "skip": Phase A is off; the raw prompt goes on'
    if setting == "auto" and profile_of(config, backend) == "compact":
        return SKIPPED_PROFILE, (f"the phase_a backend {backend!r} runs the compact prompt profile (a small local "
                                 "model): its cleanup does not keep the request's meaning, so Phase A is skipped "
                                 '([pipeline] phase_a = "auto"; "run" runs it); the raw prompt goes on')
    return None


def structured_backend(pool: Pool, name: str) -> bool:
    """The backend ``name`` declares it can constrain a reply to a JSON schema."""
    return getattr(pool.get(name), "structured_output", False) is True


async def run_phase_a(turn: TurnContext, pool: Pool, prompt: str) -> PhaseAResult:
    backend = pool.planned("phase_a")[0]
    skipped = skip_reason(pool.config, backend)
    if skipped is not None:
        return _skipped(turn, prompt, *skipped)
    structured = structured_backend(pool, backend)
    # the phase_a backend's prompt profile: the directive then matches the later steps' word for word,
    # so a prompt-caching backend serves it to them from its prefix cache
    messages = build_messages(TASK_STRUCTURED if structured else TASK, prompt, profile=profile_of(pool.config, backend))
    reply_format: dict[str, Any] = (
        {"response_schema": RESPONSE_SCHEMA, "schema_name": SCHEMA_NAME} if structured
        else {"stop_unless": StopUnless(text="CLEANED PROMPT", within_chars=HEADER_WITHIN_CHARS)})
    with turn.step(STEP, raw_prompt=prompt, messages=[m.model_dump() for m in messages],
                   reply_format="json" if structured else "sections") as step:
        try:
            completion = await call_role(turn, pool, "phase_a", messages, prompt_key=PROMPT_KEY, step=STEP,
                                         why="phase A cleanup",
                                         max_tokens_cap=reply_token_cap(prompt), **reply_format)
        except BackendError as exc:
            result = PhaseAResult(cleaned_prompt=prompt, parsed=False, used_raw_prompt=True)
            step.output.update(result.model_dump(mode="json"), error=exc.describe())
            step.health.verdict = "DEGRADED"
            step.contingency("phase-a-backend-failed-used-raw-prompt", str(exc), severity="degraded")
            turn.stash[PHASE_A] = result
            return result
        found = _json_object(completion.text) if structured and not completion.constrained else None
        if completion.constrained:
            result = _from_structured(step, prompt, completion.text, completion.finish_reason)
        elif found is not None and parse_structured(found)[0] is not None:
            # asked for JSON, answered by a backend that did not constrain it (a fallback): read as JSON
            result = _from_structured(step, prompt, found, completion.finish_reason, raw=completion.text)
        else:
            result = _from_text(step, prompt, completion.text, completion.finish_reason)
        step.output.update(result.model_dump(mode="json"), constrained=completion.constrained)
    turn.stash[PHASE_A] = result
    return result


def _skipped(turn: TurnContext, prompt: str, contingency: str, why: str) -> PhaseAResult:
    """Phase A off for this turn (``skip_reason``): a step of its own, no model call, the raw prompt on."""
    result = PhaseAResult(cleaned_prompt=prompt, parsed=False, used_raw_prompt=True)
    with turn.step(STEP, raw_prompt=prompt, skipped=True) as step:
        step.health.verdict = "SKIPPED"
        step.contingency(contingency, why, severity="info")
        step.output.update(result.model_dump(mode="json"), skipped=contingency)
    turn.stash[PHASE_A] = result
    return result


def _from_structured(step: StepRecorder, prompt: str, text: str, finish_reason: str, *,
                     raw: str | None = None) -> PhaseAResult:
    """A JSON reply: validated, or the named unparseable contingency (the raw prompt goes on)."""
    parsed, problem, dropped = parse_structured(text)
    if parsed is None:
        cut = " (the reply hit its token budget first)" if finish_reason == "length" else ""
        step.contingency(UNPARSEABLE, f"{problem}{cut}; the raw prompt goes on", severity="warning",
                         constrained=raw is None, finish_reason=finish_reason)
        return PhaseAResult(cleaned_prompt=prompt, raw_output=raw if raw is not None else text, parsed=False,
                            used_raw_prompt=True)
    if dropped:
        step.contingency(PLACEHOLDER_ITEMS_CONTINGENCY,
                         f"{len(dropped)} correction/inferred-item entr(y/ies) only echo the template and were "
                         "left out",
                         severity="info", lines=dropped[:10])
    return PhaseAResult(raw_output=raw if raw is not None else text, **parsed)


def _from_text(step: StepRecorder, prompt: str, text: str, finish_reason: str) -> PhaseAResult:
    """A reply in the three sections (a backend that cannot constrain its reply)."""
    parsed = parse_phase_a(text)
    if parsed is not None and cut_in_cleaned_prompt(text, finish_reason):
        step.contingency("phase-a-truncated-used-raw-prompt",
                         "the reply hit its token budget before the CORRECTIONS section: the cleaned "
                         "prompt may be cut short; the raw prompt goes on", severity="warning")
        return PhaseAResult(cleaned_prompt=prompt, raw_output=text, parsed=False, used_raw_prompt=True)
    if parsed is None and (placeholder := echoed_placeholder(text)) is not None:
        step.contingency(PLACEHOLDER_CONTINGENCY,
                         f"the reply's CLEANED PROMPT section is the template's own placeholder "
                         f"({placeholder[:120]!r}), not a cleaned prompt; the raw prompt goes on",
                         severity="warning", placeholder=placeholder[:500])
        return PhaseAResult(cleaned_prompt=prompt, raw_output=text, parsed=False, used_raw_prompt=True)
    if parsed is None:
        stopped = finish_reason == "stop_unless"
        step.contingency(UNPARSEABLE,
                         f"the reply has no 'CLEANED PROMPT:' section in its first {HEADER_WITHIN_CHARS} "
                         "characters; the backend stopped it there and the raw prompt goes on" if stopped
                         else "the reply has no 'CLEANED PROMPT:' section; the raw prompt goes on",
                         severity="warning", stopped_early=stopped)
        return PhaseAResult(cleaned_prompt=prompt, raw_output=text, parsed=False, used_raw_prompt=True)
    dropped = template_lines_dropped(text)
    if dropped:
        step.contingency(PLACEHOLDER_ITEMS_CONTINGENCY,
                         f"{len(dropped)} correction/inferred-item line(s) only echo the template "
                         "and were left out", severity="info", lines=dropped[:10])
    return PhaseAResult(raw_output=text, **parsed)
