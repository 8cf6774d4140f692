"""The llama.cpp side: one loaded model per process and settings, and blocking generation.

Everything here runs in worker threads (llama.cpp blocks). A model loads once per process and
per (file, context size, threads ...) key, under a lock, on first use; calls to one ``Llama``
are serialised by that model's own lock. Generation checks a deadline and a cancel flag at
every token (through a logits processor that forces end-of-sequence), so a timeout or a
cancelled caller stops the model instead of leaving it running.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .options import LocalLLMOptions


class EngineError(Exception):
    """llama.cpp failed; ``reason`` is one of ``import``, ``load``, ``context``, ``busy``, ``run``."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


@dataclass
class LoadedModel:
    llama: Any
    path: Path
    n_ctx: int
    threads: int
    load_s: float
    chat_format: str
    has_gguf_template: bool
    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: int = 0
    batch_threads: int = 0
    #: the (generation, batch) thread counts set on the context now (adapted per call)
    active_threads: tuple[int, int] = (0, 0)
    last_sample: Any = None  # the last CpuSample taken for this model (see _Threads)
    #: why ``adapt_threads`` cannot work here (no /proc/stat), once found; None while it works
    adapt_unavailable: str | None = None
    #: the configured file when ``path`` is a converted copy of it (see requantize.py)
    source_path: Path | None = None
    conversion: str | None = None  # e.g. "Q4_1 → Q8_0 (cached copy)"
    conversion_failure: str | None = None  # why a wanted conversion did not happen


@dataclass
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    latency_s: float
    interrupted: str | None = None  # "timeout" | "cancelled" when the guard stopped the model
    waited_s: float = 0.0  # time spent waiting for the model's lock
    threads: tuple[int, int] = (0, 0)  # (generation, batch) threads this call ran on
    constrained: bool = False  # generated under a grammar (``generate(grammar=...)``)


_MODELS: dict[tuple[Any, ...], LoadedModel] = {}
_LOAD_LOCK = threading.Lock()


#: Where a failure with no turn to record it in goes (one JSON line each): ``exit-failures.jsonl`` in
#: the trace root of the last turn this process ran (``ora_turn_started`` keeps it), else in the
#: default trace root (``<user data dir>/traces``).
EXIT_LOG = "exit-failures.jsonl"
_TRACE_CONFIG: list[Any] = []  # the last turn's ``[trace]`` section (resolved only when needed)


def remember_trace_config(trace: Any) -> None:
    _TRACE_CONFIG[:] = [trace]


def exit_log_path() -> Path:
    if _TRACE_CONFIG:
        return Path(_TRACE_CONFIG[0].resolved_root()) / EXIT_LOG
    from ora_core.api import user_data_dir

    return user_data_dir() / "traces" / EXIT_LOG


def record_exit_failure(what: str, exc: BaseException) -> str:
    """Say on stderr that ``what`` failed at exit, and append it as one JSON line to ``exit_log_path()``
    (where a user finds it after the process is gone); returns the line said on stderr."""
    import json
    from datetime import datetime, timezone

    log = exit_log_path()
    line = json.dumps({"at": datetime.now(timezone.utc).isoformat(), "tag": "local-llm-exit-failure",
                       "what": what, "error_class": type(exc).__name__, "error_message": str(exc)[:2000],
                       "pid": os.getpid()}, sort_keys=True) + "\n"
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))  # one write per line: never interleaved
        finally:
            os.close(fd)
        where = f"; recorded in {log}"
    except OSError as log_exc:
        where = f"; and it cannot be recorded in {log} ({type(log_exc).__name__}: {log_exc})"
    said = f"ora-local-llm: {what} failed: {type(exc).__name__}: {exc}{where}"
    print(said, file=sys.stderr)
    return said


def _close_models() -> None:
    """Free every loaded model before interpreter teardown: llama-cpp-python's own finaliser runs
    too late (its C bindings are already gone) and prints a TypeError on every exit. A close that
    fails is said on stderr and kept in ``exit_log_path()`` (no turn is open to trace it)."""
    with _LOAD_LOCK:
        models = list(_MODELS.values())
        _MODELS.clear()
    for model in models:
        close = getattr(model.llama, "close", None)
        if close is None:
            continue
        try:
            close()
        except Exception as exc:  # noqa: BLE001 - exiting anyway; said and recorded, never hidden
            record_exit_failure(f"closing {model.path.name} at exit", exc)


atexit.register(_close_models)


@dataclass(frozen=True)
class CpuSample:
    """One look at the machine: /proc/stat's idle and total jiffies (all CPUs) and this
    process's own CPU seconds (all its threads, the model's included), at ``at`` (monotonic)."""

    at: float
    idle: float
    total: float
    own: float


