"""Reading vault notes: front matter, heading-aware chunks with overlap, wiki links.

Pure Python and fast (no Chroma, no model): everything here is deterministic and testable on
its own. Chunk ids are content hashes, so an unchanged note yields the same ids on every run.
"""

from __future__ import annotations

import hashlib
import math
import re
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

FENCE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
WIKI_LINK = re.compile(r"\[\[([^\]\|#\n]+)(?:#[^\]\|\n]*)?(?:\|[^\]\n]*)?\]\]")
_KEY_JUNK = re.compile(r"[\s_\-]+")


class FrontMatterError(ValueError):
    """A note's front matter cannot be used; the message names the file and what is wrong."""


class NotUtf8Error(ValueError):
    """A note is not UTF-8 text: ``path``, the ``offset`` of the first byte that does not decode, and
    the decoder's ``reason``; the message names all three."""

    def __init__(self, path: Path, offset: int, reason: str) -> None:
        self.path = path
        self.offset = offset
        self.reason = reason
        super().__init__(f"{path}: not UTF-8 text ({reason} at byte {offset})")


#: Other front-matter keys travel with each chunk of the note: stored in Chroma's metadata as
#: ``fm.<key>`` and given back in ``provenance.extra[<key>]`` (so a pre-labelled ``direction``, a
#: ``stance``, an ``author`` reach whoever reads the evidence). Bounded: scalar values only (text,
#: numbers, booleans; a date as ISO text), keys of at most 64 letters, digits, ``_`` and ``-``
#: starting with a letter, text cut to ``MAX_EXTRA_CHARS``, the first ``MAX_EXTRA_KEYS`` keys by
#: name; never a key Ora sets itself (``RESERVED_EXTRA_KEYS``). What is not carried is said in
#: ``ParsedNote.extras_left_out``.
EXTRA_PREFIX = "fm."
MAX_EXTRA_KEYS = 32
MAX_EXTRA_CHARS = 500
EXTRA_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
#: Chunk ids of a note with extras carry this mark, so a store written before extras were carried
#: re-indexes such a note once (its chunks then hold them); a note without extras keeps its ids.
EXTRAS_VERSION = "front-matter-extras/1"
RESERVED_EXTRA_KEYS = frozenset({
    # front matter Ora maps itself (NoteMeta)
    "title", "type", "source_type", "approved", "tags", "related",
    # chunk metadata and provenance Ora writes
    "source", "root", "note", "heading", "chunk_index", "ingested_at", "stream", "collection", "score", "weight",
    "conversation_id", "turn_id", "weighted_score", "ingested_at_unreadable", "direction_from",
    # the relationship stream's provenance, and the contrarian pass's tag (set by the pass, never by a note)
    "path", "link_kinds", "hops", "seed", "searchStrategy",
})


class NoteMeta(BaseModel):
    """The front matter fields Ora reads. Other keys (aliases, dates...) are kept; the scalar ones
    travel with the chunks (``extra_fields``)."""

    model_config = ConfigDict(extra="allow")

    title: str | None = None
    type: str = "note"
    source_type: str = "vault"
    approved: bool = False
    tags: list[str] = Field(default_factory=list)
    related: list[str] = Field(default_factory=list)

    @field_validator("tags", "related", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("related", mode="after")
    @classmethod
    def _unwrap_links(cls, value: list[str]) -> list[str]:
        out = []
        for item in value:
            match = WIKI_LINK.fullmatch(item.strip())
            out.append(match.group(1).strip() if match else item.strip())
        return [v for v in out if v]


def _scalar(value: Any) -> str | int | float | bool | None:
    """A front-matter value as Chroma can store it, or None when it is not a scalar."""
    if isinstance(value, bool | int | str):
        return value[:MAX_EXTRA_CHARS] if isinstance(value, str) else value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, date):  # datetime too: YAML reads a bare date or timestamp as one
        return value.isoformat()
    return None


def extra_fields(meta: NoteMeta) -> tuple[dict[str, str | int | float | bool], list[str]]:
    """The front-matter keys that travel with the note's chunks (see ``EXTRA_PREFIX``), and each key
    left out with why."""
    carried: dict[str, str | int | float | bool] = {}
    left_out: list[str] = []
    for key in sorted((meta.model_extra or {}), key=str):
        value = (meta.model_extra or {})[key]
        name = str(key)
        if name in RESERVED_EXTRA_KEYS:
            left_out.append(f"{name}: a name Ora sets itself")
        elif not EXTRA_KEY.fullmatch(name):
            left_out.append(f"{name[:80]}: not a plain name (letters, digits, _ and -, at most 64)")
        elif (scalar := _scalar(value)) is None:
            left_out.append(f"{name}: not a scalar value ({type(value).__name__})")
        elif len(carried) >= MAX_EXTRA_KEYS:
            left_out.append(f"{name}: beyond the first {MAX_EXTRA_KEYS} keys")
        else:
            carried[name] = scalar
    return carried, left_out


class NoteChunk(BaseModel):
    id: str
    text: str
    heading: str
    index: int


class ParsedNote(BaseModel):
    path: Path
    note: str  # the path relative to the vault root, POSIX style
    title: str
    meta: NoteMeta
    file_hash: str
    meta_hash: str
    chunks: list[NoteChunk]
    links: list[tuple[str, str]]  # (target key, kind: wiki | related)
    extras: dict[str, str | int | float | bool] = Field(default_factory=dict)  # front matter carried to chunks
    extras_left_out: list[str] = Field(default_factory=list)  # "key: why" for each extra key not carried


