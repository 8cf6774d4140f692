"""The ``local-llm`` backend: async front of the in-process llama.cpp engine.

Generation runs off the event loop (``asyncio.to_thread``); every failure is a typed
``BackendError``: a missing model file or llama.cpp that will not import or load is
``BackendUnavailable``, a prompt longer than the context window is ``BackendContextExceeded`` (naming
the window), an empty reply is ``BackendBadResponse``, a generation past ``timeout_s`` (or a model busy
for that long) is ``BackendTimeout`` carrying the partial text (``partial_output``: the call record keeps
it), never returned as an answer.

Structured output (``structured_output``, option ``structured_output``, on by default): a call
whose ``CompletionParams.response_schema`` is set is generated under the llama.cpp grammar of that
JSON schema, in process, and its ``Completion`` says ``constrained = True``; ``stop_unless`` does
not apply to it. A schema llama.cpp cannot turn into a grammar is ``BackendBadResponse`` (named,
never a silent "any JSON").
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ora_core.api import (
    BackendBadResponse,
    BackendContextExceeded,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    Completion,
    CompletionParams,
    Message,
)

from .engine import EngineError, Generation, LoadedModel, SchemaError, generate, load_model, schema_grammar
from .model_file import ModelFileError, resolve_model_path
from .options import LocalLLMOptions, parse_options

BACKEND_TYPE = "local-llm"


class LocalLLMBackend:
    provider = BACKEND_TYPE

    def __init__(self, *, model: str, family: str, context_window: int, options: LocalLLMOptions) -> None:
        self.model = model
        self.family = family
        self.context_window = context_window
        self.options = options
        #: Can constrain a reply to a JSON schema (``CompletionParams.response_schema``): shown by
        #: ``ora models list``, read by callers that choose their reply format by it (Phase A).
        self.structured_output: bool = options.structured_output
        self._loaded: LoadedModel | None = None

    # --- errors -------------------------------------------------------------------------------

    def _error(self, cls: type[BackendError], message: str, detail: str = "", partial_output: str = "") -> BackendError:
        return cls(message, provider=self.provider, model=self.model, detail=detail, partial_output=partial_output)

    def _engine_error(self, exc: EngineError) -> BackendError:
        if exc.reason == "context":
            return BackendContextExceeded(f"the prompt does not fit the model's context window of "
                                          f"{self.context_window} tokens: {exc}", context_window=self.context_window,
                                          provider=self.provider, model=self.model,
                                          detail=f"engine reason: {exc.reason}")
        cls = {"import": BackendUnavailable, "load": BackendUnavailable,
               "busy": BackendTimeout}.get(exc.reason, BackendUnavailable)
        return self._error(cls, str(exc), detail=f"engine reason: {exc.reason}")

    # --- the model ----------------------------------------------------------------------------

    def _ensure_loaded(self) -> LoadedModel:
        """Load on first use (thread-safe, once per process and settings)."""
        if self._loaded is None:
            try:
                path = resolve_model_path(self.options.model_path)
            except ModelFileError as exc:
                raise self._error(BackendUnavailable, f"model file not found: {exc}") from exc
            try:
                self._loaded = load_model(path, self.context_window, self.options)
            except EngineError as exc:
                raise self._engine_error(exc) from exc
        return self._loaded

    def _run(self, messages: Sequence[Message], params: CompletionParams, cancel: threading.Event,
             on_delta: Any = None) -> Generation:
        grammar = None
        if params.response_schema is not None and self.structured_output:
            try:
                grammar = schema_grammar(params.response_schema)
            except SchemaError as exc:
                raise self._error(BackendBadResponse, f"response schema {params.schema_name!r}: {exc}",
                                  detail=str(params.response_schema)[:1500]) from exc
        loaded = self._ensure_loaded()
        try:
            gen = generate(loaded, [{"role": m.role, "content": m.content} for m in messages],
                           max_tokens=params.max_tokens, temperature=params.temperature, stop=params.stop,
                           timeout_s=params.timeout_s, opts=self.options, cancel=cancel, on_delta=on_delta,
                           stop_unless=(params.stop_unless.text, params.stop_unless.within_chars)
                           if params.stop_unless and grammar is None else None, grammar=grammar)
        except EngineError as exc:
            raise self._engine_error(exc) from exc
        if gen.interrupted == "timeout":
            raise self._error(BackendTimeout,
                              f"generation passed timeout_s={params.timeout_s:g}s after "
                              f"{gen.completion_tokens} token(s); the partial reply is not an answer",
                              detail=f"partial text: {gen.text[:1500]}", partial_output=gen.text)
        if gen.interrupted in (None, "stop_unless") and not gen.text.strip():
            raise self._error(BackendBadResponse, f"the model produced no text (finish_reason={gen.finish_reason!r})",
                              detail=f"completion_tokens={gen.completion_tokens}")
        return gen

    # --- the backend protocol -------------------------------------------------------------------

    async def complete(self, messages: Sequence[Message], params: CompletionParams) -> Completion:
        cancel = threading.Event()
        start = time.perf_counter()
        try:
            gen = await asyncio.to_thread(self._run, messages, params, cancel)
        except asyncio.CancelledError:
            cancel.set()  # the thread stops at its next token and releases the model
            raise
        return Completion(text=gen.text, provider=self.provider, model=self.model, family=self.family,
                          prompt_tokens=gen.prompt_tokens, completion_tokens=gen.completion_tokens,
                          latency_s=time.perf_counter() - start, finish_reason=gen.finish_reason,
                          warnings=self.model_warnings(), constrained=gen.constrained)

    def model_warnings(self) -> list[str]:
        """What the loaded model runs without, that the engine says only once on stderr (a Python
        warning): each call's ``Completion.warnings``, for the kernel to name in the turn's trace."""
        loaded = self._loaded
        if loaded is None:
            return []
        found = []
        if loaded.conversion_failure:
            found.append(f"local-llm: {loaded.conversion_failure}; {loaded.path.name} runs as it is "
                         "(slower prompt evaluation)")
        if self.options.adapt_threads and loaded.adapt_unavailable:
            found.append(f"local-llm: {loaded.adapt_unavailable}")
        return found

    async def stream(self, messages: Sequence[Message], params: CompletionParams) -> AsyncIterator[str]:
        """Text deltas as the model produces them; leaving the loop early stops the model."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        cancel = threading.Event()

        def on_delta(text: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, ("delta", text))

        def work() -> None:
            try:
                self._run(messages, params, cancel, on_delta)
            except BaseException as exc:  # noqa: BLE001 - carried to the consumer and re-raised there
                loop.call_soon_threadsafe(queue.put_nowait, ("error", exc))
            else:
                loop.call_soon_threadsafe(queue.put_nowait, ("done", None))

        worker = asyncio.ensure_future(asyncio.to_thread(work))
        try:
            while True:
                kind, value = await queue.get()
                if kind == "delta":
                    yield value
                elif kind == "error":
                    raise value
                else:
                    return
        finally:
            cancel.set()
            await asyncio.shield(worker)

    async def check(self) -> dict[str, Any]:
        """Load the model (if not yet) and generate one token: proof it runs here."""
        start = time.perf_counter()
        loaded = await asyncio.to_thread(self._ensure_loaded)

        def probe() -> Generation:
            try:
                return generate(loaded, [{"role": "user", "content": "Say OK."}], max_tokens=1, temperature=0.0,
                                stop=(), timeout_s=30.0, opts=self.options, cancel=threading.Event())
            except EngineError as exc:
                raise self._engine_error(exc) from exc

        gen = await asyncio.to_thread(probe)
        conversion = ({"model_source": str(loaded.source_path), "conversion": loaded.conversion}
                      if loaded.source_path else {})
        if loaded.conversion_failure:
            conversion["conversion_failed"] = loaded.conversion_failure
        return {"model_path": str(loaded.path), **conversion, "chat_format": loaded.chat_format,
                "chat_template_from_gguf": loaded.has_gguf_template, "threads": loaded.threads,
                "adapt_threads": (loaded.adapt_unavailable or "on") if self.options.adapt_threads else "off",
                "structured_output": self.structured_output,
                "n_ctx": loaded.n_ctx, "load_s": round(loaded.load_s, 3),
                "probe_s": round(gen.latency_s, 3), "latency_s": round(time.perf_counter() - start, 3)}

    async def aclose(self) -> None:
        """Nothing to close per backend: the loaded model is shared by the process."""


class LocalLLMFactory:
    name = BACKEND_TYPE

    def create(self, settings: Any) -> LocalLLMBackend:
        options = parse_options(dict(settings.options), BACKEND_TYPE)
        return LocalLLMBackend(model=settings.model or "SmolLM2-135M-Instruct", family=settings.family or "local",
                               context_window=settings.context_window, options=options)
