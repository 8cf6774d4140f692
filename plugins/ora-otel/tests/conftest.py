"""What the OTel tests share: a real OTLP/HTTP receiver on 127.0.0.1 that decodes every request with
``opentelemetry-proto``, and Gear 4 turns on scripted backends with the real first-party plugins
(registered in process, no autoload), the ``otel`` sink pointed wherever the test says."""

from __future__ import annotations

import io
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import ora_broken
import ora_bypass
import ora_evidence_guard
import ora_health_detectors
import ora_inject
import ora_otel
import ora_scripted
import ora_signals
import ora_trace_fs
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

import ora_modes
from ora_core import hookimpl
from ora_core.api import Chunk, EmptyDiagnosis, Provenance, Retrieval
from ora_core.testing import make_host, make_runtime, run_turn, scripted_config

PROMPT = "Cui bono on the harness paradigm shift in commercial AI?"
CLEANED = "Cui bono on the harness paradigm shift in commercial AI: who benefits and who pays?"
VAULT = [{"text": "Harness vendors bundle models with tooling; customers shift budgets to them.",
          "source": "notes/harness.md"}]
GEAR4_STEPS = ["phase-a", "pre-routing", "context-assembly", "context-assertions", "role-slots",
               "step3-depth-analyst", "step3-breadth-analyst", "step4-breadth-evaluates-depth",
               "step4-depth-evaluates-breadth", "step5-depth-reviser", "step5-breadth-reviser",
               "step6-cycle1-depth-verify", "step6-cycle1-breadth-verify", "step7-consolidation",
               "step8-final-verify", "final-output"]


# --- the receiver ---------------------------------------------------------------------------------


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    start: int
    end: int
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]]
    links: list[tuple[str, str, dict[str, Any]]]
    status: int
    status_message: str
    scope: str
    schema_url: str
    resource: dict[str, Any]

    def events_named(self, name: str) -> list[dict[str, Any]]:
        return [attrs for event_name, _, attrs in self.events if event_name == name]


@dataclass
class Receiver:
    """``POST /v1/traces`` on 127.0.0.1: each request kept raw and decoded."""

    url: str
    bodies: list[bytes] = field(default_factory=list)
    spans: list[ReceivedSpan] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Set to refuse every export with this HTTP status (and ``refusal`` as the body).
    refuse_with: int = 0
    refusal: str = "export refused"

    def take(self, path: str, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        found = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(ReceivedSpan(
                        name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(), kind=span.kind, start=span.start_time_unix_nano,
                        end=span.end_time_unix_nano, attributes=_attributes(span.attributes),
                        events=[(e.name, e.time_unix_nano, _attributes(e.attributes)) for e in span.events],
                        links=[(link.trace_id.hex(), link.span_id.hex(), _attributes(link.attributes))
                               for link in span.links],
                        status=span.status.code, status_message=span.status.message,
                        scope=scope_spans.scope.name, schema_url=scope_spans.schema_url, resource=resource))
        with self.lock:
            self.paths.append(path)
            self.bodies.append(body)
            self.spans += found

    def named(self, name: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> ReceivedSpan:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}: {sorted(s.name for s in self.spans)}"
        return found[0]

    def payload(self) -> bytes:
        return b"".join(self.bodies)


def _serve(receiver: Receiver) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/v1/traces" or receiver.refuse_with:
                text = receiver.refusal.encode() if receiver.refuse_with else b""
                self.send_response(receiver.refuse_with or 404)
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)
                return
            receiver.take(self.path, body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), name="otlp-receiver", daemon=True).start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    return server


@pytest.fixture
def receivers() -> Iterator[Any]:
    """``receivers()`` -> a new running OTLP/HTTP receiver (``.url`` is its base URL); all stopped after."""
    servers: list[ThreadingHTTPServer] = []

    def start() -> Receiver:
        found = Receiver(url="")
        servers.append(_serve(found))
        return found

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def receiver(receivers: Any) -> Receiver:
    """A running OTLP/HTTP receiver; ``receiver.url`` is its base URL."""
    return receivers()


