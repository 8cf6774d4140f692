"""The plugin's own settings: the ``[plugins.chroma]`` table of ``ora.toml``, validated.

Where the store lives (``retrieval.path`` / ``retrieval.server_url``), ``retrieval.k`` and
``retrieval.approved_weight`` come from the kernel's ``[retrieval]`` section; what only this
plugin understands (collection names, the similarity floor, chunk sizes) lives here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ora_core.api import ConfigError, PluginOptions

PLUGIN_NAME = "chroma"
MANIFEST_NAME = "ora-vault.sqlite"


class ChromaSettings(PluginOptions):
    """``[plugins.chroma]``, declared to the kernel (``ora_register_options``): an unknown key or a
    wrong type is refused before a turn runs, naming the table and the key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    collection: str = Field(default="vault", min_length=3, max_length=63)
    conversations_collection: str = Field(default="conversations", min_length=3, max_length=63)
    #: The similarity floor (cosine similarity, 1 = identical). A hit below it is not a match:
    #: when every hit is below it, the retrieval is empty with ``empty_reason = no_match``.
    min_score: float = Field(default=0.25, ge=-1.0, le=1.0)
    #: Chunking: words per chunk and words repeated between consecutive chunks of a section.
    chunk_words: int = Field(default=160, ge=20, le=2000)
    overlap_words: int = Field(default=30, ge=0, le=500)
    #: The ranker's character budget for one retrieval; a chunk that would overflow it is
    #: dropped (when that drops everything: ``empty_reason = ranker_truncation``).
    max_chars: int = Field(default=6000, ge=1)
    #: Candidates fetched per wanted chunk, so weighting can reorder before truncating to k.
    oversample: int = Field(default=3, ge=1, le=20)
    #: Texts per call of the embedder's ``embed``, and how many chunks are embedded and written per
    #: group (the next group is embedded while the previous one is written).
    batch_size: int = Field(default=64, ge=1, le=4096)
    group_size: int = Field(default=1024, ge=1, le=100_000)
    #: Relationship graph: how many of the top concept hits seed the walk, and how far it goes.
    seed_notes: int = Field(default=3, ge=1, le=20)
    hops: int = Field(default=1, ge=1, le=3)
    #: File suffixes ``ora vault add`` ingests from a directory.
    suffixes: tuple[str, ...] = (".md", ".markdown", ".txt")
    #: Evidence directions from a front-matter field: a chunk whose note has no ``direction`` of its
    #: own, and whose ``direction_from`` field (e.g. ``stance``) has a value in ``directions``, gets
    #: ``provenance.extra["direction"]`` = that value's direction (and ``direction_from`` = "key: value").
    #: For fields whose meaning depends on the claim being checked (the calibration fixture's
    #: ``stance: left|right|neutral``), the mapping is set per turn. Both or neither.
    direction_from: str | None = Field(default=None, min_length=1, max_length=64)
    directions: dict[str, Literal["supports", "contradicts", "neutral"]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _overlap_below_chunk(self) -> ChromaSettings:
        if self.overlap_words >= self.chunk_words:
            raise ValueError(f"overlap_words ({self.overlap_words}) must be below chunk_words "
                             f"({self.chunk_words})")
        return self

    @model_validator(mode="after")
    def _directions_with_their_field(self) -> ChromaSettings:
        if bool(self.direction_from) != bool(self.directions):
            raise ValueError("direction_from and directions go together: the front-matter field, and its values' "
                             f"directions (got direction_from={self.direction_from!r}, directions={self.directions!r})")
        return self


def load_settings(config: Any) -> ChromaSettings:
    """``[plugins.chroma]`` as ``ChromaSettings`` (validated once per table content); a bad value is a
    ``ConfigError`` naming the table and each bad key."""
    return ChromaSettings.of(config, PLUGIN_NAME)


class StoreLocation(BaseModel):
    """Where Chroma lives: an embedded directory, or a server (``retrieval.server_url``)."""

    model_config = ConfigDict(frozen=True)

    path: Path  # the embedded store, and in every mode the directory holding the manifest
    server_url: str | None = None
    host: str = ""
    port: int = 0
    ssl: bool = False

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST_NAME

    @property
    def label(self) -> str:
        return self.server_url or str(self.path)


def store_location(config: Any) -> StoreLocation:
    retrieval = config.retrieval
    path = retrieval.resolved_path()
    url = retrieval.server_url
    if not url:
        return StoreLocation(path=path)
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ConfigError(f"expected http(s)://host:port, got {url!r}", field="retrieval.server_url")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 8000)
    except ValueError as exc:
        raise ConfigError(f"bad port in {url!r}: {exc}", field="retrieval.server_url") from None
    return StoreLocation(path=path, server_url=url, host=parts.hostname, port=port,
                         ssl=parts.scheme == "https")
