"""The router's example vectors on disk (``ora_core/engine/index_cache.py``): computed once, read back by
later processes for an embedder that declares a fingerprint, never for one that does not; a cache that
cannot be read is rebuilt; the routing audit says where the vectors came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from ora_core.engine import index_cache, routing
from ora_core.engine.routing import example_index, read_semantic
from ora_core.kernel.modes import load_modes
from ora_core.testing import make_config, make_host


class Fingerprinted:
    """``front``'s word embedder with a fingerprint (what a real one derives from its model files)."""

    def __init__(self, inner, fingerprint: str = "words-v1") -> None:
        self.inner, self.fingerprint = inner, fingerprint
        self.name, self.dimension = inner.name, inner.dimension

    def embed(self, texts):
        return self.inner.embed(texts)


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user cache, and no index from an earlier test in this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(routing, "_INDEXES", {})
    return tmp_path / "cache" / "ora" / index_cache.DIR_NAME


def _library():
    import ora_modes

    return load_modes(make_host(ora_modes), make_config().config)


def test_the_vectors_are_computed_once_and_read_back_equal_by_the_next_process(front, fresh):
    library = _library()
    first = Fingerprinted(front.WordEmbedder())
    built, _ = example_index(first, library)
    assert built.origin == "computed; written to the disk cache" and first.inner.embedded
    assert len(list(fresh.glob("*.f64"))) == 1 and len(list(fresh.glob("*.json"))) == 1
    routing._INDEXES.clear()  # as a new process starts
    second = Fingerprinted(front.WordEmbedder())
    read, _ = example_index(second, library)
    assert read.origin.startswith("read from the disk cache") and second.inner.embedded == []
    assert read.rows == built.rows and read.owners == built.owners


def test_a_changed_fingerprint_or_examples_is_another_key(front, fresh):
    library = _library()
    example_index(Fingerprinted(front.WordEmbedder()), library)
    routing._INDEXES.clear()
    changed = Fingerprinted(front.WordEmbedder(), fingerprint="words-v2")
    index, _ = example_index(changed, library)
    assert index.origin.startswith("computed") and changed.inner.embedded
    assert len(list(fresh.glob("*.f64"))) == 2


def test_an_embedder_without_a_fingerprint_is_never_cached_on_disk_and_the_audit_says_so(front, fresh):
    index, _ = example_index(front.WordEmbedder(), _library())
    assert index.origin == "computed; not cached on disk: embedder 'minilm' declares no fingerprint"
    assert not fresh.exists()


def test_a_cache_that_cannot_be_read_is_rebuilt_and_named(front, fresh):
    library = _library()
    example_index(Fingerprinted(front.WordEmbedder()), library)
    [data] = fresh.glob("*.f64")
    data.write_bytes(data.read_bytes()[:100])  # cut short
    routing._INDEXES.clear()
    embedder = Fingerprinted(front.WordEmbedder())
    index, _ = example_index(embedder, library)
    assert index.origin.startswith("computed; the disk cache was unusable (") and "cannot be read" in index.origin
    assert embedder.inner.embedded and len(index.rows) == len(index.texts)


def test_the_routing_audit_names_the_origin(front, fresh):
    embedder = Fingerprinted(front.WordEmbedder())
    ctx = type("Ctx", (), {"embedder": lambda self: embedder})()
    reading = read_semantic(ctx, _library(), "Who benefits from the new rule?")
    assert reading.ok and reading.index_origin == "computed; written to the disk cache"
    again = read_semantic(ctx, _library(), "Who pays for it?")
    assert again.index_origin == "in this process (computed; written to the disk cache)"