@pytest.fixture
def dead_url() -> str:
    """The base URL of a port on 127.0.0.1 that nothing listens on (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# --- Gear 4 turns -----------------------------------------------------------------------------------


def prose(tag: str, words: int = 48) -> str:
    base = ["the", "evidence", "supports", "a", "careful", "reading", "of", "who", "gains", "and", "who",
            "pays", "as", "harness", "vendors", "bundle", "models", "with", "tooling", "and", "customers",
            "shift", "their", "budgets", "accordingly"]
    return f"{tag}: " + " ".join(base[i % len(base)] for i in range(words)).capitalize() + "."


def reply(tag: str, extra: str = "") -> str:
    return prose(tag) + (f"\n\n{extra}" if extra else "") + "\nCONFIDENCE: 0.90"


EVALUATION = "\n".join(f"## {i}. {name}\nNone found beyond the general point that {name.lower()} matter."
                       for i, name in enumerate(["UNSUPPORTED CLAIMS", "SKIPPED INFERENTIAL STEPS",
                                                 "MISPLACED CONFIDENCE", "CONFABULATED SPECIFICS",
                                                 "MISSING CONSIDERATIONS", "CRITERIA CHECK",
                                                 "REQUIRED CHANGES"], 1)) + "\nCONFIDENCE: 0.90"
REVISION = ("## CRITICISMS ACCEPTED\n- missing stakeholder: end users — added\n"
            "## CRITICISMS REJECTED\n- motive claim — the analysis never asserts motive")
VERDICT_PASS = "Checked each claim against the evidence package; all are supported.\n\n## VERDICT\nVERDICT: PASS"


def gear4_rules() -> list[dict[str, str]]:
    def role(pattern: str, text: str) -> dict[str, str]:
        return {"match": pattern, "reply": text, "on": "system"}

    return [
        {"match": "PHASE A CLEANUP", "on": "system",
         "reply": f"CLEANED PROMPT:\n{CLEANED}\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"},
        role("ROLE: VERIFIER", VERDICT_PASS),
        role("ROLE: RE-REVISER", reply("RE-REVISED", REVISION)),
        role("ROLE: CORRECTIVE REVISER", reply("CORRECTED")),
        role("ROLE: EVALUATOR.*critiquing the DEPTH", EVALUATION),
        role("ROLE: EVALUATOR.*critiquing the BREADTH", EVALUATION),
        role("ROLE: REVISER.*the DEPTH stream", reply("DEPTH-REVISED", REVISION)),
        role("ROLE: REVISER.*the BREADTH stream", reply("BREADTH-REVISED", REVISION)),
        role("ROLE: CONSOLIDATOR", reply("CONSOLIDATED")),
        role("ROLE: DEPTH ANALYST", reply("DEPTH-ANALYSIS")),
        role("ROLE: BREADTH ANALYST", reply("BREADTH-ANALYSIS")),
    ]


class VaultRetriever:
    """An in-memory concept index: a note matches when it shares a word of four letters or more."""

    name = "vault"
    stream = "concept"

    def __init__(self, docs: list[dict[str, str]], gate: Any = None) -> None:
        self.docs = docs
        self.gate = gate  # called before answering (a test holds the turn open with it)

    def retrieve(self, query: str, filters: Any, k: int, ctx: Any) -> Retrieval:
        if self.gate is not None:
            self.gate()
        words = set(re.findall(r"[a-z0-9]{4,}", query.lower()))
        hits = [d for d in self.docs if words & set(re.findall(r"[a-z0-9]{4,}", d["text"].lower()))]
        chunks = [Chunk(id=f"vault-{i}", text=d["text"], provenance=Provenance(
            collection="vault", source=d["source"], score=0.8, stream="concept")) for i, d in enumerate(hits[:k])]
        diagnosis = None if chunks else EmptyDiagnosis(empty_reason="no_match", collection_total_count=len(self.docs))
        return Retrieval(stream="concept", query=query, chunks=chunks, empty_diagnosis=diagnosis, retriever="vault")


class Components:
    def __init__(self, retriever: VaultRetriever) -> None:
        self.retriever = retriever

    @hookimpl
    def ora_register_retrievers(self, register: Any) -> None:
        register(self.retriever)


def otel_sink(host: Any) -> Any:
    return host.registry["trace_sink"]["otel"].obj


@pytest.fixture
def gear4(tmp_path: Path) -> Any:
    """``gear4.run(otel={...}, gate=None, inject=None, **config) -> (result, runtime, sink)``: one Gear 4
    turn (model verifiers, two scripted models, a concept retriever) traced by ora-trace-fs into
    ``tmp_path/traces`` and by the ``otel`` sink with ``[plugins.otel]`` = ``otel``. The sink is shut
    down after the test."""
    sinks: list[Any] = []

    def runtime(*, otel: dict[str, Any] | None = None, gate: Any = None, **config: Any) -> Any:
        rules = gear4_rules()
        options = {"rules": rules}
        overrides: dict[str, Any] = {
            "verification": {"verifier": "model", "final_verifier": "model"},
            "retrieval": {"streams": {"conversation": False, "relationship": False}},
            "backends": {"local": {"options": options},
                         "other": {"type": "scripted", "model": "scripted-2", "family": "other", "options": options}},
            # the consolidator runs on local: the final verifier on the other family (no self-verification)
            "roles": {"breadth": "other", "final_verifier": "other"},
            "plugins": {"trace-fs": {"fsync": False}, **({"otel": otel} if otel is not None else {})},
        }
        for key, value in config.items():
            overrides[key] = {**overrides.get(key, {}), **value} if isinstance(value, dict) else value
        resolved = scripted_config(tmp_path / "traces", rules=rules, **overrides)
        host = make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs, ora_broken,
                         ora_health_detectors, ora_evidence_guard, ora_inject, ora_otel,
                         Components(VaultRetriever(VAULT, gate)))
        sinks.append(otel_sink(host))
        return make_runtime(host, resolved, stderr=io.StringIO())

    def run(*, inject: str | None = None, prompt: str = PROMPT, **kw: Any) -> tuple[Any, Any, Any]:
        rt = runtime(**kw)
        result = run_turn(rt, prompt, mode="cui-bono", inject=inject)
        return result, rt, otel_sink(rt.host)

    yield SimpleNamespace(run=run, runtime=runtime, root=tmp_path / "traces", steps=GEAR4_STEPS, prompt=PROMPT)
    for sink in sinks:
        sink.shutdown()
