"""Reading the debate roles' replies: lenient about form, honest about content.

Each role is asked for ``KEY: value`` lines (``TRUTH: 72``, ``POINT: direction=lower; ...``), not
JSON: a JSON string value of four words or more reads as a quotation to the reliability layer's
judge, which checks quotations against the evidence. Parsing tolerates Markdown emphasis,
bullets, key spellings (``truth_pct``, ``Truth percentage``), ``72%``, ``72/100``, a fraction
(``0.72``, noted) and, as a fallback, a JSON object with the same keys. What it cannot find is
a named problem, never a default: a reply without a truth percentage has none.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ora_core.kernel.models import ChallengePoint, PointResponse

_LINE = re.compile(r"^[\s>*_#`-]*(?P<key>[A-Za-z][A-Za-z0-9 _-]{0,40}?)[\s*_`]*[:=][\s*_`]*(?P<value>.*?)[\s*_`]*$")
_NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)?")
_EVIDENCE_ID = re.compile(r"\bE\s?-?(\d{1,4})\b", re.IGNORECASE)
_POINT_ID = re.compile(r"\bP?\s?(\d{1,3})\b", re.IGNORECASE)
_TAIL = re.compile(r"(?P<key>[A-Za-z][A-Za-z _-]*?)\s*[=:]\s*(?P<text>.*)$", re.DOTALL)
_SEGMENT_KEY = re.compile(r"(?:^|[;|,])\s*(?P<key>[A-Za-z][A-Za-z _-]{0,20}?)\s*[=:]", re.IGNORECASE)

TRUTH_KEYS = ("truth", "truth_pct", "truth_percentage", "truth_percent", "truth_value")
CERTAINTY_KEYS = ("certainty", "verdict_confidence", "confidence_pct", "confidence_percentage", "certainty_pct")
CITED_KEYS = ("cited", "cited_evidence", "evidence", "evidence_ids", "citations", "cited_ids", "sources")
REASONING_KEYS = ("reasoning", "reason", "rationale", "explanation")
POINT_TYPES = ("contradicting_evidence", "supporting_evidence", "misread_evidence", "overreach",
               "missing_context", "weak_source")
_DIRECTION_WORDS = {"higher": "higher", "up": "higher", "raise": "higher", "increase": "higher",
                    "truer": "higher", "true": "higher", "lower": "lower", "down": "lower", "decrease": "lower",
                    "reduce": "lower", "false": "lower", "falser": "lower"}
_SEVERITY_WORDS = {"high": "high", "major": "high", "medium": "medium", "med": "medium", "moderate": "medium",
                   "low": "low", "minor": "low"}
_LABEL_WORDS = {"supports": "supports", "support": "supports", "supporting": "supports", "supported": "supports",
                "for": "supports", "contradicts": "contradicts", "contradict": "contradicts",
                "contradicting": "contradicts", "refutes": "contradicts", "against": "contradicts",
                "neutral": "neutral", "irrelevant": "neutral", "unrelated": "neutral", "neither": "neutral",
                "mixed": "neutral"}
_YES = {"yes", "y", "true", "accepted", "accept", "grounded", "consistent", "ok", "pass"}
_NO = {"no", "n", "false", "rejected", "reject", "ungrounded", "inconsistent", "fail"}


def norm_key(key: str) -> str:
    return re.sub(r"[\s-]+", "_", key.strip().lower()).strip("_")


def evidence_ids(text: str) -> list[str]:
    return list(dict.fromkeys(f"E{int(n)}" for n in _EVIDENCE_ID.findall(text)))


def fields(text: str, multiline: tuple[str, ...] = REASONING_KEYS) -> list[tuple[str, str]]:
    """``(key, value)`` pairs of ``KEY: value`` lines in order; lines that follow a multi-line key's
    line (reasoning) and are no key line themselves continue its value."""
    out: list[tuple[str, str]] = []
    open_value = False  # the last pair may take continuation lines
    for line in text.splitlines():
        if line.strip().startswith(("```", "~~~")):
            open_value = False  # a fence ends a value
            continue
        match = _LINE.match(line)
        if match is not None:
            out.append((norm_key(match.group("key")), match.group("value").strip()))
            open_value = out[-1][0].startswith(multiline)
        elif open_value and line.strip():
            key, value = out[-1]
            out[-1] = (key, (value + " " + line.strip()).strip())
    return out


def _json_object(text: str) -> dict[str, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        found = json.loads(text[start:end + 1])
    except ValueError:
        return None
    return {norm_key(str(k)): v for k, v in found.items()} if isinstance(found, dict) else None


def _last(pairs: list[tuple[str, str]], keys: tuple[str, ...]) -> str | None:
    found = [v for k, v in pairs if k in keys]
    return found[-1] if found else None


def percentage(value: Any, what: str, notes: list[str]) -> tuple[float | None, str]:
    """A 0-100 value from ``72``, ``72%``, ``72/100``, ``0.72`` (a fraction: noted); else a problem."""
    if isinstance(value, bool) or value is None:
        return None, f"no {what}"
    text = str(value).strip()
    match = _NUMBER.search(text)
    if match is None:
        return None, f"{what} {text[:40]!r} is not a number"
    number = float(match.group(0).replace(",", "."))
    rest = text[match.end():].lstrip()
    if rest.startswith("/"):
        scale = _NUMBER.search(rest)
        if scale is not None and float(scale.group(0).replace(",", ".")) > 0:
            number = 100 * number / float(scale.group(0).replace(",", "."))
    elif "." in match.group(0) and 0.0 <= number <= 1.0 and not rest.startswith("%"):
        notes.append(f"{what} {match.group(0)} read as a fraction: {round(number * 100, 1)}")
        number *= 100
    if not 0.0 <= number <= 100.0:
        return None, f"{what} {match.group(0)} is outside 0-100"
    return round(number, 1), ""


@dataclass
class VerdictReply:
    """A verdict-giving role's reply (advocate, self-consistency, reconciler)."""

    truth: float | None = None
    certainty: float | None = None
    cited: list[str] = field(default_factory=list)
    reasoning: str = ""
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source: str = "lines"  # lines | json

    @property
    def parsed(self) -> bool:
        return self.truth is not None and self.certainty is not None


