"""Modes: Markdown files with YAML front matter, loaded from every mode pack and config dirs.

A mode file looks like::

    ---
    name: cui-bono
    gear: 4
    description: Who benefits, who pays, and through which mechanism.
    signals:
      strong: [cui bono, who benefits]
      weak: [incentives, stakeholders]
    examples:
      - Which companies come out ahead when the state subsidises heat pumps?
      - Whose interests does the new zoning law serve?
    retrieval:
      types: [concept, engram]
      streams:
        conversation: {types: [chat]}
    ---
    ## DEPTH ANALYSIS GUIDANCE
    ...

``examples`` are prompts the mode is meant for, written in the words people use (not the
``signals`` vocabulary again): pre-routing's semantic signal compares a prompt with them and with
the ``description`` (``ora_core.engine.routing``). A mode without examples still routes by its
vocabulary and description; ``ora modes check`` names it.

Every mode carries the seven ``REQUIRED_SECTIONS``. A file whose front matter is malformed,
whose gear is unknown, or whose required section is missing or empty is a *named* problem
(file + field), never an empty string handed to a model (seed 000, failures #3 and #8).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from ora_core.kernel.errors import ModeError
from ora_core.kernel.models import RetrievalFilters

REQUIRED_SECTIONS: tuple[str, ...] = (
    "DEPTH ANALYSIS GUIDANCE",
    "BREADTH ANALYSIS GUIDANCE",
    "EVALUATION CRITERIA",
    "REVISION GUIDANCE",
    "VERIFICATION CRITERIA",
    "CONSOLIDATION GUIDANCE",
    "OUTPUT FORMAT GUIDANCE",
)
#: 1 direct, 2 single analyst, 3 sequential, 4 adversarial cascade, 5 fact-check debate (seed 002).
KNOWN_GEARS = (1, 2, 3, 4, 5)
STREAMS = ("concept", "conversation", "relationship", "web")

_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_HEADING = re.compile(r"^##[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModeSignals(_Strict):
    strong: list[str] = Field(default_factory=list)
    weak: list[str] = Field(default_factory=list)

    @field_validator("strong", "weak")
    @classmethod
    def _phrases(cls, value: list[str]) -> list[str]:
        cleaned = []
        for phrase in value:
            if not isinstance(phrase, str) or not phrase.strip():
                raise ValueError("every signal must be a non-empty phrase")
            cleaned.append(" ".join(phrase.lower().split()))
        return cleaned


class ModeShapes(_Strict):
    """The request shapes (signals of kind ``request_shape``: ``choice``, ``case-for``, ``definition``,
    ``creative``, ``context-reference``, ``assertion``, or any a detector names) a mode acts on in
    pre-routing: a shape in ``claims`` counts for the mode as a strong phrase does; a mode with a
    ``requires`` shape the prompt lacks stands aside (it cannot lead, compete or claim)."""

    claims: list[str] = Field(default_factory=list)
    requires: list[str] = Field(default_factory=list)

    @field_validator("claims", "requires")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not isinstance(name, str) or not _NAME.match(name):
                raise ValueError(f"every shape must be a name of lower-case letters, digits and dashes "
                                 f"(e.g. 'case-for'), got {name!r}")
        return value


class ModeRetrieval(_Strict):
    """Retrieval type filters; ``streams`` overrides the filters for one stream."""

    types: list[str] = Field(default_factory=list)
    source_types: list[str] = Field(default_factory=list)
    approved_only: bool = False
    streams: dict[str, RetrievalFilters] = Field(default_factory=dict)

    @field_validator("streams")
    @classmethod
    def _known_streams(cls, value: dict[str, RetrievalFilters]) -> dict[str, RetrievalFilters]:
        unknown = sorted(set(value) - set(STREAMS))
        if unknown:
            raise ValueError(f"unknown stream(s) {', '.join(unknown)}; known: {', '.join(STREAMS)}")
        return value

    def filters_for(self, stream: str) -> RetrievalFilters:
        if stream in self.streams:
            return self.streams[stream]
        return RetrievalFilters(types=list(self.types), source_types=list(self.source_types),
                                approved_only=self.approved_only)


def _example_prompts(value: list[str]) -> list[str]:
    cleaned = []
    for i, text in enumerate(value):
        if not text.strip():
            raise ValueError(f"example {i} is empty; every example must be a prompt (a non-empty string)")
        cleaned.append(" ".join(text.split()))
    return cleaned


class ModeFrontMatter(_Strict):
    name: str
    gear: Literal[1, 2, 3, 4, 5]
    title: str = ""
    description: str = ""
    signals: ModeSignals = Field(default_factory=ModeSignals)
    shapes: ModeShapes = Field(default_factory=ModeShapes)
    examples: list[StrictStr] = Field(default_factory=list)
    retrieval: ModeRetrieval = Field(default_factory=ModeRetrieval)

    @field_validator("examples", mode="before")
    @classmethod
    def _examples_list(cls, value: Any) -> Any:
        if value is None:
            return []
        if not isinstance(value, list):
            raise ValueError(f"must be a list of example prompts (a YAML list of strings), got "
                             f"{type(value).__name__}")
        return value

    @field_validator("examples")
    @classmethod
    def _examples(cls, value: list[str]) -> list[str]:
        return _example_prompts(value)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("must be lower-case letters, digits and dashes (e.g. 'cui-bono')")
        return value


class Mode(BaseModel):
    """A loaded mode: its front matter, its sections, and where it came from."""

    model_config = ConfigDict(extra="forbid")

    name: str
    gear: int
    title: str = ""
    description: str = ""
    signals: ModeSignals = Field(default_factory=ModeSignals)
    shapes: ModeShapes = Field(default_factory=ModeShapes)
    examples: list[str] = Field(default_factory=list)
    retrieval: ModeRetrieval = Field(default_factory=ModeRetrieval)
    sections: dict[str, str] = Field(default_factory=dict)
    path: str
    pack: str

    def section(self, name: str) -> str:
        return self.sections.get(name, "")

    @property
    def empty_sections(self) -> list[str]:
        return [s for s in REQUIRED_SECTIONS if not self.sections.get(s, "").strip()]

    @property
    def text(self) -> str:
        return "\n\n".join(f"## {k}\n{v}" for k, v in self.sections.items())


class ModeProblem(BaseModel):
    """A named problem with one mode file: the file, the field, what is wrong."""

    path: str
    field: str
    message: str
    mode: str | None = None

    def __str__(self) -> str:
        return f"{self.path}: {self.field}: {self.message}"


def parse_mode_text(text: str, path: str, pack: str = "") -> tuple[Mode | None, list[ModeProblem]]:
    """Parse one mode file. Problems are returned (each naming file and field), not raised."""
    import yaml

    problems: list[ModeProblem] = []
    match = _FRONT.match(text)
    if not match:
        return None, [ModeProblem(path=path, field="front matter",
                                  message="missing: the file must start with a '---' YAML block")]
    try:
        raw = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 2})" if where is not None else ""
        return None, [ModeProblem(path=path, field="front matter",
                                  message=f"malformed YAML{at}: {getattr(exc, 'problem', exc)}")]
    if not isinstance(raw, Mapping):
        return None, [ModeProblem(path=path, field="front matter",
                                  message=f"must be a mapping, got {type(raw).__name__}")]
    try:
        front = ModeFrontMatter.model_validate(raw)
    except ValidationError as exc:
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "front matter"
            message = err["msg"]
            if err["type"] == "extra_forbidden":
                message = "unknown key"
            elif field == "gear":
                message = f"unknown gear {err.get('input')!r}; known gears: {', '.join(map(str, KNOWN_GEARS))}"
            elif field.startswith("examples.") and err["type"] == "string_type":
                value = err.get("input")
                message = (f"every example must be a prompt (a string), got {type(value).__name__} "
                           f"{value!r}"[:200])
            elif field == "examples" and message.startswith("Value error, "):
                message = message[len("Value error, "):]
            problems.append(ModeProblem(path=path, field=field, message=message,
                                        mode=raw.get("name") if isinstance(raw.get("name"), str) else None))
        return None, problems
    body = text[match.end():]
    sections = split_sections(body)
    mode = Mode(name=front.name, gear=front.gear, title=front.title, description=front.description,
                signals=front.signals, shapes=front.shapes, examples=front.examples, retrieval=front.retrieval,
                sections=sections,
                path=path, pack=pack)
    stem = Path(path).stem
    if stem != front.name:
        problems.append(ModeProblem(path=path, field="name", mode=front.name,
                                    message=f"{front.name!r} differs from the file name {stem!r}"))
    for section in REQUIRED_SECTIONS:
        if section not in sections:
            problems.append(ModeProblem(path=path, field=f"section {section}", mode=front.name,
                                        message="missing"))
        elif not sections[section].strip():
            problems.append(ModeProblem(path=path, field=f"section {section}", mode=front.name,
                                        message="empty"))
    return mode, problems


def split_sections(body: str) -> dict[str, str]:
    """``## HEADING`` sections of a Markdown body, by upper-cased heading."""
    sections: dict[str, str] = {}
    heads = list(_HEADING.finditer(body))
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(body)
        sections[head.group(1).strip().upper()] = body[head.end():end].strip()
    return sections


