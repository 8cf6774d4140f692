"""Reading notes: front matter, heading-aware chunking with overlap, content-hash ids, links."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from ora_chroma.notes import FrontMatterError, NotUtf8Error, chunk_section, note_key, parse_note


def _note(tmp_path: Path, text: str, name: str = "n.md") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def test_front_matter_fields_are_read(tmp_path: Path) -> None:
    path = _note(tmp_path, """
        ---
        type: concept
        source_type: academic
        approved: true
        tags: gears, cascade
        related: ["[[Other Note]]", third]
        ---
        # The Title
        Body text.
        """)
    note = parse_note(path, tmp_path)
    assert note.meta.type == "concept"
    assert note.meta.source_type == "academic"
    assert note.meta.approved is True
    assert note.meta.tags == ["gears", "cascade"]
    assert note.meta.related == ["Other Note", "third"]
    assert note.title == "The Title"
    assert ("other-note", "related") in note.links and ("third", "related") in note.links


def test_a_note_without_front_matter_gets_defaults(tmp_path: Path) -> None:
    note = parse_note(_note(tmp_path, "Just some text.\n", "plain.txt"), tmp_path)
    assert (note.meta.type, note.meta.source_type, note.meta.approved) == ("note", "vault", False)
    assert note.title == "plain"
    assert len(note.chunks) == 1


@pytest.mark.parametrize(("front", "expected"), [
    ("---\ntype: concept\nno closing line\n", "never closed"),
    ("---\ntype: [unclosed\n---\nbody\n", "not valid YAML"),
    ("---\n- a\n- b\n---\nbody\n", "must be a mapping"),
    ("---\napproved: maybe\n---\nbody\n", "'approved'"),
    ("---\ntype: 3\n---\nbody\n", "'type'"),
])
def test_malformed_front_matter_names_the_file_and_the_problem(tmp_path: Path, front: str,
                                                                expected: str) -> None:
    path = tmp_path / "broken.md"
    path.write_text(front, encoding="utf-8")
    with pytest.raises(FrontMatterError) as info:
        parse_note(path, tmp_path)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_undecodable_text_is_a_not_utf8_error_naming_the_file_and_the_byte_offset(tmp_path: Path) -> None:
    path = tmp_path / "latin1.md"
    path.write_bytes("caf\xe9 au lait".encode("latin-1"))
    with pytest.raises(NotUtf8Error, match="not UTF-8") as info:
        parse_note(path, tmp_path)
    assert not isinstance(info.value, FrontMatterError), "not UTF-8 is no front-matter problem"
    assert (info.value.path, info.value.offset) == (path, 3) and f"{path}: " in str(info.value)


def test_chunks_follow_headings_and_ignore_headings_in_code(tmp_path: Path) -> None:
    path = _note(tmp_path, """
        # Gears
        Intro words.

        ## Gear 4
        The cascade.

        ```
        # not a heading
        ```

        ### Step 6
        Verification cycles.
        """)
    note = parse_note(path, tmp_path)
    headings = [c.heading for c in note.chunks]
    assert headings == ["", "Gear 4", "Gear 4 > Step 6"]
    assert "# not a heading" in note.chunks[1].text
    assert note.chunks[2].text.startswith("Gears — Gear 4 > Step 6\n\n")


def test_long_sections_are_cut_with_overlap() -> None:
    words = [f"w{i}" for i in range(100)]
    chunks = chunk_section(" ".join(words), chunk_words=40, overlap_words=10)
    assert len(chunks) >= 3
    first, second = chunks[0].split(), chunks[1].split()
    assert len(first) <= 40
    assert second[:10] == first[-10:]  # the overlap carried into the next chunk
    assert set(" ".join(chunks).split()) == set(words)  # nothing lost


def test_ids_are_content_hashes(tmp_path: Path) -> None:
    text = "# T\n\n## A\nalpha text\n\n## B\nbeta text\n"
    path = _note(tmp_path, text)
    first = parse_note(path, tmp_path)
    again = parse_note(path, tmp_path)
    assert [c.id for c in first.chunks] == [c.id for c in again.chunks]
    path.write_text(text.replace("beta text", "beta text changed"), encoding="utf-8")
    edited = parse_note(path, tmp_path)
    assert edited.chunks[0].id == first.chunks[0].id  # untouched section keeps its id
    assert edited.chunks[1].id != first.chunks[1].id
    path.write_text("---\napproved: true\n---\n" + text, encoding="utf-8")
    approved = parse_note(path, tmp_path)
    assert not {c.id for c in approved.chunks} & {c.id for c in first.chunks}  # metadata is in the id


def test_wiki_links_in_every_form_and_no_self_links(tmp_path: Path) -> None:
    path = _note(tmp_path, """
        # Self Note
        See [[Forensic Trace]], [[step-health#verdicts]], [[Gear_4|the cascade]] and [[Self Note]].
        """, "self-note.md")
    note = parse_note(path, tmp_path)
    assert note.links == [("forensic-trace", "wiki"), ("step-health", "wiki"), ("gear-4", "wiki")]


def test_note_keys_ignore_case_separators_and_suffixes() -> None:
    assert note_key("Supplemental RAG Protocol") == note_key("supplemental-rag-protocol.md")
    assert note_key("dir/Gear_4") == "gear-4"
