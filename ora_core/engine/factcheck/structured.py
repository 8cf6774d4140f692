"""The debate roles' replies as JSON, where the role's backend can constrain its reply to a schema.

A role whose backend declares ``structured_output`` is asked for one JSON object (the schemas below)
instead of the fenced ``KEY: value`` block, and its backend generates the reply under that schema
(llama.cpp's grammar in process, ``response_format`` on an OpenAI-compatible server). The tiny
default model never writes the block on its own (every calibration pair used to end BROKEN: "no
TRUTH; no CERTAINTY"); under a grammar it cannot leave a field out.

What the rest of the gear reads is unchanged: the reliability layer turns a constrained reply into
the role's canonical text (``render``) *before* anything reads it: the detectors, the confidence
line, the judge, the supplement parser, and the gear's own parsers (``replies.py``). Rendering
rather than parsing the JSON in the gear keeps one reader per role, and keeps JSON out of the
judge's way: a JSON string value of four words or more reads as a quotation to it, checked against
the evidence; rendered, the reasoning is prose below the fenced fields, checked like prose.

A constrained reply that does not validate (cut at its token budget, a value out of range) is
rendered as nothing: the raw text goes on as it came, and the gear's parser finds no readable
verdict in it: the role's reply is unparsed and named, and an advocate without a verdict makes its
claim BROKEN, as before. ``render`` never invents a field.

The schemas stay within what OpenAI's strict mode accepts (every key required, no other key, enums,
``pattern``) plus ``maxItems``/``maxLength`` bounds that keep a small model's reply inside its token
budget (a server that refuses them: ``options.json_schema_strict = false`` or ``response_format =
"json_object"``, see ora-openai).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ora_core.engine.reliability import StepSpec
from ora_core.engine.turn_state import GearContext

from .replies import POINT_TYPES

FENCE = "```"
#: 0.00, 0.05, ... 1.00: the confidence line the reliability layer reads (``CONFIDENCE: 0.xx``)
CONFIDENCE_STEPS = [round(i / 20, 2) for i in range(21)]
PERCENT = {"type": "integer", "enum": list(range(101))}
EVIDENCE_ID = {"type": "string", "pattern": "^E[0-9]{1,4}$"}
#: Bounds that keep a whole reply inside the compact profile's reply caps (analyst and reviser 160
#: tokens, evaluator 224; ``profiles.CompactFit.max_tokens``), measured on the bundled model: its JSON
#: verdict without reasoning is ~40 tokens, and ~4 characters of reasoning make one more. A reply cut
#: at its cap does not validate: bounded, the grammar closes it in time.
REASONING_CHARS = 320
ARGUMENT_CHARS = 120
REASON_CHARS = 80
MAX_CITED = 6
MAX_POINTS = 3
MAX_POINT_EVIDENCE = 3


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _confidence() -> dict[str, Any]:
    return {"type": "number", "enum": CONFIDENCE_STEPS}


VERDICT_FIELDS: dict[str, Any] = {
    "truth": PERCENT,
    "certainty": PERCENT,
    "cited": {"type": "array", "items": EVIDENCE_ID, "maxItems": MAX_CITED},
    "reasoning": {"type": "string", "maxLength": REASONING_CHARS},
}
VERDICT_SCHEMA = _object({**VERDICT_FIELDS, "confidence": _confidence()})
POINTS_SCHEMA = _object({
    "points": {"type": "array", "maxItems": MAX_POINTS, "items": _object({
        "direction": {"type": "string", "enum": ["higher", "lower"]},
        "severity": {"type": "string", "enum": ["high", "medium", "low"]},
        "type": {"type": "string", "enum": list(POINT_TYPES)},
        "evidence": {"type": "array", "items": EVIDENCE_ID, "maxItems": MAX_POINT_EVIDENCE},
        "argument": {"type": "string", "maxLength": ARGUMENT_CHARS}})},
    "confidence": _confidence()})
RESPONSES_SCHEMA = _object({
    "responses": {"type": "array", "maxItems": MAX_POINTS, "items": _object({
        "point": {"type": "string", "pattern": "^P[0-9]{1,2}$"},
        "accepted": {"type": "boolean"},
        "effect": {"type": "integer", "enum": list(range(-100, 101))},
        "reason": {"type": "string", "maxLength": REASON_CHARS}})},
    **VERDICT_FIELDS, "confidence": _confidence()})
VALIDATION_SCHEMA = _object({
    "grounded": {"type": "boolean"},
    "direction": {"type": "string", "enum": ["consistent", "inconsistent"]},
    "issues": {"type": "array", "items": {"type": "string", "maxLength": ARGUMENT_CHARS}, "maxItems": MAX_POINTS},
    "confidence": _confidence()})

_CONFIDENCE_LINE = ('"confidence": how far the evidence supports what you wrote, one of 0.0, 0.05, ... 1.0 '
                    "(1.0: every statement rests on it)")
VERDICT_FORMAT = f"""\
Reply with one JSON object:
"truth": 0-100, how true the claim is on this evidence (100 certainly true, 0 certainly false, 50 undecided);
"certainty": 0-100, how sure you are of that number, given how much evidence there is and how good it is;
"cited": the IDs of the items your verdict rests on, e.g. ["E1", "E3"], or [];
"reasoning": two to five sentences that name the items by ID;
{_CONFIDENCE_LINE}."""
POINTS_FORMAT = f"""\
Reply with one JSON object: "points": one entry per point, each with
"direction": "higher" or "lower" (should the truth percentage be higher or lower than the advocate's);
"severity": "high" (20 points or more), "medium" (8 to 19) or "low" (under 8);
"type": one of {", ".join(POINT_TYPES)};
"evidence": the IDs of the items you were shown that the point rests on (a point without valid IDs does not count);
"argument": one or two sentences.
Argue both directions where the evidence allows; "points": [] if you find nothing.
{_CONFIDENCE_LINE}."""
RESPONSES_FORMAT = f"""\
Reply with one JSON object:
"responses": one entry per challenge point: "point" (its ID, e.g. "P1"), "accepted" (true or false),
"effect" (how many points it moved your truth percentage, signed, e.g. -8; 0 if rejected), "reason" (one sentence);
then your reconciled verdict: "truth" (0-100), "certainty" (0-100), "cited" (the IDs it rests on, or []),
"reasoning" (two to five sentences that name the items by ID);
{_CONFIDENCE_LINE}."""
VALIDATION_FORMAT = f"""\
Reply with one JSON object:
"grounded": true when every statement of the reasoning rests on the cited items, else false;
"direction": "consistent" when the truth percentage is above 50 where the cited evidence mostly supports the claim
and below 50 where it mostly contradicts it, else "inconsistent";
"issues": what is wrong, one entry each, or [];
{_CONFIDENCE_LINE}."""


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    confidence: float = Field(ge=0.0, le=1.0)


class VerdictJSON(_Reply):
    truth: int = Field(ge=0, le=100)
    certainty: int = Field(ge=0, le=100)
    cited: list[str] = Field(max_length=MAX_CITED)
    reasoning: str


class PointJSON(BaseModel):
    model_config = ConfigDict(extra="forbid")

    direction: Literal["higher", "lower"]
    severity: Literal["high", "medium", "low"]
    type: str
    evidence: list[str]
    argument: str


class PointsJSON(_Reply):
    points: list[PointJSON] = Field(max_length=MAX_POINTS)


class ResponseJSON(BaseModel):
    model_config = ConfigDict(extra="forbid")

    point: str
    accepted: bool
    effect: int = Field(ge=-100, le=100)
    reason: str


class ResponsesJSON(VerdictJSON):
    responses: list[ResponseJSON] = Field(max_length=MAX_POINTS)


class ValidationJSON(_Reply):
    grounded: bool
    direction: Literal["consistent", "inconsistent"]
    issues: list[str]


def _line(text: str) -> str:
    """One line of a ``KEY: value`` block: no line break, no separator that starts another field."""
    return " ".join(text.replace(";", ",").split())


def _confidence_line(value: float) -> str:
    return f"CONFIDENCE: {value:.2f}"


def _verdict_lines(reply: VerdictJSON) -> list[str]:
    return [f"TRUTH: {reply.truth}", f"CERTAINTY: {reply.certainty}",
            f"CITED: {', '.join(_line(c) for c in reply.cited) or 'none'}"]


def _prose(reasoning: str) -> str:
    # a line of its own that looks like a field would be read as one: prose stays prose
    return " ".join(reasoning.split())


def render_verdict(reply: VerdictJSON) -> str:
    """The advocate's (and a re-run's) canonical reply: the fenced fields, the reasoning below them."""
    return "\n".join([FENCE, *_verdict_lines(reply), FENCE, _prose(reply.reasoning),
                      _confidence_line(reply.confidence)])


def render_points(reply: PointsJSON) -> str:
    if not reply.points:
        lines = ["POINT: none"]
    else:
        lines = [f"POINT: direction={p.direction}; severity={p.severity}; type={_line(p.type)}; "
                 f"evidence={', '.join(_line(e) for e in p.evidence) or 'none'}; "
                 f"argument={' '.join(p.argument.split())}" for p in reply.points]
    return "\n".join([FENCE, *lines, FENCE, _confidence_line(reply.confidence)])


def render_responses(reply: ResponsesJSON) -> str:
    lines = [f"RESPONSE: point={_line(r.point)}; accepted={'yes' if r.accepted else 'no'}; effect={r.effect}; "
             f"reason={' '.join(r.reason.split())}" for r in reply.responses]
    return "\n".join([FENCE, *lines, *_verdict_lines(reply), FENCE, _prose(reply.reasoning),
                      _confidence_line(reply.confidence)])


def render_directions(reply: Any) -> str:
    """``{"E1": "supports", ..., "confidence": 0.8}`` (a model of ``directions_format``) as ``E1: supports`` lines."""
    labels = {k: v for k, v in reply.model_dump().items() if k != "confidence"}
    return "\n".join([FENCE, *(f"{item}: {label}" for item, label in labels.items()), FENCE,
                      _confidence_line(reply.confidence)])


def render_validation(reply: ValidationJSON) -> str:
    issues = "; ".join(_line(i) for i in reply.issues if i.strip()) or "none"
    return "\n".join([FENCE, f"GROUNDED: {'yes' if reply.grounded else 'no'}", f"DIRECTION: {reply.direction}",
                      f"ISSUES: {issues}", FENCE, _confidence_line(reply.confidence)])


@dataclass(frozen=True)
class StructuredFormat:
    """One role's JSON reply: the schema sent, the task text that explains it, and the renderer."""

    name: str
    schema: dict[str, Any]
    form: str  # the reply-format paragraph of the role's task
    model: type[BaseModel]
    renderer: Callable[[Any], str]

    def render(self, text: str) -> str:
        """The canonical text of a constrained reply, or ``text`` as it came when it does not validate
        (the gear's parser then names the reply unparsed; nothing is filled in)."""
        try:
            reply = self.model.model_validate_json(text)
        except (ValidationError, ValueError):
            return text
        return self.renderer(reply)

    def problem(self, text: str) -> str | None:
        """Why ``text`` is not a valid reply of this format (None when it is)."""
        try:
            self.model.model_validate_json(text)
        except ValidationError as exc:
            return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}" for e in exc.errors()[:3])
        except ValueError as exc:
            return str(exc)
        return None


