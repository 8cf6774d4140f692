"""The web retriever against a real SearxNG-style server on 127.0.0.1 (stdlib http.server)."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import ora_scripted
import ora_web
import pytest
from ora_web.retriever import WebRetriever

import ora_modes
from ora_core import hookimpl
from ora_core.api import EmptyReason, RetrievalError, RetrievalFilters, StandaloneContext
from ora_core.testing import make_config, make_host, make_runtime, run_turn, scripted_config

RESULTS = [
    {"url": "https://en.example.org/wiki/Confabulation", "title": "Confabulation", "engine": "wiki",
     "engines": ["wiki"], "score": 4.0, "content": "Confabulation is the production of fabricated memories."},
    {"url": "https://news.example.com/llm-errors", "title": "LLM errors", "engine": "news",
     "engines": ["news"], "score": 2.0, "content": "Language models state wrong facts confidently."},
    {"url": "https://research.university.edu/paper", "title": "A paper", "engine": "scholar",
     "engines": ["scholar"], "score": 1.0, "content": "We measure hallucination rates."},
]


class SearchHandler(BaseHTTPRequestHandler):
    requests: list[dict[str, list[str]]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        parts = urlsplit(self.path)
        params = parse_qs(parts.query)
        type(self).requests.append(params)
        q = params.get("q", [""])[0]
        if parts.path != "/search":
            return self._send(404, b"not found", "text/plain")
        if params.get("format") != ["json"]:
            return self._send(403, b"format not allowed", "text/plain")
        if q == "slow":
            time.sleep(2.0)
        if q == "broken":
            return self._send(500, b"engine exploded", "text/plain")
        if q == "html":
            return self._send(200, b"<html>captcha</html>", "text/html")
        results = [] if q == "nothing" else RESULTS
        body = json.dumps({"query": q, "results": results,
                           "unresponsive_engines": [["news", "timeout"]] if q == "nothing" else []})
        self._send(200, body.encode(), "application/json")

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except BrokenPipeError:  # the client gave up first: that is the timeout test's point
            return

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def search_server() -> Iterator[str]:
    SearchHandler.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), SearchHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/search"
    finally:
        server.shutdown()
        server.server_close()


def _ctx(endpoint: str | None, **web: Any) -> StandaloneContext:
    overrides: dict[str, Any] = {"retrieval": {"web_endpoint": endpoint} if endpoint else {}}
    if web:
        overrides["plugins"] = {"web": web}
    return StandaloneContext(make_config(overrides).config)


def test_results_carry_their_url_as_provenance(search_server):
    got = WebRetriever().retrieve("what is confabulation", RetrievalFilters(), 2, _ctx(search_server))
    assert SearchHandler.requests[-1] == {"q": ["what is confabulation"], "format": ["json"]}
    assert [c.provenance.source for c in got.chunks] == [RESULTS[0]["url"], RESULTS[1]["url"]]
    p = got.chunks[0].provenance
    assert (p.collection, p.stream, p.type, p.source_type) == ("web", "web", "web", "web")
    assert p.score == 1.0 and got.chunks[1].provenance.score == 0.5
    assert p.heading == "Confabulation" and p.extra["domain"] == "en.example.org" and p.extra["rank"] == 1
    assert p.ingested_at is not None
    assert got.chunks[0].text.startswith("Confabulation\n\nConfabulation is the production")


def test_approved_domains_are_weighted_and_filterable(search_server):
    ctx = _ctx(search_server, approved_domains=["university.edu"])
    got = WebRetriever().retrieve("hallucination", RetrievalFilters(), 3, ctx)
    assert got.chunks[0].provenance.source == RESULTS[0]["url"]  # 0.25 x 1.2 < 1.0: not lifted
    last = got.chunks[2].provenance
    assert (last.source, last.approved, last.weight) == (RESULTS[2]["url"], True, 1.2)
    ctx_heavy = StandaloneContext(make_config({"retrieval": {"web_endpoint": search_server, "approved_weight": 5.0},
                                               "plugins": {"web": {"approved_domains": ["university.edu"]}}}).config)
    heavy = WebRetriever().retrieve("hallucination", RetrievalFilters(), 3, ctx_heavy)
    assert heavy.chunks[0].provenance.source == RESULTS[2]["url"] and heavy.chunks[0].provenance.approved
    only = WebRetriever().retrieve("hallucination", RetrievalFilters(approved_only=True), 3, ctx)
    assert [c.provenance.source for c in only.chunks] == [RESULTS[2]["url"]]


def test_empty_results_are_diagnosed(search_server):
    none = WebRetriever().retrieve("nothing", RetrievalFilters(), 3, _ctx(search_server))
    assert none.empty_diagnosis.empty_reason is EmptyReason.no_match
    assert "unresponsive engines" in none.empty_diagnosis.detail
    typed = WebRetriever().retrieve("x", RetrievalFilters(types=["concept"]), 3, _ctx(search_server))
    assert typed.empty_diagnosis.empty_reason is EmptyReason.filtered_out
    assert typed.empty_diagnosis.raw_chunks_returned == 3
    tight = WebRetriever().retrieve("x", RetrievalFilters(), 3, _ctx(search_server, max_chars=10))
    assert tight.empty_diagnosis.empty_reason is EmptyReason.ranker_truncation


@pytest.mark.parametrize(("query", "message"), [
    ("broken", "answered HTTP 500"),
    ("html", "something other than search JSON"),
])
def test_bad_answers_raise_retrieval_error(search_server, query, message):
    with pytest.raises(RetrievalError, match=message) as info:
        WebRetriever().retrieve(query, RetrievalFilters(), 3, _ctx(search_server))
    assert search_server in str(info.value)


def test_timeouts_are_explicit_and_raise(search_server):
    started = time.perf_counter()
    with pytest.raises(RetrievalError, match="timed out") as info:
        WebRetriever().retrieve("slow", RetrievalFilters(), 3, _ctx(search_server, timeout_s=0.3))
    assert time.perf_counter() - started < 1.8
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)


def test_unreachable_endpoint_and_missing_endpoint_raise(search_server):
    with pytest.raises(RetrievalError, match="retrieval.web_endpoint is not set"):
        WebRetriever().retrieve("x", RetrievalFilters(), 3, _ctx(None))
    with pytest.raises(RetrievalError, match="failed: ConnectError") as info:
        WebRetriever().retrieve("x", RetrievalFilters(), 3, _ctx("http://127.0.0.1:9/search"))
    assert isinstance(info.value.__cause__, httpx.ConnectError)


class Sink:
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


def _web_mode(tmp_path: Path) -> Path:
    """The default ``standard`` mode, renamed, with a type filter that admits web results."""
    text = (ora_modes.modes_dir() / "standard.md").read_text(encoding="utf-8")
    text = text.replace("name: standard", "name: web-research", 1)
    chat = "    conversation: {types: [chat]}"
    text = text.replace(chat, chat + "\n    web: {types: [web]}", 1)
    assert "web: {types: [web]}" in text, "the standard mode's front matter changed shape"
    folder = tmp_path / "modes"
    folder.mkdir()
    (folder / "web-research.md").write_text(text, encoding="utf-8")
    return folder


@pytest.mark.parametrize("enabled", [False, True])
def test_the_web_stream_is_off_by_default_and_used_when_enabled(search_server, tmp_path, enabled):
    question = "What is confabulation?"
    phase_a = {"match": "PHASE A CLEANUP", "on": "system",
               "reply": f"CLEANED PROMPT:\n{question}\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"}
    streams = {"concept": False, "conversation": False, "relationship": False}
    if enabled:
        streams["web"] = True
    resolved = scripted_config(tmp_path / "traces", rules=[phase_a, {"match": ".", "reply": "An answer."}],
                               retrieval={"web_endpoint": search_server, "streams": streams},
                               modes={"dirs": [str(_web_mode(tmp_path))]})
    sink = Sink()
    rt = make_runtime(make_host(ora_scripted, ora_modes, ora_web, sink), resolved, stderr=io.StringIO())
    run_turn(rt, question, mode="web-research")
    web_events = [e.data for e in sink.events if e.kind == "retrieval" and e.data["stream"] == "web"]
    if enabled:
        assert [e["chunks"] for e in web_events] == [3], web_events
        assert SearchHandler.requests[-1]["q"] == [question]
    else:
        assert web_events == [] and SearchHandler.requests == []
