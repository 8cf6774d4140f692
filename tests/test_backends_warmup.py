"""Speed measures of the default run, pinned: retrievers warm up in the background while Phase A
runs (a failed warm-up is named, never silent), and Phase A's reply budget is capped by the
prompt's size through ``call_role(max_tokens_cap=...)``, which lowers and never raises."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import ora_scripted
import pytest

from ora_core import hookimpl
from ora_core.engine import run_turn
from ora_core.engine.backends import BackendPool, call_role
from ora_core.engine.phase_a import reply_token_cap
from ora_core.engine.prompts import build_messages
from ora_core.kernel.models import Chunk, Provenance, Retrieval
from ora_core.kernel.trace import TurnContext
from ora_core.testing import make_config, make_host, make_runtime, scripted_config

PROMPT = "Explain how the supplement protocol handles a step that lacks a fact."
PHASE_A_LATENCY_S = 0.4


class WarmingRetriever:
    """A retriever whose ``warm_up`` is slow (like loading an embedding model) or fails."""

    layer = "context_package"
    assumes: frozenset[str] = frozenset()

    def __init__(self, stream: str, *, warm_s: float = 0.3, fail: bool = False) -> None:
        self.name, self.stream = f"warm-{stream}", stream
        self.warm_s, self.fail = warm_s, fail
        self.warmed: list[tuple[float, float, str, Any]] = []  # (start, end, thread, config); time.time()
        self.retrieved_at: list[float] = []

    def warm_up(self, config: Any) -> None:
        start = time.time()
        time.sleep(self.warm_s)
        if self.fail:
            raise RuntimeError("embedding model file is corrupt")
        self.warmed.append((start, time.time(), threading.current_thread().name, config))

    def retrieve(self, query: str, filters: Any, k: int, ctx: Any) -> Retrieval:
        self.retrieved_at.append(time.time())
        chunk = Chunk(id=f"{self.stream}-1", text="The protocol asks for the missing fact.",
                      provenance=Provenance(collection="notes", source="note.md", type="concept", score=0.9))
        return Retrieval(stream=self.stream, query=query, chunks=[chunk], retriever=self.name)


class RetrieverPlugin:
    def __init__(self, *retrievers: WarmingRetriever) -> None:
        self.retrievers = retrievers

    @hookimpl
    def ora_register_retrievers(self, register: Any) -> None:
        for r in self.retrievers:
            register(r, name=r.name)


def host(*plugins: object) -> Any:
    import ora_bypass
    import ora_signals

    import ora_modes

    return make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, *plugins)


def run(tmp_path: Path, retrievers: list[WarmingRetriever], **pipeline: Any) -> tuple[Any, list[Any]]:
    resolved = scripted_config(tmp_path / "traces", rules=[
        {"match": "PHASE A CLEANUP", "on": "system", "reply": f"CLEANED PROMPT:\n{PROMPT}\nCORRECTIONS:\n- none\n"
                                                            "INFERRED ITEMS:\n- none"}],
        default="The protocol asks for the missing fact. CONFIDENCE: 0.9",
        backends={"local": {"options": {"latency_s": PHASE_A_LATENCY_S}}}, pipeline=pipeline)
    events: list[Any] = []
    runtime = make_runtime(host(RetrieverPlugin(*retrievers)), resolved)
    result = run_turn(runtime, PROMPT, mode="standard", on_event=events.append)
    return result, events


def test_retrievers_warm_up_in_background_threads_while_phase_a_runs(tmp_path: Path) -> None:
    retrievers = [WarmingRetriever(s) for s in ("concept", "conversation", "relationship")]
    result, events = run(tmp_path, retrievers)
    assert result.status in ("ok", "degraded"), result.diagnostic
    phase_a_call = next(e for e in events if e.kind == "model_call" and e.step == "phase-a").at.timestamp()
    context = next(e for e in events if e.kind == "step_started" and e.step == "context-assembly").at.timestamp()
    for r in retrievers:
        [(start, end, thread, config)] = r.warmed
        assert thread.startswith("ora-warmup-") and config is not None
        assert start < phase_a_call - PHASE_A_LATENCY_S / 2, "the warm-up began while Phase A's model ran"
        assert end <= context + 0.05, "a warm-up shorter than Phase A is done before context assembly"
    notes = {e.data["warmup"]: e.data for e in events if e.kind == "note" and e.step == "warmup"}
    assert set(notes) == {f"retriever-warm-{s}" for s in ("concept", "conversation", "relationship")}
    assert all(n["status"] == "ok" and n["seconds"] >= 0.25 for n in notes.values())


def test_a_failed_warm_up_is_named_and_the_real_retrieval_still_runs(tmp_path: Path) -> None:
    broken = WarmingRetriever("concept", warm_s=0.0, fail=True)
    result, events = run(tmp_path, [broken])
    assert "warmup-retriever-warm-concept-failed" in result.contingencies
    [note] = [e.data for e in events if e.kind == "note" and e.step == "warmup"]
    assert note["status"] == "failed" and "embedding model file is corrupt" in note["error"]
    assert broken.retrieved_at, "warm-up is an optimisation: the retrieval itself still ran"


def test_warm_up_can_be_switched_off(tmp_path: Path) -> None:
    retriever = WarmingRetriever("concept")
    result, events = run(tmp_path, [retriever], warmup=False)
    assert retriever.warmed == [] and retriever.retrieved_at
    assert not [e for e in events if e.kind == "note" and e.step == "warmup"]


def test_a_turn_that_stops_early_waits_for_the_warm_up_instead_of_abandoning_it(tmp_path: Path) -> None:
    retriever = WarmingRetriever("concept", warm_s=1.0)
    resolved = scripted_config(tmp_path / "traces", default="Not a cleanup reply.")
    runtime = make_runtime(host(RetrieverPlugin(retriever)), resolved)
    start = time.monotonic()
    result = run_turn(runtime, "zzqx vlorp?")  # no mode signal: needs_clarification, no retrieval
    assert result.status == "needs_clarification", result.status
    assert retriever.warmed and time.monotonic() - start >= 0.9 and not retriever.retrieved_at


# --- max_tokens_cap -------------------------------------------------------------------------------

class Recording:
    """A backend that records the params it was called with."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    @hookimpl
    def ora_register_backends(self, register: Any) -> None:
        seen = self.seen

        class _Factory:
            name = "recording"

            def create(self, settings: Any) -> Any:
                from ora_core.kernel.models import Completion

                class _Backend:
                    provider, model, family = "recording", settings.model, "test"

                    async def complete(self, messages: Any, params: Any) -> Any:
                        seen.append(params)
                        return Completion(text="ok", provider="recording", model=settings.model, family="test")

                return _Backend()

        register(_Factory())


