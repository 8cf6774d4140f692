"""A retriever or a verifier that hangs never hangs the turn: past ``[retrieval] timeout_s`` the
stream's failure is named (RetrievalTimeout in rag-failures.jsonl), past ``[verification] timeout_s``
the verdict is BROKEN (VerifierTimeout), never PASS."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import ora_scripted
import ora_trace_fs

import ora_modes
from ora_core import hookimpl
from ora_core.api import Chunk, Provenance, Retrieval, Verdict, VerdictStatus
from ora_core.testing import make_host, make_runtime, run_turn, scripted_config

RELEASE = threading.Event()


class Hanging:
    name = "hanging"
    stream = "concept"

    def retrieve(self, query: str, filters: Any, k: int, ctx: Any) -> Retrieval:
        RELEASE.wait(30)
        return Retrieval(stream="concept", query=query, chunks=[Chunk(
            id="late", text="too late", provenance=Provenance(collection="c", source="late.md"))])


class Stuck:
    name = "stuck"

    def verify(self, subject: str, package: Any, criteria: str, ctx: Any) -> Verdict:
        RELEASE.wait(30)
        return Verdict(status=VerdictStatus.PASS, verifier=self.name)


class Plugin:
    @hookimpl
    def ora_register_retrievers(self, register: Any) -> None:
        register(Hanging())

    @hookimpl
    def ora_register_verifiers(self, register: Any) -> None:
        register(Stuck())


def test_a_hanging_retriever_and_verifier_are_named_and_the_turn_goes_on(tmp_path: Path) -> None:
    RELEASE.clear()
    config = scripted_config(tmp_path / "traces", default="An analysis of the harness market.\nCONFIDENCE: 0.9",
                             retrieval={"timeout_s": 0.5, "streams": {"conversation": False, "relationship": False}},
                             verification={"verifier": "stuck", "final_verifier": "stuck", "timeout_s": 0.5},
                             plugins={"trace-fs": {"fsync": False}})
    host = make_host(ora_scripted, ora_modes, ora_trace_fs, Plugin())
    start = time.monotonic()
    try:
        result = run_turn(make_runtime(host, config), "Who benefits from harness vendors?", mode="standard")
    finally:
        RELEASE.set()
    assert time.monotonic() - start < 20  # bounded: never the 30 s the plugins would have hung
    assert result.status != "ok" and "PASS" not in result.verdicts.values()
    assert set(result.verdicts.values()) == {"BROKEN"}
    trace = Path(result.trace_path)
    failures = [json.loads(line) for line in (trace / "rag-failures.jsonl").read_text().splitlines()]
    assert [(f["stream"], f["error_class"]) for f in failures] == [("concept", "RetrievalTimeout")]
    assert "timeout_s" in failures[0]["message"]
    contingencies = [json.loads(line) for line in (trace / "contingencies.jsonl").read_text().splitlines()]
    timed_out = [c for c in contingencies if c["name"].endswith("-verifier-exception")]
    assert timed_out and all(c["data"]["error_class"] == "VerifierTimeout" for c in timed_out)
