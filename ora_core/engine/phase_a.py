"""Phase A: cleanup through the configured ``phase_a`` model.

The model returns the cleaned prompt, a corrections log and the items it had to infer. The
inferred items are assumptions: ``ora_core.engine.prompts`` puts them into every later system prompt
under ``PHASE A ASSUMPTIONS (NOT USER-STATED FACTS)`` (seed 000, #10), and they are kept out
of retrieval queries. A backend failure or an unparseable reply is a named contingency and the
raw prompt goes on unchanged, never an empty one. A reply whose CLEANED PROMPT is the template's own
placeholder (``<the cleaned prompt>``, any case, with or without brackets, or another template line
echoed back) is unparseable too, named ``phase-a-placeholder-used-raw-prompt``; template lines echoed
as corrections or inferred items are left out, named ``phase-a-placeholder-items-dropped``.
"""

from __future__ import annotations

import re
from typing import Any

from ora_core.engine.backends import call_role
from ora_core.engine.profiles import profile_of
from ora_core.engine.prompts import build_messages
from ora_core.kernel.errors import BackendError
from ora_core.kernel.models import PhaseAResult, StopUnless

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
    items = []
    for line in block.splitlines():
        item = line.strip().lstrip("-*•").strip()
        if item.lower().rstrip(".") not in _NONE and not is_template_placeholder(item):
            items.append(item)
    return items


async def run_phase_a(turn: Any, pool: Any, prompt: str) -> PhaseAResult:
    # the phase_a backend's prompt profile: the directive then matches the later steps' word for word,
    # so a prompt-caching backend serves it to them from its prefix cache
    messages = build_messages(TASK, prompt, profile=profile_of(pool.config, pool.planned("phase_a")[0]))
    with turn.step(STEP, raw_prompt=prompt, messages=[m.model_dump() for m in messages]) as step:
        try:
            completion = await call_role(turn, pool, "phase_a", messages, prompt_key=PROMPT_KEY, step=STEP,
                                         max_tokens_cap=reply_token_cap(prompt),
                                         stop_unless=StopUnless(text="CLEANED PROMPT",
                                                                within_chars=HEADER_WITHIN_CHARS))
        except BackendError as exc:
            result = PhaseAResult(cleaned_prompt=prompt, parsed=False, used_raw_prompt=True)
            step.output.update(result.model_dump(mode="json"), error=exc.describe())
            step.health.verdict = "DEGRADED"
            step.contingency("phase-a-backend-failed-used-raw-prompt", str(exc), severity="degraded")
            turn.data["phase_a"] = result
            return result
        parsed = parse_phase_a(completion.text)
        if parsed is not None and cut_in_cleaned_prompt(completion.text, completion.finish_reason):
            result = PhaseAResult(cleaned_prompt=prompt, raw_output=completion.text, parsed=False,
                                  used_raw_prompt=True)
            step.contingency("phase-a-truncated-used-raw-prompt",
                             "the reply hit its token budget before the CORRECTIONS section: the cleaned "
                             "prompt may be cut short; the raw prompt goes on", severity="warning")
        elif parsed is None and (placeholder := echoed_placeholder(completion.text)) is not None:
            result = PhaseAResult(cleaned_prompt=prompt, raw_output=completion.text, parsed=False,
                                  used_raw_prompt=True)
            step.contingency(PLACEHOLDER_CONTINGENCY,
                             f"the reply's CLEANED PROMPT section is the template's own placeholder "
                             f"({placeholder[:120]!r}), not a cleaned prompt; the raw prompt goes on",
                             severity="warning", placeholder=placeholder[:500])
        elif parsed is None:
            result = PhaseAResult(cleaned_prompt=prompt, raw_output=completion.text, parsed=False,
                                  used_raw_prompt=True)
            stopped = completion.finish_reason == "stop_unless"
            step.contingency("phase-a-unparseable-used-raw-prompt",
                             f"the reply has no 'CLEANED PROMPT:' section in its first {HEADER_WITHIN_CHARS} "
                             "characters; the backend stopped it there and the raw prompt goes on" if stopped
                             else "the reply has no 'CLEANED PROMPT:' section; the raw prompt goes on",
                             severity="warning", stopped_early=stopped)
        else:
            result = PhaseAResult(raw_output=completion.text, **parsed)
            dropped = template_lines_dropped(completion.text)
            if dropped:
                step.contingency(PLACEHOLDER_ITEMS_CONTINGENCY,
                                 f"{len(dropped)} correction/inferred-item line(s) only echo the template "
                                 "and were left out", severity="info", lines=dropped[:10])
        step.output.update(result.model_dump(mode="json"))
    turn.data["phase_a"] = result
    return result