@pytest.mark.parametrize(("configured", "cap", "sent"), [(256, 100, 100), (64, 100, 64), (256, None, 256)])
def test_the_cap_lowers_max_tokens_and_never_raises_it(configured: int, cap: int | None, sent: int) -> None:
    recording = Recording()
    resolved = make_config({"backends": {"local": {"type": "recording", "model": "m", "max_tokens": configured}}},
                           base_default=False)
    pool = BackendPool(resolved.config, make_host(recording))
    turn = TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash)
    asyncio.run(call_role(turn, pool, "phase_a", build_messages("T", "Q?"), prompt_key="k", max_tokens_cap=cap))
    assert recording.seen[0].max_tokens == sent


def test_phase_a_reply_cap_grows_with_the_prompt_and_leaves_room_for_the_sections() -> None:
    short, long = reply_token_cap("Hi?"), reply_token_cap("word " * 400)
    assert 96 <= short < 110 and long >= 2 * len("word " * 400) // 4


class FixedReply:
    """A backend that answers one fixed text with one finish reason."""

    def __init__(self, text: str, finish_reason: str) -> None:
        self.text, self.finish_reason = text, finish_reason

    @hookimpl
    def ora_register_backends(self, register: Any) -> None:
        outer = self

        class _Factory:
            name = "fixed"

            def create(self, settings: Any) -> Any:
                from ora_core.kernel.models import Completion

                class _Backend:
                    provider, model, family = "fixed", settings.model, "test"

                    async def complete(self, messages: Any, params: Any) -> Any:
                        return Completion(text=outer.text, provider="fixed", model=settings.model, family="test",
                                          finish_reason=outer.finish_reason)

                return _Backend()

        register(_Factory())


