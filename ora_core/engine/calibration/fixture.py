"""The calibration fixture: mirrored claim pairs and the evidence notes each pair runs on.

A fixture is a directory holding ``pairs.json`` (``{schema, name, version, description, pairs}``),
one notes directory per pair (``notesDir``: Markdown notes with front matter: ``title``, ``type``,
``source_type``, ``stance`` = the claim the note speaks for, ``left`` | ``right`` | ``neutral``) and
``versions.json`` (version -> content hash). The content hash covers ``pairs.json`` and every note,
so an edit that does not bump the version is caught (``check_version``). The bundled fixture lives
next to this module (``BUNDLED``).

Selection (seed 002): ``quick`` is at most three English pairs (not strict inverses, fixture order)
plus the first strict-inverse pair; ``full`` is every pair; ``targeted`` takes selectors
``domain:X``, ``language:X`` or ``pair:X`` (their union, in fixture order).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from ora_core.kernel.config import SEED_SOURCE_CLASSES
from ora_core.kernel.errors import ConfigError, UsageError

BUNDLED = Path(__file__).with_name("fixture")
FIXTURE_SCHEMA = "ora-calibration-fixture/1"
PAIR_ID = re.compile(r"^[a-z0-9][a-z0-9-]{1,50}[a-z0-9]$")
NOTE_SUFFIXES = (".md", ".markdown", ".txt")
_FRONT = re.compile(r"\A---\s*\n(?P<meta>.*?)\n---\s*\n(?P<body>.*)\Z", re.DOTALL)

ExpectedSkew = Literal["neutral", "left-favored", "right-favored"]
PairCategory = Literal["bias-diagnostic", "accuracy-control"]
Mode = Literal["quick", "full", "targeted"]
Intent = Literal["gate", "smoke"]


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class EvidenceNote(_Camel):
    """One evidence note of a pair, as read from its front matter."""

    path: str  # relative to the fixture directory
    title: str
    source_type: str
    source_class: Literal["institutional", "general"]
    stance: Literal["left", "right", "neutral"]
    chars: int
    first_sentence: str = ""


class CalibrationPair(_Camel):
    """One mirrored pair: a proposition framed 'left' and 'right' in one language."""

    id: str
    domain: str
    language: str
    left_claim: str
    right_claim: str
    category: str = "evaluative"
    expected_skew: ExpectedSkew = "neutral"
    expected_asymmetry: float = Field(default=0.0, ge=0.0, le=100.0)
    pair_category: PairCategory = "bias-diagnostic"
    is_strict_inverse: bool = False
    mirror_quality: str = "clean"
    evidence_notes: str = ""
    notes_dir: str
    notes: list[EvidenceNote] = Field(default_factory=list)  # filled by the loader

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not PAIR_ID.match(value):
            raise ValueError(f"pair id {value!r} must be 3-52 characters of a-z, 0-9 and '-' (it names a Chroma "
                             "collection)")
        return value

    @model_validator(mode="after")
    def _expectation_consistent(self) -> CalibrationPair:
        if self.expected_skew == "neutral" and self.expected_asymmetry != 0:
            raise ValueError(f"pair {self.id}: a neutral pair has expectedAsymmetry 0, not {self.expected_asymmetry:g}")
        if self.left_claim.strip() == self.right_claim.strip():
            raise ValueError(f"pair {self.id}: the left and right claims are the same text")
        return self

    @property
    def expected_offset(self) -> float:
        """e = +a (left-favored), -a (right-favored), 0 (neutral)."""
        sign = {"neutral": 0.0, "left-favored": 1.0, "right-favored": -1.0}[self.expected_skew]
        return sign * self.expected_asymmetry

    def claim(self, side: str) -> str:
        return self.left_claim if side == "left" else self.right_claim

    @property
    def collection(self) -> str:
        """The Chroma collection this pair's notes are ingested into."""
        return f"cal-{self.id}"


class Fixture(_Camel):
    schema_: str = Field(alias="schema")
    name: str
    version: str
    description: str = ""
    pairs: list[CalibrationPair]
    path: str = ""  # the directory it was read from
    content_hash: str = ""

    @model_validator(mode="after")
    def _unique_ids(self) -> Fixture:
        ids = [p.id for p in self.pairs]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"pair id(s) used more than once: {', '.join(dupes)}")
        return self

    def pair(self, pair_id: str) -> CalibrationPair:
        for p in self.pairs:
            if p.id == pair_id:
                return p
        raise UsageError(f"fixture {self.name} {self.version} has no pair {pair_id!r} "
                         f"(pairs: {', '.join(p.id for p in self.pairs)})")

    def notes_path(self, pair: CalibrationPair) -> Path:
        return Path(self.path) / pair.notes_dir


def _note_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file() and p.suffix.lower() in NOTE_SUFFIXES
                  and not p.name.startswith("."))


def read_note(path: Path, root: Path) -> EvidenceNote:
    """A note's front matter; a note without ``source_type`` or ``stance``, or with a source type seed
    002 does not name, is a ``ConfigError`` naming the file."""
    text = path.read_text(encoding="utf-8")
    match = _FRONT.match(text)
    if match is None:
        raise ConfigError("an evidence note needs front matter (--- ... ---)", source=str(path))
    try:
        meta = yaml.safe_load(match.group("meta")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"malformed front matter: {exc}", source=str(path)) from None
    if not isinstance(meta, dict):
        raise ConfigError("front matter is not a mapping", source=str(path))
    source_type = str(meta.get("source_type", "")).strip()
    if source_type not in SEED_SOURCE_CLASSES:
        raise ConfigError(f"source_type {source_type!r} is not one of seed 002's source types "
                          f"({', '.join(SEED_SOURCE_CLASSES)})", source=str(path))
    stance = str(meta.get("stance", "")).strip()
    if stance not in ("left", "right", "neutral"):
        raise ConfigError(f"stance {stance!r} must be left, right or neutral (the claim the note speaks for)",
                          source=str(path))
    return EvidenceNote(path=path.relative_to(root).as_posix(), title=str(meta.get("title") or path.stem),
                        source_type=source_type, source_class=SEED_SOURCE_CLASSES[source_type],
                        stance=stance, chars=len(match.group("body").strip()),
                        first_sentence=_first_sentence(match.group("body")))