VERDICT = StructuredFormat("factcheck_verdict", VERDICT_SCHEMA, VERDICT_FORMAT, VerdictJSON, render_verdict)
POINTS = StructuredFormat("factcheck_points", POINTS_SCHEMA, POINTS_FORMAT, PointsJSON, render_points)
RESPONSES = StructuredFormat("factcheck_reconciliation", RESPONSES_SCHEMA, RESPONSES_FORMAT, ResponsesJSON,
                             render_responses)
VALIDATION = StructuredFormat("factcheck_validation", VALIDATION_SCHEMA, VALIDATION_FORMAT, ValidationJSON,
                              render_validation)


LABELS = ["supports", "contradicts", "neutral"]
DIRECTIONS_FORMAT = f"""\
Reply with one JSON object: one key per item, its ID (e.g. "E1"), whose value is "supports" (the item is evidence
that the claim is true), "contradicts" (evidence that it is false) or "neutral" (off the point, or neither);
{_CONFIDENCE_LINE}."""


def directions_format(ids: list[str]) -> StructuredFormat:
    """The evidence labeller's reply for one call: a label for each of ``ids`` and no other key (the
    schema is built per call, so the grammar cannot leave an item out or invent one)."""
    schema = _object({**{i: {"type": "string", "enum": LABELS} for i in ids}, "confidence": _confidence()})
    return StructuredFormat("factcheck_directions", schema, DIRECTIONS_FORMAT, _directions_model(tuple(ids)),
                            render_directions)


def _directions_model(ids: tuple[str, ...]) -> type[BaseModel]:
    """``ids`` as required fields of a label each, beside the confidence; no other key."""
    fields: dict[str, Any] = {i: (Literal["supports", "contradicts", "neutral"], ...) for i in ids}
    return create_model("DirectionsReply", __base__=_Reply, **fields)


def structured_role(gc: GearContext, role: str) -> bool:
    """The backend planned for ``role`` declares it can constrain a reply to a JSON schema. A fallback
    that cannot answers as text: the renderer is then not applied and the gear parses that text."""
    return getattr(gc.pool.get(gc.backend_for(role)), "structured_output", False) is True


def apply(spec: StepSpec, fmt: StructuredFormat) -> StepSpec:
    """Ask ``spec``'s role for ``fmt``'s JSON: the reliability layer sends ``response_schema`` with the
    call and renders a constrained reply with ``render_structured`` before anything reads it."""
    spec.response_schema = fmt.schema
    spec.schema_name = fmt.name
    spec.render_structured = fmt.render
    return spec