@pytest.mark.parametrize(("text", "finish", "used_raw", "contingency"), [
    ("CLEANED PROMPT:\nExplain the supplement protocol and then also", "length", True,
     "phase-a-truncated-used-raw-prompt"),
    ("CLEANED PROMPT:\nExplain the protocol.\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- the user means", "length",
     False, None),
    ("CLEANED PROMPT:\nExplain the protocol.", "stop", False, None),
])
def test_a_phase_a_reply_cut_inside_the_cleaned_prompt_is_not_taken_as_one(text: str, finish: str, used_raw: bool,
                                                                          contingency: str | None) -> None:
    from ora_core.engine.phase_a import run_phase_a

    resolved = make_config({"backends": {"local": {"type": "fixed", "model": "m"}}}, base_default=False)
    pool = BackendPool(resolved.config, make_host(FixedReply(text, finish)))
    turn = TurnContext(prompt=PROMPT, config=resolved.config, config_hash=resolved.hash)
    result = asyncio.run(run_phase_a(turn, pool, PROMPT))
    assert result.used_raw_prompt is used_raw
    assert result.cleaned_prompt == (PROMPT if used_raw else "Explain the protocol.")
    names = [c.name for c in turn.contingencies]
    assert (contingency in names) if contingency else not names


@pytest.mark.parametrize(("reply", "stopped", "used_raw"), [
    # the tiny model's habit: it answers the question instead of cleaning it
    ("The supplement protocol is a way for the model to ask for more facts. " * 8, True, True),
    # a preamble, then the format: parsed, never stopped
    ("Here is the cleaned prompt you asked for.\n\nCLEANED PROMPT:\nExplain the protocol.\nCORRECTIONS:\n- none\n"
     "INFERRED ITEMS:\n- none" + "\n" * 3, False, False),
])
def test_a_phase_a_reply_without_its_header_is_stopped_early_and_named(reply: str, stopped: bool,
                                                                      used_raw: bool) -> None:
    from ora_core.engine.phase_a import HEADER_WITHIN_CHARS, run_phase_a

    resolved = scripted_config(default=reply)  # the scripted backend stops as a watching backend would
    pool = BackendPool(resolved.config, make_host(ora_scripted))
    turn = TurnContext(prompt=PROMPT, config=resolved.config, config_hash=resolved.hash)
    result = asyncio.run(run_phase_a(turn, pool, PROMPT))
    assert result.used_raw_prompt is used_raw
    contingencies = {c.name: c for c in turn.contingencies}
    if stopped:
        assert result.raw_output == reply[:HEADER_WITHIN_CHARS]
        named = contingencies["phase-a-unparseable-used-raw-prompt"]
        assert named.data["stopped_early"] is True and "stopped it there" in named.detail
    else:
        assert result.cleaned_prompt == "Explain the protocol." and not contingencies
    [record] = turn.calls
    assert record.error is None and record.role == "phase_a"


def test_the_configured_embedder_warms_up_in_the_background_too(tmp_path: Path) -> None:
    class SlowEmbedder:
        name = "slow"
        dimension = 2
        warmed: list[str] = []

        def warm_up(self) -> None:
            time.sleep(0.1)
            self.warmed.append(threading.current_thread().name)

        def embed(self, texts: Any) -> list[list[float]]:
            return [[1.0, 0.0] for _ in texts]

    embedder = SlowEmbedder()

    class EmbedderPlugin:
        @hookimpl
        def ora_register_embedders(self, register: Any) -> None:
            register(embedder)

    resolved = scripted_config(tmp_path / "traces", default="The protocol asks for the missing fact. CONFIDENCE: 0.9",
                               embedding={"embedder": "slow"})
    events: list[Any] = []
    runtime = make_runtime(host(RetrieverPlugin(WarmingRetriever("concept")), EmbedderPlugin()), resolved)
    run_turn(runtime, PROMPT, mode="standard", on_event=events.append)
    assert embedder.warmed and embedder.warmed[0].startswith("ora-warmup-embedder-slow")
    notes = {e.data["warmup"]: e.data for e in events if e.kind == "note" and e.step == "warmup"}
    assert notes["embedder-slow"]["status"] == "ok"
