"""Configuration: ``ora.toml`` plus environment overrides, validated into pydantic models.

Lookup order for the file: ``--config``, ``$ORA_CONFIG``, ``./ora.toml``, then
``<user config dir>/ora/ora.toml``. A found file is merged over the bundled default
(``ora_core/default_config.toml``); then ``ORA__SECTION__KEY=value`` environment variables
override single fields (values parse as TOML literals, else as strings).

A malformed file is an error naming the file, the field path and the problem; an unknown key
is an error with a did-you-mean. The hash of the resolved configuration goes into every trace.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from ora_core.kernel.errors import ConfigError

DEFAULT_CONFIG_PATH = Path(__file__).with_name("default_config.toml")
ENV_PREFIX = "ORA__"
ROLE_NAMES = (
    "direct",
    "phase_a",
    "analyst",
    "depth",
    "breadth",
    "evaluator",
    "reviser",
    "verifier",
    "consolidator",
    "final_verifier",
)


def user_config_dir() -> Path:
    from platformdirs import user_config_dir as _ucd

    return Path(_ucd("ora", appauthor=False))


def user_data_dir() -> Path:
    from platformdirs import user_data_dir as _udd

    return Path(_udd("ora", appauthor=False))


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class TraceConfig(_Section):
    enabled: bool = True
    root: Path | None = None  # default: <user data dir>/traces
    sinks: list[str] = Field(default_factory=list)  # empty: every registered sink
    # How long a turn waits for its sinks to close (write, sync) before it returns anyway with
    # tracing degraded, the late sinks named on stderr: a stalled disk never hangs a turn.
    close_timeout_s: float = Field(default=60.0, gt=0)
    # When a turn's trace files are committed. "turn": before the turn returns (complete, and with
    # the sink's fsync on the device: the turn waits for its own writes). "async": the sink's
    # writer commits the files of finished turns in groups after they return (one durability
    # barrier per group); files are always whole (atomic), a crash loses at most the turns of
    # the last group, which were not committed yet. Sinks say how they honour it.
    durability: Literal["turn", "async"] = "turn"

    def resolved_root(self) -> Path:
        return Path(self.root).expanduser() if self.root else user_data_dir() / "traces"


class BackendConfig(_Section):
    """One ``[backends.<name>]`` table; ``type`` names a registered backend factory."""

    type: str
    model: str = ""
    family: str = ""
    base_url: str | None = None
    api_key: SecretStr | None = None
    api_key_env: str | None = None
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    context_window: int = Field(default=8192, ge=256)
    max_tokens: int = Field(default=512, ge=1)
    temperature: float = Field(default=0.2, ge=0.0, le=2.0)
    fallbacks: list[str] = Field(default_factory=list)  # other backend names, tried in order
    tokens_per_minute: int | None = Field(default=None, ge=1)
    options: dict[str, Any] = Field(default_factory=dict)  # backend-specific settings

    def resolved_api_key(self) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env:
            return os.environ.get(self.api_key_env)
        return None


class RolesConfig(_Section):
    """Which backend (a ``[backends]`` name) fills each role of the pipeline."""

    direct: str = "local"
    phase_a: str = "local"
    analyst: str = "local"
    depth: str = "local"
    breadth: str = "local"
    evaluator: str = "local"
    reviser: str = "local"
    verifier: str = "local"
    consolidator: str = "local"
    final_verifier: str = "local"


class StreamsConfig(_Section):
    concept: bool = True
    conversation: bool = True
    relationship: bool = True
    web: bool = False


class RetrievalConfig(_Section):
    path: Path | None = None  # default: <user data dir>/chroma
    server_url: str | None = None
    k: int = Field(default=5, ge=1, le=100)
    approved_weight: float = Field(default=1.2, gt=0)
    web_endpoint: str | None = None
    streams: StreamsConfig = Field(default_factory=StreamsConfig)
    retrievers: dict[str, str] = Field(default_factory=dict)  # stream -> retriever name override

    def resolved_path(self) -> Path:
        return Path(self.path).expanduser() if self.path else user_data_dir() / "chroma"


class VerificationConfig(_Section):
    verifier: str = "grounding"  # a registered verifier name, or "model" for the verifier role
    final_verifier: str = "grounding"
    threshold: float = Field(default=0.6, ge=0.0, le=1.0)


class PipelineConfig(_Section):
    best_guess: bool = False
    default_mode: str = "standard"
    fallback_mode: str = "deep-clarification"
    max_supplements: int = Field(default=2, ge=0, le=5)
    verification_cycles: int = Field(default=2, ge=1, le=5)
    retries: int = Field(default=2, ge=0, le=5)
    judge_threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    conversation_id: str = "default"
    # The reliability layer (seed 003): confidence bands and the judge of probabilistic steps.
    confidence_proceed: float = Field(default=0.85, ge=0.0, le=1.0)  # >= proceed
    confidence_retry: float = Field(default=0.65, ge=0.0, le=1.0)  # < retry; between: flag
    judge: Literal["heuristic", "model"] = "heuristic"  # "model": the verifier role judges
    # Streams a Supplemental RAG request is answered from (seed 000 §5.2: the vault).
    supplement_streams: list[str] = Field(default_factory=lambda: ["concept"])
    # Load retrievers' slow parts (embedding model, Chroma) in the background during Phase A.
    warmup: bool = True

    @model_validator(mode="after")
    def _bands_ordered(self) -> PipelineConfig:
        if self.confidence_retry > self.confidence_proceed:
            raise ValueError(f"confidence_retry ({self.confidence_retry}) must not exceed "
                             f"confidence_proceed ({self.confidence_proceed})")
        return self


class EmbeddingConfig(_Section):
    """Which registered embedder (``ora_register_embedders``) components use for vectors."""

    embedder: str = "minilm"


class PluginOptions(BaseModel):
    """Base of a plugin's ``[plugins.<name>]`` table: a plugin declares its options as a subclass,
    so an unknown key or a wrong type is an error naming the table and the key."""

    model_config = ConfigDict(extra="forbid")


class ModesConfig(_Section):
    dirs: list[Path] = Field(default_factory=list)  # extra mode directories, after mode packs


class OraConfig(_Section):
    trace: TraceConfig = Field(default_factory=TraceConfig)
    backends: dict[str, BackendConfig] = Field(default_factory=dict)
    roles: RolesConfig = Field(default_factory=RolesConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    verification: VerificationConfig = Field(default_factory=VerificationConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    modes: ModesConfig = Field(default_factory=ModesConfig)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    plugins: dict[str, dict[str, Any]] = Field(default_factory=dict)  # per-plugin free tables


class ResolvedConfig(BaseModel):
    """The configuration in force, where it came from, and its hash."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: OraConfig
    sources: list[str]
    hash: str

    def secrets(self) -> list[str]:
        """Every secret value the configuration knows of, for redaction before writing."""
        found: list[str] = []
        for backend in self.config.backends.values():
            key = backend.resolved_api_key()
            if key and len(key) >= 4:
                found.append(key)
        return found


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file: {exc.strerror or exc}", source=str(path)) from exc
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", source=str(path)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"malformed TOML: {exc}", source=str(path)) from exc