def parse_verdict(text: str) -> VerdictReply:
    pairs = fields(text)
    reply = VerdictReply()
    values: dict[str, Any] = {"truth": _last(pairs, TRUTH_KEYS), "certainty": _last(pairs, CERTAINTY_KEYS),
                              "cited": _last(pairs, CITED_KEYS), "reasoning": _last(pairs, REASONING_KEYS)}
    if values["truth"] is None:
        obj = _json_object(text)
        if obj is not None:
            reply.source = "json"
            pick = lambda keys: next((obj[k] for k in keys if k in obj), None)  # noqa: E731
            values = {"truth": pick(TRUTH_KEYS), "certainty": pick((*CERTAINTY_KEYS, "confidence")),
                      "cited": pick(CITED_KEYS), "reasoning": pick(REASONING_KEYS)}
            if isinstance(values["cited"], list):
                values["cited"] = " ".join(str(v) for v in values["cited"])
    reply.truth, problem = percentage(values["truth"], "TRUTH", reply.notes)
    if problem:
        reply.problems.append(problem)
    reply.certainty, problem = percentage(values["certainty"], "CERTAINTY", reply.notes)
    if problem:
        reply.problems.append(problem)
    if values["cited"] is None:
        reply.notes.append("no CITED line: no evidence cited")
    else:
        reply.cited = evidence_ids(str(values["cited"]))
    reply.reasoning = str(values["reasoning"] or "").strip() or prose(text)
    if not reply.reasoning:
        reply.notes.append("no reasoning: neither a REASONING line nor prose outside the fields")
    return reply


_KNOWN_KEYS = (*TRUTH_KEYS, *CERTAINTY_KEYS, *CITED_KEYS, *REASONING_KEYS, "confidence")


def prose(text: str) -> str:
    """The reply's text outside fenced blocks and outside the format's ``KEY: value`` lines."""
    kept: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.strip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        match = _LINE.match(line)
        if fenced or (match is not None and norm_key(match.group("key")) in _KNOWN_KEYS) \
                or norm_key(line.split(":")[0]).startswith(("response", "point")):
            continue
        kept.append(line.strip())
    return " ".join(k for k in kept if k).strip()


def _segments(value: str, tail_keys: tuple[str, ...]) -> dict[str, str]:
    """``direction=lower; severity=high; ...; argument=free text`` -> a dict. A tail key's value (the
    free text) runs to the end of the line, so it may hold separators."""
    out: dict[str, str] = {}
    tail = re.search(r"(?:^|[;|,])\s*(?:" + "|".join(tail_keys) + r")\s*[=:]", value, re.IGNORECASE)
    head, rest = (value[:tail.start()], value[tail.start():]) if tail else (value, "")
    matches = list(_SEGMENT_KEY.finditer(head))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(head)
        out[norm_key(match.group("key"))] = head[match.end():end].strip(" ;|,")
    tail_match = _TAIL.match(rest.lstrip(";|, ")) if rest else None
    if tail_match is not None:
        out[norm_key(tail_match.group("key"))] = tail_match.group("text").strip()
    return out


@dataclass
class PointsReply:
    points: list[ChallengePoint] = field(default_factory=list)
    none_declared: bool = False
    unreadable: list[str] = field(default_factory=list)  # POINT lines that lacked a field
    notes: list[str] = field(default_factory=list)

    @property
    def parsed(self) -> bool:
        return bool(self.points) or self.none_declared