class ModeLibrary:
    """Every mode of every registered pack and configured directory, with the problems found."""

    def __init__(self, modes: dict[str, Mode], problems: list[ModeProblem], sources: list[tuple[str, str]]) -> None:
        self.modes = modes
        self.problems = problems
        self.sources = sources  # (pack name, directory)

    def get(self, name: str) -> Mode:
        """The mode named ``name``; ``ModeError`` naming where it was looked for if absent."""
        try:
            return self.modes[name]
        except KeyError:
            looked = ", ".join(f"{pack} ({directory})" for pack, directory in self.sources) or "no mode pack"
            broken = [str(p) for p in self.problems if p.mode == name or Path(p.path).stem == name]
            extra = f"; its file has problems: {'; '.join(broken)}" if broken else ""
            raise ModeError(f"mode {name!r} is not defined in {looked}{extra}") from None

    def without_examples(self) -> dict[str, list[str]]:
        """``{pack: [mode, ...]}`` for the modes that declare no ``examples``: pre-routing scores
        them by their vocabulary and description only."""
        out: dict[str, list[str]] = {}
        for mode in self:
            if not mode.examples:
                out.setdefault(mode.pack or "(no pack)", []).append(mode.name)
        return out

    def problems_for(self, name: str) -> list[ModeProblem]:
        return [p for p in self.problems if p.mode == name or Path(p.path).stem == name]

    def __contains__(self, name: object) -> bool:
        return name in self.modes

    def __iter__(self) -> Any:
        return iter(sorted(self.modes.values(), key=lambda m: (m.gear, m.name)))


