"""The trace facts a probe expects: a small typed language, checked against files on disk.

Each fact reads the turn's files through ``TurnFiles`` and says whether it held, what it expected,
what the trace shows and which file it read. A file the fact needs that is missing or malformed
makes the fact fail with that file named; it never counts as holding. The language (documented in
``docs/probes.md``):

- ``step_ran`` / ``step_absent``: a step file ``NN-<step>.json`` exists / does not;
- ``field``: a value in a JSON file, addressed by a path, ``equals`` / ``contains`` / ``matches``
  (a regular expression) / ``one_of`` / ``exists``, ``negate`` turning the check around;
- ``contingency``: a contingency (by ``name``, or a ``matches`` pattern) fired, or (``fired =
  false``) did not, per ``contingencies.jsonl``;
- ``jsonl``: a JSONL log has ``count`` (or at least ``min``, at most ``max``) records whose fields
  equal ``where`` and match ``where_matches``;
- ``answer``: the shipped answer (``turn.json``'s ``answer``) ``contains`` / ``lacks`` a pattern;
- ``status``: the turn's status (``turn.json``) is ``one_of`` the given ones;
- ``clock_consistent``: the times and dates a text states (by default the shipped answer) agree with
  the clock reading the trace recorded (by default direct-response's ``input.clock``), checked here
  and not by the detector under test;
- ``any_of``: at least one of its ``facts`` holds.

Paths are dot-separated: a key (``output.bypass``), a quoted key (``output.mode_sections."DEPTH
ANALYSIS GUIDANCE"``), a list index (``messages.0.content``), ``*`` (every element or value) and
``[key=value]`` (the list elements whose ``key`` is ``value``: ``steps[step=phase-a].verdict``). A
path that reaches several values holds only when the check holds for every one of them.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ora_core.engine.measure.tracefiles import TraceFileError, TurnFiles

MAX_SHOWN = 240


class FactResult(BaseModel):
    """One checked fact: what was expected, what the trace shows, the file it was read from."""

    model_config = ConfigDict(extra="forbid")

    fact: str
    held: bool
    expected: str
    actual: str
    file: str | None = None
    why: str = ""
    alternatives: list[FactResult] = Field(default_factory=list)  # any_of: each alternative's result


class _Fact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    why: str = ""  # what the fact shows, for the report

    def check(self, files: TurnFiles) -> FactResult:  # pragma: no cover - every kind overrides it
        raise NotImplementedError(type(self).__name__)

    def describe(self) -> str:  # pragma: no cover - every kind overrides it
        raise NotImplementedError(type(self).__name__)

    def _result(self, held: bool, expected: str, actual: str, file: Any = None) -> FactResult:
        return FactResult(fact=self.describe(), held=held, expected=expected, actual=_cut(actual),
                          file=str(file) if file is not None else None, why=self.why)

    def _missing(self, error: TraceFileError, expected: str) -> FactResult:
        return self._result(False, expected, f"cannot read the trace: {error.problem}", error.path)


def _cut(text: str, limit: int = MAX_SHOWN) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _compile(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
    return pattern


# --- paths --------------------------------------------------------------------------------------

_SELECT = re.compile(r"^\[(?P<key>[^=\]]+)=(?P<value>[^\]]*)\]$")


def parse_path(path: str) -> list[tuple[str, Any]]:
    """``[("key", name) | ("all", None) | ("select", (key, value))]``; a ``ValueError`` naming the
    problem for a malformed path."""
    if not path.strip():
        raise ValueError("the path is empty")
    parts: list[str] = []
    current = ""
    quote = bracket = False
    for char in path:
        if char == '"' and not bracket:
            quote = not quote
            current += char
        elif char == "[" and not quote:
            if current and not bracket:
                parts.append(current)
                current = ""
            bracket = True
            current += char
        elif char == "]" and not quote:
            bracket = False
            current += char
            parts.append(current)
            current = ""
        elif char == "." and not quote and not bracket:
            if current:
                parts.append(current)
            elif not parts or not parts[-1].startswith("["):
                raise ValueError(f"path {path!r} has an empty segment")
            current = ""
        else:
            current += char
    if quote or bracket:
        raise ValueError(f"path {path!r} has an unclosed {'quote' if quote else 'bracket'}")
    if current:
        parts.append(current)
    tokens: list[tuple[str, Any]] = []
    for part in parts:
        if part == "*":
            tokens.append(("all", None))
        elif part.startswith("["):
            match = _SELECT.match(part)
            if match is None:
                raise ValueError(f"path {path!r}: {part!r} is not a [key=value] selector")
            tokens.append(("select", (match.group("key").strip(), match.group("value").strip())))
        elif part.startswith('"') and part.endswith('"') and len(part) >= 2:
            tokens.append(("key", part[1:-1]))
        else:
            tokens.append(("key", part))
    return tokens


def resolve(doc: Any, path: str) -> tuple[list[tuple[str, Any]], str]:
    """The ``(concrete path, value)`` pairs ``path`` reaches in ``doc``, and, when none, why."""
    found: list[tuple[str, Any]] = [("", doc)]
    for kind, arg in parse_path(path):
        nxt: list[tuple[str, Any]] = []
        why = ""
        for where, value in found:
            here = where or "(top)"
            if kind == "key":
                if isinstance(value, dict):
                    if arg in value:
                        nxt.append((_join(where, arg), value[arg]))
                    else:
                        keys = ", ".join(sorted(str(k) for k in value)[:12]) or "none"
                        why = f"no key {arg!r} at {here} (keys: {keys})"
                elif isinstance(value, list) and re.fullmatch(r"-?\d+", arg):
                    index = int(arg)
                    if -len(value) <= index < len(value):
                        nxt.append((f"{where}.{index}" if where else str(index), value[index]))
                    else:
                        why = f"index {index} is out of range at {here} ({len(value)} element(s))"
                else:
                    why = f"{here} is {_kind(value)}, not an object: no key {arg!r}"
            elif kind == "all":
                if isinstance(value, dict):
                    nxt.extend((_join(where, str(k)), v) for k, v in value.items())
                    if not value:
                        why = f"{here} is an empty object"
                elif isinstance(value, list):
                    nxt.extend((f"{where}.{i}" if where else str(i), v) for i, v in enumerate(value))
                    if not value:
                        why = f"{here} is an empty list"
                else:
                    why = f"{here} is {_kind(value)}, not a list or an object"
            else:
                key, wanted = arg
                if not isinstance(value, list):
                    why = f"{here} is {_kind(value)}, not a list: [{key}={wanted}] selects list elements"
                    continue
                hits = [(i, v) for i, v in enumerate(value)
                        if isinstance(v, dict) and key in v and _text(v[key]) == wanted]
                nxt.extend((f"{where}[{key}={wanted}]" if len(hits) == 1 else f"{where}.{i}", v) for i, v in hits)
                if not hits:
                    seen = sorted({_text(v.get(key)) for v in value if isinstance(v, dict) and key in v})
                    why = (f"no element of {here} has {key}={wanted!r} (values: "
                           f"{', '.join(repr(s) for s in seen[:10]) or 'none'})")
        found = nxt
        if not found:
            return [], why
    return found, ""


def _join(where: str, key: str) -> str:
    plain = re.fullmatch(r"[A-Za-z0-9_\-]+", key) is not None
    shown = key if plain else f'"{key}"'
    return f"{where}.{shown}" if where else shown


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), type(value).__name__)


# --- the fact kinds -------------------------------------------------------------------------------

def _step_exists(files: TurnFiles, step: str) -> tuple[bool, str]:
    """Whether ``step`` has a step file, and the steps on disk; raises ``TraceFileError``."""
    steps = files.steps()
    return step in steps, ", ".join(steps) or "no step files"


class StepRan(_Fact):
    kind: Literal["step_ran"]
    step: str = Field(min_length=1)

    def describe(self) -> str:
        return f"step {self.step!r} ran"

    def check(self, files: TurnFiles) -> FactResult:
        expected = f"a step file NN-{self.step}.json"
        try:
            ran, steps = _step_exists(files, self.step)
        except TraceFileError as exc:
            return self._missing(exc, expected)
        return self._result(ran, expected, f"steps on disk: {steps}", files.step_path(self.step) or files.path)


class StepAbsent(_Fact):
    kind: Literal["step_absent"]
    step: str = Field(min_length=1)

    def describe(self) -> str:
        return f"step {self.step!r} did not run"

    def check(self, files: TurnFiles) -> FactResult:
        expected = f"no step file NN-{self.step}.json"
        try:
            ran, steps = _step_exists(files, self.step)
        except TraceFileError as exc:
            return self._missing(exc, expected)
        return self._result(not ran, expected, f"steps on disk: {steps}", files.step_path(self.step) or files.path)


_OPS = ("equals", "contains", "matches", "one_of", "exists")


class FieldFact(_Fact):
    kind: Literal["field"]
    file: str = Field(min_length=1)  # turn.json | step-health.json | step:<step> | <log>.jsonl | root:<path>
    path: str
    equals: Any = None
    contains: Any = None
    matches: str | None = None
    one_of: list[Any] | None = None
    exists: bool | None = None
    negate: bool = False

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        parse_path(value)
        return value

    @field_validator("matches")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        return _compile(value) if value is not None else None

    @model_validator(mode="after")
    def _one_op(self) -> FieldFact:
        given = [op for op in _OPS if op in self.model_fields_set]
        if len(given) != 1:
            raise ValueError(f"a field fact needs exactly one of {', '.join(_OPS)} "
                             f"(given: {', '.join(given) or 'none'})")
        return self

    @property
    def op(self) -> str:
        return next(op for op in _OPS if op in self.model_fields_set)

    def describe(self) -> str:
        op = self.op
        arg = getattr(self, op)
        shown = {"exists": "exists" if arg else "is absent"}.get(op, f"{op.replace('_', ' ')} {_show(arg)}")
        return f"{self.file}: {self.path} {'NOT ' if self.negate else ''}{shown}"

    def _holds(self, value: Any) -> bool:
        op = self.op
        if op == "equals":
            result = value == self.equals
        elif op == "contains":
            if isinstance(value, str):
                result = isinstance(self.contains, str) and self.contains in value
            elif isinstance(value, list):
                result = self.contains in value
            elif isinstance(value, dict):
                result = isinstance(self.contains, str) and self.contains in value
            else:
                result = False
        elif op == "matches":
            result = re.search(self.matches or "", _text(value)) is not None
        else:
            result = value in (self.one_of or [])
        return result != self.negate

    def check(self, files: TurnFiles) -> FactResult:
        expected = self.describe().split(": ", 1)[1]
        try:
            path = files.resolve(self.file)
            doc = files.document(self.file)
        except TraceFileError as exc:
            return self._missing(exc, expected)
        values, why = resolve(doc, self.path)
        if self.op == "exists":
            present = bool(values) == bool(self.exists)
            held = present != self.negate
            actual = (f"{self.path} = " + "; ".join(f"{w}: {_show(v)}" for w, v in values)) if values else why
            return self._result(held, expected, actual, path)
        if not values:
            return self._result(False, expected, f"path not found: {why}", path)
        failing = [(w, v) for w, v in values if not self._holds(v)]
        shown = failing or values
        actual = "; ".join(f"{w} = {_show(v)}" for w, v in shown[:5])
        if failing and len(values) > 1:
            actual = f"{len(failing)} of {len(values)} value(s) do not: " + actual
        return self._result(not failing, expected, actual, path)


class ContingencyFact(_Fact):
    kind: Literal["contingency"]
    name: str | None = None
    matches: str | None = None
    fired: bool = True

    @field_validator("matches")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        return _compile(value) if value is not None else None

    @model_validator(mode="after")
    def _name_or_pattern(self) -> ContingencyFact:
        if (self.name is None) == (self.matches is None):
            raise ValueError("a contingency fact needs exactly one of 'name' and 'matches'")
        return self

    def describe(self) -> str:
        which = f"{self.name!r}" if self.name is not None else f"matching {self.matches!r}"
        return f"contingency {which} {'fired' if self.fired else 'did not fire'}"

    def check(self, files: TurnFiles) -> FactResult:
        expected = self.describe()
        log = "contingencies.jsonl"
        try:
            records = files.jsonl(log)
        except TraceFileError as exc:
            return self._missing(exc, expected)
        names = [str(r.get("name", "")) for r in records]
        hits = [n for n in names if (n == self.name if self.name is not None
                                     else re.search(self.matches or "", n) is not None)]
        held = bool(hits) == self.fired
        if hits:
            actual = f"fired: {', '.join(dict.fromkeys(hits))}"
        else:
            actual = f"none fired; contingencies: {', '.join(dict.fromkeys(names)) or 'none'}"
        return self._result(held, expected, actual, files.resolve(log))


class JsonlFact(_Fact):
    kind: Literal["jsonl"]
    file: str = Field(min_length=1)
    where: dict[str, Any] = Field(default_factory=dict)
    where_matches: dict[str, str] = Field(default_factory=dict)
    count: int | None = Field(default=None, ge=0)
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

    @field_validator("file")
    @classmethod
    def _jsonl(cls, value: str) -> str:
        if not value.endswith(".jsonl"):
            raise ValueError(f"{value!r} is not a JSONL log (*.jsonl)")
        return value

    @field_validator("where_matches")
    @classmethod
    def _patterns(cls, value: dict[str, str]) -> dict[str, str]:
        for key, pattern in value.items():
            parse_path(key)
            _compile(pattern)
        return value

    @model_validator(mode="after")
    def _bounds(self) -> JsonlFact:
        if self.count is None and self.min is None and self.max is None:
            raise ValueError("a jsonl fact needs 'count', 'min' or 'max'")
        if self.count is not None and (self.min is not None or self.max is not None):
            raise ValueError("give either 'count' or 'min'/'max', not both")
        for key in self.where:
            parse_path(key)
        return self

    def _bound_text(self) -> str:
        if self.count is not None:
            return f"exactly {self.count}"
        parts = ([f"at least {self.min}"] if self.min is not None else []) + \
                ([f"at most {self.max}"] if self.max is not None else [])
        return " and ".join(parts)

    def describe(self) -> str:
        filters = [f"{k} = {_show(v)}" for k, v in self.where.items()]
        filters += [f"{k} matches {v!r}" for k, v in self.where_matches.items()]
        return (f"{self.file} has {self._bound_text()} record(s)"
                + (f" with {' and '.join(filters)}" if filters else ""))

    def _selected(self, record: dict[str, Any]) -> bool:
        for key, wanted in self.where.items():
            values, _ = resolve(record, key)
            if not any(v == wanted for _, v in values):
                return False
        for key, pattern in self.where_matches.items():
            values, _ = resolve(record, key)
            if not any(re.search(pattern, _text(v)) for _, v in values):
                return False
        return True

    def check(self, files: TurnFiles) -> FactResult:
        expected = self.describe().split(" has ", 1)[1]
        try:
            path = files.resolve(self.file)
            records = files.jsonl(self.file)
        except TraceFileError as exc:
            return self._missing(exc, expected)
        hits = [r for r in records if self._selected(r)]
        n = len(hits)
        held = (n == self.count) if self.count is not None else (
            (self.min is None or n >= self.min) and (self.max is None or n <= self.max))
        actual = f"{n} of {len(records)} record(s) match"
        if hits:
            actual += f"; first: {_show(hits[0])}"
        elif records:
            actual += f"; first record: {_show(records[0])}"
        return self._result(held, expected, actual, path)


class AnswerFact(_Fact):
    kind: Literal["answer"]
    contains: str | None = None
    lacks: str | None = None

    @field_validator("contains", "lacks")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        return _compile(value) if value is not None else None

    @model_validator(mode="after")
    def _one(self) -> AnswerFact:
        if (self.contains is None) == (self.lacks is None):
            raise ValueError("an answer fact needs exactly one of 'contains' and 'lacks'")
        return self

    def describe(self) -> str:
        return (f"the answer contains {self.contains!r}" if self.contains is not None
                else f"the answer lacks {self.lacks!r}")

    def check(self, files: TurnFiles) -> FactResult:
        expected = self.describe().removeprefix("the answer ")
        try:
            turn = files.turn()
        except TraceFileError as exc:
            return self._missing(exc, expected)
        answer = turn.get("answer")
        if not isinstance(answer, str):
            return self._result(False, expected, f"turn.json has no answer ({_show(answer)}; status "
                                f"{turn.get('status')!r})", files.path / "turn.json")
        pattern = self.contains if self.contains is not None else self.lacks
        match = re.search(pattern or "", answer)
        held = (match is not None) == (self.contains is not None)
        if match is not None:
            start = max(0, match.start() - 60)
            actual = f"found {match.group(0)!r} in …{answer[start:match.end() + 60]}…"
        else:
            actual = f"not found in the answer: {answer!r}"
        return self._result(held, expected, actual, files.path / "turn.json")


class StatusFact(_Fact):
    kind: Literal["status"]
    one_of: list[Literal["ok", "degraded", "needs_clarification", "halted"]] = Field(min_length=1)

    def describe(self) -> str:
        return f"the turn's status is one of {', '.join(self.one_of)}"

    def check(self, files: TurnFiles) -> FactResult:
        expected = f"status in {self.one_of}"
        try:
            turn = files.turn()
        except TraceFileError as exc:
            return self._missing(exc, expected)
        status = turn.get("status")
        return self._result(status in self.one_of, expected, f"status {status!r}", files.path / "turn.json")


_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2}))?")
_CLOCK_TIME = re.compile(r"(?<![\w:.-])([01]?\d|2[0-3])[:.h]([0-5]\d)(?::[0-5]\d)?\s*(a\.?m\.?|p\.?m\.?)?(?!\w)", re.I)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY = re.compile(r"\b(" + "|".join(_WEEKDAYS) + r")\b", re.I)
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH_DAY = re.compile(r"\b(" + "|".join(_MONTHS) + r")\s+(\d{1,2})(?:st|nd|rd|th)?\b"
                        r"|\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(" + "|".join(_MONTHS) + r")\b", re.I)
CLOCK_TOLERANCE_MIN = 3


def clock_contradictions(text: str, readings: list[Any]) -> list[str]:
    """The times and dates in ``text`` that none of the clock ``readings`` (datetimes) supports:
    clock times (``09:45``, ``9.45 pm``, the time of an ISO timestamp, within
    ``CLOCK_TOLERANCE_MIN`` minutes), ISO dates, weekday names and month-day dates."""
    wrong: list[str] = []

    def time_ok(hour: int, minute: int) -> bool:
        said = hour * 60 + minute
        apart = [abs(said - (r.hour * 60 + r.minute)) % 1440 for r in readings]
        return any(min(a, 1440 - a) <= CLOCK_TOLERANCE_MIN for a in apart)

    masked = text
    for m in _ISO.finditer(text):
        year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
        date_ok = any((r.year, r.month, r.day) == (year, month, day) for r in readings)
        if not date_ok or (m.group(4) is not None and not time_ok(int(m.group(4)), int(m.group(5)))):
            wrong.append(m.group(0))
        masked = masked[:m.start()] + " " * (m.end() - m.start()) + masked[m.end():]
    for m in _CLOCK_TIME.finditer(masked):
        hour, minute = int(m.group(1)), int(m.group(2))
        suffix = (m.group(3) or "").replace(".", "").lower()
        hour = hour + 12 if suffix == "pm" and hour < 12 else (0 if suffix == "am" and hour == 12 else hour)
        if not time_ok(hour, minute):
            wrong.append(m.group(0).strip())
    days = {r.strftime("%A").lower() for r in readings}
    wrong += [m.group(0) for m in _WEEKDAY.finditer(masked) if m.group(1).lower() not in days]
    dates = {(r.strftime("%B").lower(), r.day) for r in readings}
    for m in _MONTH_DAY.finditer(masked):
        if ((m.group(1) or m.group(4)).lower(), int(m.group(2) or m.group(3))) not in dates:
            wrong.append(m.group(0))
    return wrong


class ClockFact(_Fact):
    """The times and dates a text states agree with the clock reading the trace recorded."""

    kind: Literal["clock_consistent"]
    file: str = "step:direct-response"  # the file holding the clock reading
    clock: str = "input.clock"  # its path: an object with ISO timestamps ``utc`` and/or ``local``
    text_file: str = "turn.json"
    text: str = "answer"  # the path of the text to check in ``text_file``

    @field_validator("clock", "text")
    @classmethod
    def _path(cls, value: str) -> str:
        parse_path(value)
        return value

    def describe(self) -> str:
        return (f"{self.text_file}: {self.text} states no time or date the clock reading "
                f"({self.file}: {self.clock}) contradicts")

    def check(self, files: TurnFiles) -> FactResult:
        from datetime import datetime

        expected = "every time and date stated agrees with the recorded clock reading"
        try:
            clock_doc = files.document(self.file)
            text_doc = files.document(self.text_file)
        except TraceFileError as exc:
            return self._missing(exc, expected)
        found, why = resolve(clock_doc, self.clock)
        reading = found[0][1] if found else None
        readings = []
        for key in ("utc", "local"):
            value = reading.get(key) if isinstance(reading, dict) else None
            if isinstance(value, str):
                try:
                    readings.append(datetime.fromisoformat(value))
                except ValueError:
                    return self._result(False, expected, f"clock reading {key} {value!r} is not ISO",
                                        files.resolve(self.file))
        if not readings:
            return self._result(False, expected, f"no clock reading: {why or _show(reading)}", files.resolve(self.file))
        texts, why = resolve(text_doc, self.text)
        if not texts or not isinstance(texts[0][1], str):
            return self._result(False, expected, f"no text at {self.text}: {why or _show(texts[0][1])}",
                                files.resolve(self.text_file))
        text = texts[0][1]
        wrong = clock_contradictions(text, readings)
        clock = ", ".join(sorted({r.isoformat() for r in readings}))
        actual = (f"contradicts the clock ({clock}): {', '.join(repr(w) for w in wrong)} in {text!r}" if wrong
                  else f"agrees with the clock ({clock}): {text!r}")
        return self._result(not wrong, expected, actual, files.resolve(self.text_file))


class AnyOf(_Fact):
    kind: Literal["any_of"]
    facts: list[Fact] = Field(min_length=2)

    def describe(self) -> str:
        return "any of: " + " | ".join(f.describe() for f in self.facts)

    def check(self, files: TurnFiles) -> FactResult:
        results = [f.check(files) for f in self.facts]
        held = any(r.held for r in results)
        actual = " | ".join(f"{r.fact}: {r.actual}" for r in results)
        result = self._result(held, "at least one of the alternatives", actual, files.path)
        result.alternatives = results
        return result


Fact = Annotated[Union[StepRan, StepAbsent, FieldFact, ContingencyFact, JsonlFact, AnswerFact, StatusFact, ClockFact,
                       AnyOf], Field(discriminator="kind")]
AnyOf.model_rebuild()
FactResult.model_rebuild()


def check_facts(facts: list[Any], files: TurnFiles) -> list[FactResult]:
    """Every fact against the files; a fact that cannot read its file fails, naming the file."""
    return [fact.check(files) for fact in facts]