def parse_points(text: str, allowed: set[str]) -> PointsReply:
    """The challenger's ``POINT:`` lines; ``allowed``: the evidence IDs the challenger was shown."""
    reply = PointsReply()
    for key, value in fields(text, multiline=("point",)):
        if not key.startswith("point"):
            continue
        if value.strip(" .").lower() in ("none", "no points", "nothing", "n/a"):
            reply.none_declared = True
            continue
        seg = _segments(value, ("argument", "reason"))
        direction = _DIRECTION_WORDS.get(seg.get("direction", "").strip().lower().split(" ")[0] if seg.get(
            "direction") else "")
        severity = _SEVERITY_WORDS.get(seg.get("severity", "").strip().lower().split(" ")[0] if seg.get(
            "severity") else "")
        argument = seg.get("argument") or seg.get("reason") or ""
        missing = [name for name, got in (("direction", direction), ("severity", severity), ("argument", argument))
                   if not got]
        if missing:
            reply.unreadable.append(f"{value[:120]!r} lacks {', '.join(missing)}")
            continue
        kind = norm_key(seg.get("type", "")) or "unspecified"
        if kind not in POINT_TYPES:
            reply.notes.append(f"point type {kind!r} is not one of {', '.join(POINT_TYPES)}; kept as given")
        cited = evidence_ids(seg.get("evidence", "") or seg.get("evidence_ids", ""))
        invalid = [i for i in cited if i not in allowed]
        reply.points.append(ChallengePoint(
            id=f"P{len(reply.points) + 1}", direction=direction, severity=severity, type=kind,
            argument=argument, evidence_ids=cited, invalid_evidence_ids=invalid,
            valid=any(i in allowed for i in cited)))
    return reply


def _yes_no(value: str) -> bool | None:
    word = re.sub(r"[^a-z]", " ", value.lower()).split()
    if not word:
        return None
    if word[0] in _YES:
        return True
    if word[0] in _NO:
        return False
    return None


@dataclass
class ResponsesReply:
    responses: list[PointResponse] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


def parse_responses(text: str) -> ResponsesReply:
    """The reconciler's ``RESPONSE:`` lines (one per point; the last answer to a point counts)."""
    reply = ResponsesReply()
    found: dict[str, PointResponse] = {}
    for key, value in fields(text, multiline=("response",)):
        if not key.startswith("response"):
            continue
        seg = _segments(value, ("reason", "response"))
        point_match = _POINT_ID.search(seg.get("point", "") or key.removeprefix("response"))
        accepted = _yes_no(seg.get("accepted", ""))
        if point_match is None or accepted is None:
            reply.unreadable.append(f"{value[:120]!r} lacks " + ", ".join(
                n for n, ok in (("point", point_match), ("accepted", accepted is not None)) if not ok))
            continue
        effect: float | None = None
        if seg.get("effect"):
            number = _NUMBER.search(seg["effect"])
            effect = float(number.group(0).replace(",", ".")) if number else None
        point = f"P{int(point_match.group(1))}"
        found[point] = PointResponse(point=point, accepted=accepted, effect_pp=effect if accepted else 0.0,
                                     reason=seg.get("reason", "") or seg.get("response", ""))
    reply.responses = list(found.values())
    return reply


@dataclass
class DirectionsReply:
    labels: dict[str, str] = field(default_factory=dict)
    unknown_ids: list[str] = field(default_factory=list)


_DIRECTION_LINE = re.compile(r"^[\s>*_#`-]*\[?E\s?-?(?P<id>\d{1,4})\]?[\s*_`]*[:=\-–—]+\s*[*_`]*(?P<label>[A-Za-z]+)",
                             re.IGNORECASE)


def parse_directions(text: str, ids: set[str]) -> DirectionsReply:
    """``E1: supports`` lines; labels for IDs the model was not shown are set aside (named)."""
    reply = DirectionsReply()
    for line in text.splitlines():
        match = _DIRECTION_LINE.match(line)
        if match is None:
            continue
        label = _LABEL_WORDS.get(match.group("label").lower())
        item = f"E{int(match.group('id'))}"
        if label is None:
            continue
        if item not in ids:
            reply.unknown_ids.append(item)
            continue
        reply.labels[item] = label
    return reply


@dataclass
class ValidationReply:
    grounded: bool | None = None
    direction_consistent: bool | None = None
    issues: list[str] = field(default_factory=list)

    @property
    def parsed(self) -> bool:
        return self.grounded is not None and self.direction_consistent is not None


def parse_validation(text: str) -> ValidationReply:
    pairs = fields(text, multiline=("issues",))
    reply = ValidationReply()
    grounded, direction, issues = _last(pairs, ("grounded", "grounding")), _last(pairs, ("direction",)), \
        _last(pairs, ("issues", "issue", "problems"))
    reply.grounded = _yes_no(grounded) if grounded is not None else None
    reply.direction_consistent = _yes_no(direction) if direction is not None else None
    if issues and issues.strip(" .").lower() not in ("none", "no", "n/a", "-"):
        reply.issues = [i.strip() for i in re.split(r";\s*", issues) if i.strip()]
    return reply