def cpu_sample() -> CpuSample | None:
    """A ``CpuSample`` now, or None where there is no /proc/stat."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [float(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return CpuSample(at=time.monotonic(), idle=values[3] + values[4], total=sum(values), own=time.process_time())


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def free_cores(before: CpuSample, after: CpuSample) -> float | None:
    """The cores other processes left free between two samples: all cores minus what the
    machine was busy with, this process's own threads excepted (a model's spinning threads
    and Ora's own background work are not contention to yield to)."""
    if after.total <= before.total or after.at <= before.at:
        return None
    cores = _cores()
    busy = cores * (1.0 - (after.idle - before.idle) / (after.total - before.total))
    own = (after.own - before.own) / (after.at - before.at)
    return max(0.0, cores - max(0.0, busy - own))


def choose_threads(configured: int, configured_batch: int, free: float | None) -> tuple[int, int]:
    """The thread counts for one call: the configured ones, capped by the free cores (>= 1)."""
    if free is None:
        return configured, configured_batch
    cap = max(1, int(free + 0.5))
    return min(configured, cap), min(configured_batch, cap)


class _Threads:
    """The thread counts of one call, fitted to the cores other processes leave free: chosen
    when the call starts (from the look since the model's previous call, or a short fresh one),
    then re-fitted between tokens every ``RECHECK_S`` while it generates."""

    RECHECK_S = 0.25
    RECENT_S = 10.0  # an older look is not evidence about now: sample afresh

    def __init__(self, model: LoadedModel, opts: LocalLLMOptions) -> None:
        self.model, self.opts = model, opts
        self.configured = (model.threads, model.batch_threads)

    def start(self) -> tuple[int, int]:
        wanted = self.configured
        if self.opts.adapt_threads:
            now = cpu_sample()
            if now is None:
                self._unavailable()
            last = self.model.last_sample
            if now is not None and (last is None or not self.opts.adapt_window_s <= now.at - last.at <= self.RECENT_S):
                last = now
                time.sleep(self.opts.adapt_window_s)
                now = cpu_sample()
            if now is not None and last is not None:
                wanted = choose_threads(wanted[0], wanted[1], free_cores(last, now))
            self.model.last_sample = now
        self._apply(wanted)
        return wanted

    def tick(self) -> None:
        """Between two tokens: re-fit the threads to the cores free since the last look (only
        for a call that adapts: a call with ``adapt_threads`` off keeps its configured threads
        even when an adapting backend sharing the model left a look behind)."""
        if not self.opts.adapt_threads:
            return
        last = self.model.last_sample
        if last is None or time.monotonic() - last.at < self.RECHECK_S:
            return
        now = cpu_sample()
        self.model.last_sample = now
        if now is None:
            return
        wanted = choose_threads(self.configured[0], self.configured[1], free_cores(last, now))
        if wanted != self.model.active_threads:
            self._apply(wanted)

    def _unavailable(self) -> None:
        """adapt_threads is on but the machine cannot be read: say so once per model (a warning,
        and ``adapt_unavailable`` for ``ora models list --check``); calls run as configured."""
        if self.model.adapt_unavailable is None:
            self.model.adapt_unavailable = ("no readable /proc/stat here: adapt_threads cannot see the other "
                                            f"processes' load; every call runs on the configured {self.configured[0]} "
                                            "thread(s)")
            warnings.warn(f"ora-local-llm: {self.model.adapt_unavailable}", RuntimeWarning, stacklevel=2)

    def _apply(self, wanted: tuple[int, int]) -> None:
        if wanted != self.model.active_threads:
            from llama_cpp import llama_set_n_threads

            llama_set_n_threads(self.model.llama.ctx, wanted[0], wanted[1])
            self.model.active_threads = wanted


class SchemaError(ValueError):
    """A response schema llama.cpp's JSON-schema-to-grammar converter cannot turn into a grammar."""


#: JSON string characters as llama.cpp's own (C++) converter writes them: no raw control
#: characters (a JSON parser refuses a raw newline inside a string). llama-cpp-python's Python
#: converter allows them; its rule is replaced (``schema_grammar``).
_LOOSE_CHAR = 'char ::= [^"\\\\] |'
_JSON_CHAR = 'char ::= [^"\\\\\\x7F\\x00-\\x1F] |'
_GRAMMARS: dict[str, Any] = {}
_GRAMMARS_LOCK = threading.Lock()


