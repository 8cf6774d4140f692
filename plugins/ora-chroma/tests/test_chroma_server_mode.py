"""Server mode: a real ``chroma run`` on 127.0.0.1, queried through ``HttpClient``; killed
mid-session, the next retrieval raises ``RetrievalError`` with the cause chained, and a turn
through the kernel's context assembly gets empty context plus a named ``rag_failure``."""

from __future__ import annotations

import io
import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import ora_chroma
import ora_minilm.plugin
import ora_scripted
import ora_trace_fs
import pytest
from ora_chroma.ingest import Ingestor, vault_stats
from ora_chroma.retrievers import ConceptRetriever, RelationshipRetriever, store_for

import ora_modes
from ora_core import hookimpl
from ora_core.api import RetrievalError, RetrievalFilters
from ora_core.testing import make_host, make_runtime, run_turn, scripted_config

pytestmark = pytest.mark.slow

QUESTION = "Explain the supplemental request cap."


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chroma_cli() -> str:
    found = Path(sys.executable).with_name("chroma")
    if found.exists():
        return str(found)
    which = shutil.which("chroma")
    if which is None:
        pytest.skip("the chroma CLI (from the chromadb package) is not on PATH")
    return which


class ChromaServer:
    def __init__(self, path: Path, log: Path) -> None:
        self.path = path
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([_chroma_cli(), "run", "--path", str(self.path), "--host", "127.0.0.1",
                                          "--port", str(self.port)], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chroma run exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/api/v2/heartbeat", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        raise RuntimeError(f"chroma run did not answer within {timeout_s}s: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[ChromaServer]:
    server = ChromaServer(tmp_path / "server-data", tmp_path / "chroma-server.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()


VAULT = {
    "supplemental-rag.md": """
        ---
        type: concept
        related: [coverage-gap]
        ---
        # Supplemental RAG Protocol

        At most two supplement requests per step; after the cap the model must emit a
        COVERAGE GAP instead of guessing.
        """,
    "coverage-gap.md": """
        # Coverage Gap

        An explicit admission of what cannot be verified, preferred to confabulation.
        """,
}


class SinkPlugin:
    name = "recording"

    def __init__(self) -> None:
        self.events: list[Any] = []

    def open_turn(self, turn: Any, ctx: Any) -> None:
        return None

    def handle(self, event: Any) -> None:
        self.events.append(event)

    def close_turn(self, turn: Any) -> None:
        return None

    @hookimpl
    def ora_register_trace_sinks(self, register: Any) -> None:
        register(self)


def test_queries_go_through_the_server_and_fail_loudly_once_it_dies(minilm, chroma_server, tmp_path, notes,
                                                                    chroma_config, ctx_for):
    config = chroma_config(retrieval={"server_url": chroma_server.url})
    store = store_for(config)
    assert type(store.client).__name__ == "Client" and store.location.server_url == chroma_server.url
    vault = notes(tmp_path / "vault", VAULT)
    report = Ingestor(store, minilm).add([vault])
    assert report.files_new == 2 and report.store == chroma_server.url
    # the chunks live in the server's directory, not in the local store path
    assert (chroma_server.path / "chroma.sqlite3").is_file()
    assert not (tmp_path / "chroma" / "chroma.sqlite3").exists()
    assert vault_stats(store)["mode"] == "server"

    got = ConceptRetriever().retrieve("supplemental request cap", RetrievalFilters(), 3, ctx_for(config))
    assert got.chunks[0].provenance.source == str(vault / "supplemental-rag.md")
    rel = RelationshipRetriever().retrieve("supplemental request cap", RetrievalFilters(), 3, ctx_for(config))
    assert rel.chunks[0].provenance.extra["path"] == ["supplemental-rag.md", "coverage-gap.md"]

    chroma_server.kill()
    with pytest.raises(RetrievalError) as info:
        ConceptRetriever().retrieve("coverage gap", RetrievalFilters(), 3, ctx_for(config))
    assert info.value.__cause__ is not None  # the transport error is chained, not swallowed
    assert chroma_server.url in str(info.value) and "concept retrieval" in str(info.value)


def test_a_turn_after_the_server_dies_gets_empty_context_and_a_named_rag_failure(minilm, chroma_server,
                                                                                 tmp_path, notes):
    phase_a = {"match": "PHASE A CLEANUP", "on": "system",
               "reply": f"CLEANED PROMPT:\n{QUESTION}\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"}
    resolved = scripted_config(tmp_path / "traces", rules=[phase_a, {"match": ".", "reply": "An answer."}],
                               retrieval={"path": str(tmp_path / "local"), "server_url": chroma_server.url,
                                          "streams": {"conversation": False}},
                               plugins={"trace-fs": {"fsync": False}})
    sink = SinkPlugin()
    rt = make_runtime(make_host(ora_scripted, ora_modes, ora_chroma, ora_minilm.plugin, ora_trace_fs, sink), resolved,
                      stderr=io.StringIO())
    Ingestor(store_for(rt.config), minilm).add([notes(tmp_path / "vault", VAULT)])

    alive = run_turn(rt, QUESTION, mode="standard")
    chunks = {e.data["stream"]: e.data["chunks"] for e in sink.events
              if e.kind == "retrieval" and e.turn_id == alive.turn_id}
    assert chunks["concept"] >= 1 and chunks["relationship"] >= 1

    chroma_server.kill()
    dead = run_turn(rt, QUESTION, mode="standard")
    failures = [e.data for e in sink.events if e.kind == "rag_failure" and e.turn_id == dead.turn_id]
    assert {f["stream"] for f in failures} == {"concept", "relationship"}
    assert all(f["error_class"] == "RetrievalError" and f["query"] == QUESTION for f in failures)
    assert dead.answer and dead.status == "degraded"
    assert "context-concept-rag-failure-empty-context" in dead.contingencies
    # on disk: the named record in rag-failures.jsonl, and the step file's empty context
    trace = Path(dead.trace_path)
    records = [json.loads(line) for line in (trace / "rag-failures.jsonl").read_text().splitlines()]
    assert {r["stream"] for r in records} == {"concept", "relationship"}
    assert all(r["error_class"] == "RetrievalError" and chroma_server.url in r["message"] for r in records)
    [step_file] = trace.glob("*-context-assembly.json")
    output = json.loads(step_file.read_text())["output"]
    assert all(output["retrievals"][s]["chunks"] == [] for s in ("concept", "relationship"))
    assert {f["stream"] for f in output["rag_failures"]} == {"concept", "relationship"}
