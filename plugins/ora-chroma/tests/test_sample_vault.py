"""The sample vault (``vault/`` at the repository root) that README command 1 ingests: every
note parses, every link resolves, and every note's ``type`` is one the default modes retrieve
(a ``type: protocol`` note is filtered out by ``standard``'s ``types: [concept, engram, note]``,
so the default demo would retrieve nothing about the Supplemental RAG protocol)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ora_chroma.notes import note_key, parse_note

import ora_modes
from ora_core.testing import load_modes, make_host

REPO = Path(__file__).resolve().parents[3]
VAULT = REPO / "vault"

pytestmark = pytest.mark.skipif(not VAULT.is_dir(), reason="not a source checkout: no vault/ beside plugins/")


@pytest.fixture(scope="module")
def parsed():
    notes = sorted(VAULT.glob("*.md"))
    return [parse_note(path, VAULT) for path in notes]


def test_the_sample_vault_holds_a_few_dozen_notes_with_front_matter(parsed):
    assert 25 <= len(parsed) <= 80
    for note in parsed:
        assert note.chunks, note.note
        assert note.meta.source_type, note.note
        assert sum(len(c.text.split()) for c in note.chunks) >= 80, f"{note.note} is too thin to retrieve"


def test_every_link_and_related_entry_names_a_note_of_the_vault(parsed):
    keys = {note_key(n.path.stem) for n in parsed} | {note_key(n.title) for n in parsed}
    dangling = [(n.note, target, kind) for n in parsed for target, kind in n.links if target not in keys]
    assert dangling == []
    unlinked = [n.note for n in parsed if not n.links]
    assert unlinked == []


def test_every_note_type_is_retrieved_by_the_default_mode_and_each_mode_retrieves_the_protocol(parsed):
    library = load_modes(make_host(ora_modes), None)
    standard = library.get("standard").retrieval.filters_for("concept")
    types = {n.meta.type for n in parsed}
    assert types <= set(standard.types), f"types the standard mode filters out: {types - set(standard.types)}"
    protocol = next(n for n in parsed if n.note == "supplemental-rag-protocol.md")
    for mode in library:
        wanted = mode.retrieval.filters_for("concept").types
        assert not wanted or protocol.meta.type in wanted, mode.name