def note_key(name: str) -> str:
    """How a link target, a file stem and a title are compared: case and separators ignored."""
    name = name.strip()
    for suffix in (".md", ".markdown", ".txt"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    name = name.rsplit("/", 1)[-1]
    return _KEY_JUNK.sub("-", name.lower()).strip("-")


def split_front_matter(text: str, where: str) -> tuple[dict[str, Any], str, int]:
    """(front matter mapping, body, line number where the body starts)."""
    if not text.startswith("---"):
        return {}, text, 1
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text, 1
    for i in range(1, len(lines)):
        if lines[i].strip() in {"---", "..."}:
            raw = "\n".join(lines[1:i])
            body = "\n".join(lines[i + 1:])
            break
    else:
        raise FrontMatterError(f"{where}: front matter opened with '---' on line 1 is never closed")
    import yaml

    try:
        data = yaml.safe_load(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FrontMatterError(f"{where}: front matter is not valid YAML{at}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontMatterError(f"{where}: front matter must be a mapping of keys to values, "
                               f"got a {type(data).__name__}")
    return data, body, i + 2


def parse_meta(data: dict[str, Any], where: str) -> NoteMeta:
    try:
        return NoteMeta.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise FrontMatterError(f"{where}: front matter field {field!r}: {err['msg']} "
                               f"(got {err.get('input')!r})") from None


def _sections(body: str, markdown: bool) -> list[tuple[list[str], str]]:
    """(heading path, text) per section; headings inside fenced code are not headings."""
    if not markdown:
        return [([], body)]
    out: list[tuple[list[str], str]] = []
    stack: list[tuple[int, str]] = []
    current: list[str] = []
    in_fence = False
    for line in body.split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else HEADING.match(line)
        if heading:
            out.append(([h for _, h in stack], "\n".join(current)))
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading.group(2).strip()))
            current = []
        else:
            current.append(line)
    out.append(([h for _, h in stack], "\n".join(current)))
    return [(path, text) for path, text in out if text.strip()]


def _units(text: str, chunk_words: int) -> list[list[str]]:
    """Paragraphs as word lists; a paragraph longer than a chunk is cut into chunk-sized runs."""
    units: list[list[str]] = []
    for para in re.split(r"\n\s*\n", text):
        words = para.split()
        for start in range(0, len(words), chunk_words):
            if words[start:start + chunk_words]:
                units.append(words[start:start + chunk_words])
    return units


def chunk_section(text: str, chunk_words: int, overlap_words: int) -> list[str]:
    """Pack paragraphs into chunks of at most ``chunk_words`` words (plus the overlap carried
    from the previous chunk of the same section)."""
    chunks: list[list[str]] = []
    current: list[str] = []
    for unit in _units(text, chunk_words):
        if current and len(current) + len(unit) > chunk_words:
            chunks.append(current)
            current = current[-overlap_words:] if overlap_words else []
        current = current + unit
    if current:
        chunks.append(current)
    return [" ".join(words) for words in chunks]


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def parse_note(path: Path, root: Path, *, chunk_words: int = 160, overlap_words: int = 30,
               raw: bytes | None = None) -> ParsedNote:
    """Read one note. Raises ``NotUtf8Error`` (the file and the byte offset) on text that is not
    UTF-8, ``FrontMatterError`` (naming the file) on unusable front matter, ``OSError`` when the
    file cannot be read."""
    data = path.read_bytes() if raw is None else raw
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotUtf8Error(path, exc.start, exc.reason) from None
    text = text.replace("\r\n", "\n")
    front, body, _ = split_front_matter(text, str(path))
    meta = parse_meta(front, str(path))
    markdown = path.suffix.lower() != ".txt"
    sections = _sections(body, markdown)
    first_h1 = re.search(r"^#\s+(.+?)\s*#*\s*$", body, re.M) if markdown else None
    title = meta.title or (first_h1.group(1).strip() if first_h1 else "") or path.stem
    meta_json = meta.model_dump_json()
    meta_hash = _digest(meta_json, title)[:16]
    extras, left_out = extra_fields(meta)
    mark = [EXTRAS_VERSION] if extras else []
    chunks: list[NoteChunk] = []
    seen: dict[str, int] = {}
    for heading_path, section in sections:
        # The note's H1 is its title: every chunk's header already carries it.
        h1 = first_h1.group(1).strip() if first_h1 else None
        shown = heading_path[1:] if heading_path and heading_path[0] in {title, h1} else heading_path
        heading = " > ".join(shown)
        for piece in chunk_section(section, chunk_words, overlap_words):
            header = f"{title} — {heading}" if heading else title
            chunk_text = f"{header}\n\n{piece}"
            dup = seen.get(chunk_text, 0)
            seen[chunk_text] = dup + 1
            chunk_id = _digest(str(path), meta_hash, chunk_text, str(dup), *mark)[:32]
            chunks.append(NoteChunk(id=chunk_id, text=chunk_text, heading=heading, index=len(chunks)))
    links: list[tuple[str, str]] = []
    own = {note_key(path.stem), note_key(title)}
    for target in meta.related:
        key = note_key(target)
        if key and key not in own and (key, "related") not in links:
            links.append((key, "related"))
    if markdown:
        for match in WIKI_LINK.finditer(body):
            key = note_key(match.group(1))
            if key and key not in own and (key, "wiki") not in links:
                links.append((key, "wiki"))
    return ParsedNote(path=path, note=rel, title=title, meta=meta, file_hash=_digest(text)[:32],
                      meta_hash=meta_hash, chunks=chunks, links=links, extras=extras, extras_left_out=left_out)
