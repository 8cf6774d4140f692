"""Nothing ora-chroma falls back on is said on stderr only: a note that is not UTF-8 is skipped as
``not_utf8`` with its path and byte offset (never as bad front matter) and ``ora vault add`` reports
it; a conversation-indexing failure whose own log cannot be written keeps its record in the turn's
trace (the contingency says the log was not written, why, and carries the record)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import ora_chroma
import ora_minilm.plugin
import ora_scripted
from ora_chroma.conversation import CONTINGENCY, FAILURE_LOG
from ora_chroma.ingest import Ingestor
from ora_chroma.retrievers import store_for
from typer.testing import CliRunner

import ora_modes
from ora_core import hookimpl
from ora_core.testing import RecordingSink, build_app, cli_context, make_host, make_runtime, run_turn, scripted_config


def test_a_non_utf8_note_is_skipped_as_not_utf8_with_its_path_and_byte_offset(minilm, tmp_path, notes,
                                                                              chroma_config) -> None:
    root = notes(tmp_path / "v", {"good.md": "# Good\nfine text\n"})
    (root / "latin1.md").write_bytes("# Caf\xe9\nau lait\n".encode("latin-1"))
    report = Ingestor(store_for(chroma_config()), minilm).add([root])
    assert report.files_new == 1 and report.malformed == 0
    [skipped] = report.skipped
    assert (skipped.kind, skipped.path, skipped.byte_offset) == ("not_utf8", str(root / "latin1.md"), 5)
    assert skipped.reason == f"{root / 'latin1.md'}: not UTF-8 text (invalid continuation byte at byte 5)"


def test_ora_vault_add_reports_a_not_utf8_note_like_other_skips(minilm, tmp_path, notes) -> None:
    config = tmp_path / "ora.toml"
    config.write_text(f'[retrieval]\npath = "{tmp_path / "chroma"}"\n[trace]\nroot = "{tmp_path / "traces"}"\n',
                      encoding="utf-8")
    app = build_app()
    host = make_host(ora_chroma, ora_minilm.plugin)
    host.register_commands(app, cli_context(host))
    vault = notes(tmp_path / "vault", {"ok.md": "# Ok\nplain text\n"})
    (vault / "cp1252.md").write_bytes(b"# Quote\n\x93smart\x94 quotes\n")
    added = CliRunner().invoke(app, ["-c", str(config), "vault", "add", str(vault)], catch_exceptions=False)
    assert added.exit_code == 0 and "1 new" in added.stdout
    assert "skipped: 1 file(s) (0 with malformed front matter)" in added.stderr
    assert f"  not_utf8: {vault / 'cp1252.md'}: not UTF-8 text (invalid start byte at byte 8)" in added.stderr


class SinkPlugin:
    def __init__(self, sink: RecordingSink) -> None:
        self.sink = sink

    @hookimpl
    def ora_register_trace_sinks(self, register: Any) -> None:
        register(self.sink)


def test_an_indexing_failure_whose_log_cannot_be_written_keeps_its_record_in_the_trace(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("Chroma cannot live here", encoding="utf-8")
    traces = tmp_path / "traces"
    (traces / FAILURE_LOG).mkdir(parents=True)  # the log's path is taken: appending to it fails
    resolved = scripted_config(traces, rules=[{"match": ".", "reply": "Step health names each step's verdict."}],
                               retrieval={"path": str(blocker)})
    sink = RecordingSink()
    host = make_host(ora_scripted, ora_modes, ora_chroma, ora_minilm.plugin, SinkPlugin(sink))
    result = run_turn(make_runtime(host, resolved, stderr=io.StringIO()), "Hello, what is step health?",
                      conversation_id="c4", mode="simple")
    assert CONTINGENCY in result.contingencies
    [event] = [e for e in sink.events if e.kind == "contingency" and e.data["name"] == CONTINGENCY]
    data = event.data["data"]
    assert data["log_written"] is False and data["log_error"].startswith("IsADirectoryError")
    assert data["record"]["conversation_id"] == "c4" and data["record"]["error_class"] == "FileExistsError"
    assert f"and {traces / FAILURE_LOG} cannot be written" in event.data["detail"]