def schema_grammar(schema: dict[str, Any]) -> Any:
    """The ``LlamaGrammar`` of a JSON schema (compiled once per schema and process). Raises
    ``SchemaError`` for a schema the converter refuses (it never falls back to "any JSON"
    silently, as llama-cpp-python's ``response_format`` path does)."""
    import json

    key = json.dumps(schema, sort_keys=True, ensure_ascii=False)
    with _GRAMMARS_LOCK:
        cached = _GRAMMARS.get(key)
    if cached is not None:
        return cached
    from llama_cpp import LlamaGrammar
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        text = json_schema_to_gbnf(json.dumps(schema))
    except Exception as exc:  # noqa: BLE001 - the converter raises bare Exceptions/AssertionErrors; named
        raise SchemaError(f"llama.cpp cannot turn the response schema into a grammar: "
                          f"{type(exc).__name__}: {exc}") from exc
    if any(line.startswith("char ::=") and not line.startswith(_LOOSE_CHAR) for line in text.splitlines()):
        raise SchemaError("llama.cpp's grammar for the response schema has a JSON string rule of an unknown "
                          "form; refusing to constrain with a grammar that may allow raw control characters")
    grammar = LlamaGrammar.from_string(text.replace(_LOOSE_CHAR, _JSON_CHAR), verbose=False)
    with _GRAMMARS_LOCK:
        if len(_GRAMMARS) < 256:
            _GRAMMARS[key] = grammar
    return grammar


def loaded_models() -> list[LoadedModel]:
    """The models this process has loaded (for checks and benchmarks)."""
    with _LOAD_LOCK:
        return list(_MODELS.values())


def load_model(path: Path, n_ctx: int, opts: LocalLLMOptions) -> LoadedModel:
    """Load ``path`` (or its Q8_0 copy, per ``opts.requantize``) once per process and settings."""
    key = (str(path), n_ctx, opts.threads, opts.batch_threads, opts.n_batch, opts.chat_format, opts.flash_attn,
           opts.requantize, opts.cache_dir)
    with _LOAD_LOCK:
        cached = _MODELS.get(key)
        if cached is not None:
            return cached
        from .requantize import prepare

        try:
            from llama_cpp import Llama
        except (ImportError, OSError) as exc:
            raise EngineError("import", f"llama-cpp-python cannot be imported ({type(exc).__name__}: {exc}); "
                                        "install it with scripts/install.sh") from exc

        def construct(file: Path) -> Any:
            try:
                return Llama(model_path=str(file), n_ctx=n_ctx, n_threads=opts.threads,
                             n_threads_batch=opts.batch_threads or opts.threads, n_batch=min(opts.n_batch, n_ctx),
                             chat_format=opts.chat_format, flash_attn=opts.flash_attn, verbose=False)
            except (ValueError, RuntimeError, OSError) as exc:
                raise EngineError("load", f"llama.cpp could not load {file}: {exc}") from exc

        source = path
        prepared = prepare(source, opts.requantize, threads=opts.batch_threads or opts.threads,
                           cache_dir=Path(opts.cache_dir).expanduser() if opts.cache_dir else None)
        conversion, failure = prepared.conversion, prepared.failure
        start = time.perf_counter()
        try:
            llama = construct(prepared.path)
            path = prepared.path
        except EngineError as exc:
            if prepared.path == source:
                raise
            # A cached copy that will not load (damaged after it was written): drop it, so the next
            # load converts again, and run the source now.
            failure = f"the cached copy {prepared.path} would not load ({exc}); it was removed"
            prepared.path.unlink(missing_ok=True)
            conversion = None
            llama = construct(source)
            path = source
        if failure:
            warnings.warn(f"ora-local-llm: {failure}; loading {source.name} as it is (slower prompt evaluation)",
                          RuntimeWarning, stacklevel=2)
        batch_threads = opts.batch_threads or opts.threads
        model = LoadedModel(llama=llama, path=path, n_ctx=n_ctx, threads=opts.threads,
                            load_s=time.perf_counter() - start, chat_format=str(llama.chat_format),
                            has_gguf_template="tokenizer.chat_template" in llama.metadata,
                            batch_threads=batch_threads, active_threads=(opts.threads, batch_threads),
                            source_path=source if path != source else None, conversion=conversion,
                            conversion_failure=failure)
        _MODELS[key] = model
        return model