def mode_sources(host: Any, config: Any) -> list[tuple[str, Path]]:
    """Mode directories in load order: registered mode packs, then ``config.modes.dirs``."""
    sources: list[tuple[str, Path]] = []
    if host is not None:
        for name, directory in sorted(host.components("mode_pack").items()):
            sources.append((name, Path(directory)))
    if config is not None:
        for directory in config.modes.dirs:
            sources.append((f"config:{directory}", Path(directory).expanduser()))
    return sources


def load_modes(host: Any, config: Any, extra_dirs: Iterable[Path] = ()) -> ModeLibrary:
    """Load every mode file (``*.md``) of every source. A name defined twice is a problem
    naming both files; the first definition stays."""
    modes: dict[str, Mode] = {}
    problems: list[ModeProblem] = []
    sources = mode_sources(host, config) + [(f"dir:{d}", Path(d)) for d in extra_dirs]
    for pack, directory in sources:
        if not directory.is_dir():
            problems.append(ModeProblem(path=str(directory), field="directory",
                                        message=f"mode directory of {pack} does not exist"))
            continue
        for path in sorted(directory.glob("*.md")):
            if path.name.upper().startswith("README"):
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(ModeProblem(path=str(path), field="file", message=f"unreadable: {exc}"))
                continue
            mode, found = parse_mode_text(text, str(path), pack)
            problems.extend(found)
            if mode is None:
                continue
            if mode.name in modes:
                first = modes[mode.name]
                problems.append(ModeProblem(
                    path=str(path), field="name", mode=mode.name,
                    message=f"mode {mode.name!r} is defined twice: by {first.path} ({first.pack}) "
                            f"and by {path} ({pack}); the first is used"))
                continue
            modes[mode.name] = mode
    return ModeLibrary(modes, problems, [(p, str(d)) for p, d in sources])