def _first_sentence(body: str) -> str:
    text = " ".join(body.split())
    end = re.search(r"(?<=[.!?])\s", text)
    return (text[:end.start()] if end else text)[:400]


def content_hash(directory: Path, pairs_file: Path, pairs: Iterable[CalibrationPair]) -> str:
    """sha256 over ``pairs.json`` (canonical JSON) and every note (path and bytes), 16 hex digits."""
    digest = hashlib.sha256()
    digest.update(json.dumps(json.loads(pairs_file.read_text(encoding="utf-8")), sort_keys=True,
                             ensure_ascii=False, separators=(",", ":")).encode())
    for pair in pairs:
        for note in pair.notes:
            digest.update(b"\0" + note.path.encode() + b"\0")
            digest.update((directory / note.path).read_bytes())
    return digest.hexdigest()[:16]


def load_fixture(directory: str | Path | None = None) -> Fixture:
    """The fixture in ``directory`` (default: the bundled one), every note read; a malformed file is a
    ``ConfigError`` naming it."""
    root = Path(directory).expanduser().resolve() if directory is not None else BUNDLED
    pairs_file = root / "pairs.json"
    if not pairs_file.is_file():
        raise ConfigError("a calibration fixture directory holds pairs.json; none found", source=str(root))
    try:
        raw = json.loads(pairs_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the fixture: {exc}", source=str(pairs_file)) from None
    try:
        fixture = Fixture.model_validate({**raw, "path": str(root)})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid fixture: {problems}", source=str(pairs_file)) from None
    if fixture.schema_ != FIXTURE_SCHEMA:
        raise ConfigError(f"fixture schema {fixture.schema_!r}, expected {FIXTURE_SCHEMA!r}", source=str(pairs_file))
    for pair in fixture.pairs:
        notes_dir = root / pair.notes_dir
        if not notes_dir.is_dir():
            raise ConfigError(f"pair {pair.id}: notes directory {pair.notes_dir!r} does not exist", source=str(root))
        pair.notes = [read_note(p, root) for p in _note_files(notes_dir)]
        if not pair.notes:
            raise ConfigError(f"pair {pair.id}: no evidence note in {pair.notes_dir!r}", source=str(root))
    fixture.content_hash = content_hash(root, pairs_file, fixture.pairs)
    return fixture


def recorded_versions(fixture: Fixture) -> dict[str, str]:
    path = Path(fixture.path) / "versions.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the fixture's version record: {exc}", source=str(path)) from None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def check_version(fixture: Fixture) -> str | None:
    """None when ``versions.json`` records this content hash for this version; else what is wrong
    (an edit without a version bump, or a version never recorded)."""
    recorded = recorded_versions(fixture).get(fixture.version)
    if recorded is None:
        return f"version {fixture.version} is not recorded in versions.json (content hash {fixture.content_hash})"
    if recorded != fixture.content_hash:
        return (f"the content of version {fixture.version} changed (recorded hash {recorded}, now "
                f"{fixture.content_hash}): an edit bumps the version and records the new hash")
    return None


# --- selection ------------------------------------------------------------------------------------------

SELECTOR_KINDS = ("domain", "language", "pair")


def parse_selector(text: str) -> tuple[str, str]:
    kind, sep, value = text.partition(":")
    kind, value = kind.strip().lower(), value.strip()
    if not sep or kind not in SELECTOR_KINDS or not value:
        raise UsageError(f"--targeted {text!r}: expected domain:<name>, language:<code> or pair:<id>")
    return kind, value


def select_pairs(fixture: Fixture, mode: Mode, targeted: Iterable[str] = ()) -> list[CalibrationPair]:
    """The pairs a run of ``mode`` covers, in fixture order; a targeted selection matching nothing is a
    ``UsageError`` listing what exists."""
    if mode == "full":
        return list(fixture.pairs)
    if mode == "quick":
        english = [p for p in fixture.pairs if p.language == "en" and not p.is_strict_inverse][:3]
        inverse = [p for p in fixture.pairs if p.is_strict_inverse][:1]
        chosen = {p.id for p in english + inverse}
        return [p for p in fixture.pairs if p.id in chosen]
    selectors = [parse_selector(t) for t in targeted]
    if not selectors:
        raise UsageError("--targeted needs at least one selector (domain:<name>, language:<code>, pair:<id>)")
    known = {"domain": sorted({p.domain for p in fixture.pairs}),
             "language": sorted({p.language for p in fixture.pairs}), "pair": [p.id for p in fixture.pairs]}
    for kind, value in selectors:
        if value not in known[kind]:
            raise UsageError(f"--targeted {kind}:{value}: no pair has that {kind} (known: {', '.join(known[kind])})")
    return [p for p in fixture.pairs if any(getattr(p, "id" if k == "pair" else k) == v for k, v in selectors)]


def fixture_summary(fixture: Fixture) -> dict[str, Any]:
    return {"name": fixture.name, "version": fixture.version, "hash": fixture.content_hash, "path": fixture.path,
            "pairs": len(fixture.pairs)}