def find_config_file(explicit: str | Path | None = None, env: Mapping[str, str] | None = None,
                     cwd: Path | None = None) -> Path | None:
    env = os.environ if env is None else env
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError("--config names a file that does not exist", source=str(path))
        return path
    if env.get("ORA_CONFIG"):
        path = Path(env["ORA_CONFIG"]).expanduser()
        if not path.is_file():
            raise ConfigError("$ORA_CONFIG names a file that does not exist", source=str(path))
        return path
    local = (cwd or Path.cwd()) / "ora.toml"
    if local.is_file():
        return local
    user = user_config_dir() / "ora.toml"
    if user.is_file():
        return user
    return None


def deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _parse_env_value(value: str) -> Any:
    try:
        return tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return value


def _env_overrides(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """``ORA__TRACE__ROOT=/x`` -> ``{"trace": {"root": "/x"}}``; also which variable set which path."""
    data: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for var, value in sorted(env.items()):
        if not var.startswith(ENV_PREFIX) or var == ENV_PREFIX:
            continue
        parts = [p.lower() for p in var[len(ENV_PREFIX):].split("__") if p]
        if not parts:
            continue
        node = data
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError("conflicting environment overrides", source=var)
        node[parts[-1]] = _parse_env_value(value)
        origin[".".join(parts)] = var
    return data, origin


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """Field names valid at the parent of ``loc`` in OraConfig, for did-you-mean."""
    model: Any = OraConfig
    for part in loc[:-1]:
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = model.model_fields.get(str(part))
            if field is None:
                return []
            annotation = field.annotation
            model = annotation
            origin = getattr(annotation, "__origin__", None)
            if origin is dict:
                model = ("dict", annotation.__args__[1])
        elif isinstance(model, tuple) and model[0] == "dict":
            model = model[1]
        else:
            return []
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _validation_message(exc: ValidationError, source: str, env_origin: Mapping[str, str]) -> ConfigError:
    lines = []
    first_field = ""
    for err in exc.errors():
        loc = tuple(err["loc"])
        dotted = ".".join(str(p) for p in loc)
        first_field = first_field or dotted
        where = env_origin.get(dotted)
        prefix = f"{dotted} (from {where})" if where else dotted
        if err["type"] == "extra_forbidden":
            candidates = _fields_at(loc)
            close = difflib.get_close_matches(str(loc[-1]), candidates, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else (
                f"; known keys: {', '.join(candidates)}" if candidates else "")
            lines.append(f"{prefix}: unknown key{hint}")
        else:
            got = err.get("input")
            shown = f" (got {got!r})" if not isinstance(got, (dict, list)) else ""
            lines.append(f"{prefix}: {err['msg']}{shown}")
    message = lines[0] if len(lines) == 1 else "\n  " + "\n  ".join(lines)
    error = ConfigError(message, source=source)
    error.field = first_field
    return error


def config_hash(config: OraConfig) -> str:
    canonical = json.dumps(config.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def load_config(explicit: str | Path | None = None, env: Mapping[str, str] | None = None,
                cwd: Path | None = None, overrides: Mapping[str, Any] | None = None) -> ResolvedConfig:
    """Resolve the configuration in force; raise ``ConfigError`` on anything malformed.

    ``overrides`` (an application's, e.g. ``Ora.open(trace={"root": ...})``) apply last, over the
    file and the environment; nested tables merge key by key."""
    env = os.environ if env is None else env
    data = _load_toml(DEFAULT_CONFIG_PATH)
    sources = [f"bundled default ({DEFAULT_CONFIG_PATH.name})"]
    path = find_config_file(explicit, env, cwd)
    source = str(DEFAULT_CONFIG_PATH)
    if path is not None:
        user_data = _load_toml(path)
        # Validate the file on its own first, so its errors name the file, not the merge.
        try:
            OraConfig.model_validate(deep_merge({"backends": {}}, _shape_check_view(user_data, data)))
        except ValidationError as exc:
            raise _validation_message(exc, str(path), {}) from None
        data = deep_merge(_drop_retyped_backends(data, user_data), user_data)
        sources.append(str(path))
        source = str(path)
    from_env, origin = _env_overrides(env)
    if from_env:
        data = deep_merge(_drop_retyped_backends(data, from_env), from_env)
        sources.append("environment (" + ", ".join(sorted(origin.values())) + ")")
        source = f"{source} + environment"
    if overrides:
        data = deep_merge(_drop_retyped_backends(data, overrides), overrides)
        sources.append("application overrides (" + ", ".join(sorted(overrides)) + ")")
        source = f"{source} + application overrides"
    try:
        config = OraConfig.model_validate(data)
    except ValidationError as exc:
        raise _validation_message(exc, source, origin) from None
    check_roles(config, source)
    return ResolvedConfig(config=config, sources=sources, hash=config_hash(config))


def _drop_retyped_backends(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """A ``[backends.<name>]`` table that changes ``type`` replaces the base table instead of
    merging into it: a local model's ``options`` mean nothing to an ``openai`` backend."""
    base_backends, over_backends = base.get("backends"), over.get("backends")
    if not isinstance(base_backends, dict) or not isinstance(over_backends, Mapping):
        return base
    kept = {name: table for name, table in base_backends.items()
            if not (isinstance(table, dict) and isinstance(over_backends.get(name), Mapping)
                    and "type" in over_backends[name] and over_backends[name]["type"] != table.get("type"))}
    return {**base, "backends": kept}


def _shape_check_view(user: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    """The user's file filled in with the default's backends, so a partial backend table
    (``[backends.local] model = "x"``) validates, while every key the user wrote is checked."""
    merged = dict(user)
    if "backends" in user and isinstance(user["backends"], dict):
        merged["backends"] = deep_merge(default.get("backends", {}), user["backends"])
    return merged


def check_roles(config: OraConfig, source: str) -> None:
    for role in ROLE_NAMES:
        backend = getattr(config.roles, role)
        if backend not in config.backends:
            known = ", ".join(sorted(config.backends)) or "none"
            raise ConfigError(
                f"role {role!r} uses backend {backend!r}, which is not configured "
                f"(configured backends: {known})",
                source=source,
                field=f"roles.{role}",
            )
    for name, backend in config.backends.items():
        for fb in backend.fallbacks:
            if fb not in config.backends:
                raise ConfigError(f"fallback {fb!r} is not a configured backend", source=source,
                                  field=f"backends.{name}.fallbacks")


ConfigFormat = Literal["toml", "json"]


def render_config(resolved: ResolvedConfig, fmt: ConfigFormat = "toml") -> str:
    """The resolved configuration as text, secrets masked."""
    data = resolved.config.model_dump(mode="json", exclude_none=True)
    if fmt == "json":
        return json.dumps({"hash": resolved.hash, "sources": resolved.sources, "config": data}, indent=2)
    out: list[str] = [f"# config hash: {resolved.hash}"]
    out += [f"# source: {s}" for s in resolved.sources]
    _toml_lines(data, [], out)
    return "\n".join(out) + "\n"


def _toml_value(value: Any) -> str:
    return json.dumps(value)


def _toml_lines(data: Mapping[str, Any], path: list[str], out: list[str]) -> None:
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    if path and (scalars or not tables):
        out.append("")
        out.append("[" + ".".join(path) + "]")
    for key, value in scalars.items():
        out.append(f"{key} = {_toml_value(value)}")
    for key, value in tables.items():
        _toml_lines(value, [*path, key], out)
