"""``ora vault add | sync | stats | search`` on a real store (the commands this plugin adds)."""

from __future__ import annotations

import json
from pathlib import Path

import ora_chroma
import ora_minilm.plugin
import pytest
from typer.testing import CliRunner

from ora_core.testing import build_app, cli_context, make_host


@pytest.fixture
def ora(tmp_path: Path):
    config = tmp_path / "ora.toml"
    config.write_text(f'[retrieval]\npath = "{tmp_path / "chroma"}"\n[trace]\nroot = "{tmp_path / "traces"}"\n',
                      encoding="utf-8")
    app = build_app()
    host = make_host(ora_chroma, ora_minilm.plugin)
    host.register_commands(app, cli_context(host))
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, ["-c", str(config), *args], catch_exceptions=False)

    return invoke


def test_vault_add_stats_search_sync(minilm, ora, tmp_path, notes):
    vault = notes(tmp_path / "vault", {
        "cap.md": "---\ntype: concept\napproved: true\n---\n# Supplement cap\nTwo supplemental requests per "
                  "step, then a COVERAGE GAP.\n",
        "trace.md": "# Trace\nOne directory per turn. Links to [[cap]].\n",
        "bad.md": "---\napproved: perhaps\n---\n# Bad\n",
    })
    added = ora("vault", "add", str(vault))
    assert added.exit_code == 0
    assert "2 new" in added.stdout
    assert "skipped: 1 file(s) (1 with malformed front matter)" in added.stderr
    assert str(vault / "bad.md") in added.stderr and "'approved'" in added.stderr

    strict = ora("vault", "add", "--strict", str(vault))
    assert strict.exit_code == 1 and "2 unchanged" in strict.stdout

    stats = json.loads(ora("vault", "stats", "--json").stdout)
    assert (stats["files"], stats["chunks"], stats["approved_chunks"], stats["links"]) == (2, 2, 1, 1)
    assert stats["roots"] == [str(vault)] and stats["mode"] == "embedded"
    human = ora("vault", "stats").stdout
    assert "2 chunk(s) from 2 file(s)" in human

    found = json.loads(ora("vault", "search", "supplemental request cap", "--json").stdout)
    top = found["chunks"][0]["provenance"]
    assert top["source"] == str(vault / "cap.md") and top["approved"] is True and top["stream"] == "concept"
    printed = ora("vault", "search", "supplemental request cap").stdout
    assert f"source: {vault / 'cap.md'}" in printed and "approved: yes" in printed and "score" in printed

    related = json.loads(ora("vault", "search", "one directory per turn", "--stream", "relationship",
                             "--json").stdout)
    assert related["chunks"][0]["provenance"]["extra"]["path"] == ["trace.md", "cap.md"]

    empty = ora("vault", "search", "supplemental request cap", "--type", "engram")
    assert "no chunks (concept): filtered_out" in empty.stdout

    (vault / "trace.md").unlink()
    synced = json.loads(ora("vault", "sync", "--json").stdout)
    assert synced["removed"] == [str(vault / "trace.md")] and synced["chunks_total"] == 1


def test_bad_stream_and_bad_settings_are_named(ora, tmp_path):
    bad = ora("vault", "search", "x", "--stream", "telepathy")
    assert bad.exit_code == 1 and "--stream must be one of" in bad.stderr
    config = tmp_path / "ora.toml"
    config.write_text(config.read_text() + "[plugins.chroma]\noverlap_words = 500\nchunk_words = 100\n")
    wrong = ora("vault", "stats")
    assert wrong.exit_code == 1 and "plugins.chroma" in wrong.stderr and "overlap_words" in wrong.stderr


def test_an_embedder_no_plugin_registers_fails_add_and_search_naming_the_registered_ones(ora, tmp_path, notes):
    config = tmp_path / "ora.toml"
    config.write_text(config.read_text() + '[embedding]\nembedder = "e5-large"\n', encoding="utf-8")
    vault = notes(tmp_path / "vault", {"cap.md": "# Cap\nTwo supplemental requests per step.\n"})
    for args in (("vault", "add", str(vault)), ("vault", "sync"), ("vault", "search", "supplemental requests")):
        done = ora(*args)
        assert done.exit_code == 1, args
        assert "embedding.embedder names 'e5-large', which no plugin registers" in done.stderr, args
        assert "(registered embedders: minilm)" in done.stderr, args
    assert not (tmp_path / "chroma").exists()  # nothing was written
