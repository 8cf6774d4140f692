"""Helpers for the front-of-pipeline tests: a scripted in-process retriever, a host with the
first-party front plugins registered in process (no autoload), and trace readers."""

from __future__ import annotations

import io
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ora_core import hookimpl
from ora_core.kernel.errors import RetrievalError
from ora_core.kernel.models import Chunk, EmptyDiagnosis, Provenance, Retrieval, RetrievalFilters
from ora_core.testing import make_host, make_runtime, scripted_config

PHASE_A_RULE = {"match": "PHASE A CLEANUP", "on": "system",
                "reply": "CLEANED PROMPT:\n{cleaned}\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n{items}"}


def phase_a_rule(cleaned: str, items: list[str] | None = None) -> dict[str, str]:
    rule = dict(PHASE_A_RULE)
    rule["reply"] = rule["reply"].format(cleaned=cleaned,
                                         items="\n".join(f"- {i}" for i in items or []) or "- none")
    return rule


class ScriptedRetriever:
    """An in-memory index with the real emptiness rules: an empty index, a filter that drops
    every hit, or no shared word with the query each give their own diagnosis."""

    def __init__(self, name: str, stream: str, docs: list[dict[str, str]] | None = None, *,
                 fail: bool = False, delay_s: float = 0.0) -> None:
        self.name = name
        self.stream = stream
        self.docs = docs or []
        self.fail = fail
        self.delay_s = delay_s
        self.calls: list[tuple[str, RetrievalFilters, int]] = []
        self.threads: set[int] = set()

    def retrieve(self, query: str, filters: RetrievalFilters, k: int, ctx: Any) -> Retrieval:
        self.calls.append((query, filters, k))
        self.threads.add(threading.get_ident())
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.fail:
            try:
                raise ConnectionRefusedError("vector store at 127.0.0.1:1 refused the connection")
            except ConnectionRefusedError as exc:
                raise RetrievalError(f"{self.name}: query failed: {exc}") from exc
        words = set(re.findall(r"\w+", query.lower()))
        raw = [d for d in self.docs if words & set(re.findall(r"\w+", d["text"].lower()))]
        kept = [d for d in raw if not filters.types or d.get("type") in filters.types]
        chunks = [Chunk(id=f"{self.name}-{i}", text=d["text"],
                        provenance=Provenance(collection=self.name, source=d.get("source", "note.md"),
                                              type=d.get("type", ""), score=0.9 - i * 0.1, stream=self.stream))
                  for i, d in enumerate(kept[:k])]
        diagnosis = None
        if not chunks:
            reason = ("index_empty" if not self.docs else "no_match" if not raw else "filtered_out")
            diagnosis = EmptyDiagnosis(empty_reason=reason, collection_total_count=len(self.docs),
                                       raw_chunks_returned=len(raw), filtered_chunks_returned=len(kept),
                                       filters_applied=filters.model_dump())
        return Retrieval(stream=self.stream, query=query, chunks=chunks, empty_diagnosis=diagnosis,
                         retriever=self.name)


class RetrieverPlugin:
    def __init__(self, *retrievers: ScriptedRetriever) -> None:
        self.retrievers = retrievers

    @hookimpl
    def ora_register_retrievers(self, register: Any) -> None:
        for r in self.retrievers:
            register(r)


class EmbedderPlugin:
    """Registers the given embedders in process (``ora_register_embedders``)."""

    def __init__(self, *embedders: Any) -> None:
        self.embedders = embedders

    @hookimpl
    def ora_register_embedders(self, register: Any) -> None:
        for e in self.embedders:
            register(e)


class WordEmbedder:
    """A real (if crude) embedder for fast tests: each text a normalised bag of hashed words, so
    texts sharing words are similar. Counts the texts it embedded; ``fail`` makes it raise,
    ``wrong_dimension`` return rows of the wrong length."""

    def __init__(self, name: str = "minilm", dimension: int = 64, *, fail: bool = False,
                 wrong_dimension: bool = False) -> None:
        self.name, self.dimension = name, dimension
        self.fail, self.wrong_dimension = fail, wrong_dimension
        self.embedded: list[str] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        import hashlib
        import math

        if self.fail:
            raise RuntimeError("embedding model file is truncated")
        self.embedded += list(texts)
        rows = []
        for text in texts:
            row = [0.0] * self.dimension
            for word in re.findall(r"\w+", text.lower()):
                row[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimension] += 1.0
            norm = math.sqrt(sum(x * x for x in row)) or 1.0
            rows.append([x / norm for x in row][: self.dimension - 1 if self.wrong_dimension else None])
        return rows


def minilm_plugin() -> Any:
    """The real ``minilm`` embedder plugin (plugins/ora-minilm), registered in process."""
    import ora_minilm.plugin

    return ora_minilm.plugin


def front_host(*extra: object, with_trace: bool = True, with_modes: bool = True) -> Any:
    import ora_bypass
    import ora_scripted
    import ora_signals

    import ora_modes

    plugins: list[object] = [ora_scripted, ora_bypass, ora_signals]
    if with_modes:
        plugins.append(ora_modes)
    if with_trace:
        import ora_trace_fs

        plugins.append(ora_trace_fs)
    return make_host(*plugins, *extra)


def front_runtime(tmp_path: Path, *extra: object, rules: list[dict[str, str]] | None = None,
                  with_trace: bool = True, with_modes: bool = True, **config: Any) -> Any:
    """A runtime on the scripted backend, tracing under ``tmp_path/traces``; ``runtime.stderr``
    is a StringIO the test can read."""
    resolved = scripted_config(tmp_path / "traces", rules=rules or [], **config)
    host = front_host(*extra, with_trace=with_trace, with_modes=with_modes)
    return make_runtime(host, resolved, stderr=io.StringIO())


def step_doc(trace_path: str | Path, step: str) -> dict[str, Any]:
    matches = sorted(Path(trace_path).glob(f"[0-9][0-9]-{step}.json"))
    assert matches, f"no step file for {step!r} in {sorted(p.name for p in Path(trace_path).iterdir())}"
    return json.loads(matches[-1].read_text())


def jsonl(trace_path: str | Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (Path(trace_path) / name).read_text().splitlines() if line]


def invented_time() -> str:
    """A time and date no clock reading supports: three days and 2 h 7 min ahead, never the clock's
    reading in UTC or any local zone (zone offsets are whole quarter hours; 7 minutes from the
    nearest is beyond the clock check's 3-minute tolerance)."""
    from datetime import datetime, timedelta, timezone

    later = datetime.now(timezone.utc) + timedelta(days=3, hours=2, minutes=7)
    return f"It is {later:%A}, {later:%B} {later.day} at {later:%H:%M}."


@pytest.fixture
def front(tmp_path: Path) -> Any:
    """The helpers above, as one fixture (test modules cannot import a conftest)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        runtime=lambda *extra, **kw: front_runtime(tmp_path, *extra, **kw),
        host=front_host,
        step_doc=step_doc,
        jsonl=jsonl,
        Retriever=ScriptedRetriever,
        RetrieverPlugin=RetrieverPlugin,
        phase_a_rule=phase_a_rule,
        Embedders=EmbedderPlugin,
        WordEmbedder=WordEmbedder,
        minilm=minilm_plugin,
        invented_time=invented_time,
        tmp_path=tmp_path,
    )