def generate(model: LoadedModel, messages: Sequence[dict[str, str]], *, max_tokens: int, temperature: float,
             stop: Sequence[str], timeout_s: float, opts: LocalLLMOptions, cancel: threading.Event,
             on_delta: Callable[[str], None] | None = None,
             stop_unless: tuple[str, int] | None = None, grammar: Any = None) -> Generation:
    """Run one chat completion, blocking; stream deltas to ``on_delta`` when given.

    ``stop_unless = (text, within_chars)``: end the reply once ``within_chars`` characters have
    come without ``text`` (case-insensitive) among them (``finish_reason = "stop_unless"``).

    ``grammar`` (a ``LlamaGrammar``, see ``schema_grammar``): every token is sampled under it
    (``Generation.constrained``). ``stop_unless`` does not apply then (the reply's shape is the
    grammar's). A grammar forbids end-of-sequence until its document is complete, so the guard
    cannot end such a reply by forcing end-of-sequence (llama.cpp would sample past the forced
    token): the reply is generated as a stream, and the stream is closed at the first token after
    a timeout or a cancel."""
    import numpy as np
    from llama_cpp import LogitsProcessorList

    started = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    if not model.lock.acquire(timeout=timeout_s):
        raise EngineError("busy", f"the model stayed busy with other calls for the whole timeout ({timeout_s:.1f}s)")
    waited = time.perf_counter() - started
    try:
        threads = _Threads(model, opts)
        threads.start()
        llama = model.llama
        eos = llama.token_eos()
        state: dict[str, str | None] = {"interrupted": None}
        # the reply's first token index (set at the first look) and whether stop_unless is settled
        watch: dict[str, Any] = {"base": None, "settled": stop_unless is None or grammar is not None,
                                 "prompt": None}

        def unwanted(input_ids: Any) -> bool:
            """The reply so far is ``within`` characters long and still lacks the text."""
            if watch["base"] is None:
                watch["base"] = len(input_ids)
                return False
            assert stop_unless is not None
            reply = llama.detokenize(list(input_ids[watch["base"]:])).decode("utf-8", "replace").lower()
            if stop_unless[0].lower() in reply:
                watch["settled"] = True
                return False
            return len(reply) >= stop_unless[1]

        def guard(input_ids: Any, scores: Any) -> Any:
            threads.tick()
            if watch["prompt"] is None:
                watch["prompt"] = len(input_ids)  # the first look: everything evaluated is the prompt
            if state["interrupted"] is None:
                if cancel.is_set():
                    state["interrupted"] = "cancelled"
                elif time.monotonic() > deadline:
                    state["interrupted"] = "timeout"
                elif not watch["settled"] and unwanted(input_ids):
                    state["interrupted"] = "stop_unless"
            if state["interrupted"] is not None and grammar is None:
                scores[:] = -np.inf
                scores[eos] = 0.0
            return scores

        kwargs: dict[str, Any] = {
            "messages": list(messages), "max_tokens": max_tokens, "temperature": temperature,
            "top_p": opts.top_p, "repeat_penalty": opts.repeat_penalty, "stop": list(stop) or None,
            "logits_processor": LogitsProcessorList([guard]),
        }
        if opts.seed is not None:
            kwargs["seed"] = opts.seed
        if grammar is not None:
            kwargs["grammar"] = grammar
        model.calls += 1
        try:
            if on_delta is None and grammar is None:
                out = llama.create_chat_completion(**kwargs)
                choice = out["choices"][0]
                text = choice["message"].get("content") or ""
                usage = out.get("usage") or {}
                prompt_tokens = int(usage.get("prompt_tokens", 0))
                completion_tokens = int(usage.get("completion_tokens", 0))
                finish = choice.get("finish_reason") or ""
            else:
                parts: list[str] = []
                finish = ""
                chunks = llama.create_chat_completion(stream=True, **kwargs)
                try:
                    for chunk in chunks:
                        choice = chunk["choices"][0]
                        delta = (choice.get("delta") or {}).get("content")
                        if delta:
                            parts.append(delta)
                            if on_delta is not None:
                                on_delta(delta)
                        finish = choice.get("finish_reason") or finish
                        if grammar is not None and state["interrupted"] is not None:
                            break  # see the docstring: a grammar's reply ends here, not at a forced EOS
                finally:
                    close = getattr(chunks, "close", None)
                    if close is not None:
                        close()  # a stream left early stops generating now, under the model's lock
                text = "".join(parts)
                prompt_tokens = int(watch["prompt"] or 0)
                completion_tokens = len(llama.tokenize(text.encode(), add_bos=False, special=False)) if text else 0
        except ValueError as exc:
            if "context window" in str(exc):
                raise EngineError("context", str(exc)) from exc
            raise EngineError("run", f"{type(exc).__name__}: {exc}") from exc
        except RuntimeError as exc:
            raise EngineError("run", f"{type(exc).__name__}: {exc}") from exc
        used = model.active_threads
        if state["interrupted"] == "stop_unless":
            finish = "stop_unless"
    finally:
        model.lock.release()
    return Generation(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                      finish_reason=finish, latency_s=time.perf_counter() - started,
                      interrupted=state["interrupted"], waited_s=waited, threads=used,
                      constrained=grammar is not None)
