"""Configuration: ``ora.toml`` plus environment overrides, validated into pydantic models.

Lookup order for the file: ``--config``, ``$ORA_CONFIG``, ``./ora.toml``, then
``<user config dir>/ora/ora.toml``. A found file is merged over the bundled default
(``ora_core/default_config.toml``); then ``ORA__SECTION__KEY=value`` environment variables
override single fields (values parse as TOML literals, else as strings).

A malformed file is an error naming the file, the field path and the problem; an unknown key
is an error with a did-you-mean. The hash of the resolved configuration goes into every trace.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
import threading
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, Self, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from ora_core.kernel.errors import ConfigError, PluginError

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
    "evidence",
    "advocate",
    "self_consistency",
    "challenger",
    "reconciler",
    "validation",
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
    # What the trace keeps of each model call. "verbatim": the exact messages sent, the parameters and
    # the raw output (a failure's partial output) beside the ledger entry; "ledger": the ledger entry
    # only (who ran it, why, tokens, latency, finish reason), for deployments that must not keep
    # prompts on disk. Either way every call is numbered and recorded (docs/trace.md).
    calls: Literal["verbatim", "ledger"] = "verbatim"

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
    # The wording of the prompts of every call this backend serves (ora_core.engine.profiles): "full",
    # or "compact" (the same rules in fewer words, the evidence and max_tokens fitted to a small
    # model's budget, named as budget signal 4 in the trace; never a step skipped).
    prompt_profile: Literal["full", "compact"] = "full"

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
    # The fact-check debate (gear 5, seed 002): evidence directions, first verdict, its re-runs,
    # the challenge, the reconciliation and the validation, each its own slot.
    evidence: str = "local"
    advocate: str = "local"
    self_consistency: str = "local"
    challenger: str = "local"
    reconciler: str = "local"
    validation: str = "local"


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
    # A retrieval that has not returned within this many seconds is a named failure of its stream
    # (rag-failures.jsonl: RetrievalTimeout); the turn goes on without waiting for it.
    timeout_s: float = Field(default=30.0, gt=0)

    def resolved_path(self) -> Path:
        return Path(self.path).expanduser() if self.path else user_data_dir() / "chroma"


class VerificationConfig(_Section):
    verifier: str = "grounding"  # a registered verifier name, or "model" for the verifier role
    final_verifier: str = "grounding"
    threshold: float = Field(default=0.6, ge=0.0, le=1.0)
    # A verifier that has not returned within this many seconds is BROKEN (<step>-verifier-exception,
    # VerifierTimeout), never PASS. Verifiers that ask a model (uses_model) are bounded by their
    # backends' deadlines instead (timeout_s x attempts of each backend on the role's chain).
    timeout_s: float = Field(default=60.0, gt=0)
    # What a verification edge whose judge shares the author's lineage (same backend, model id or
    # family; an undeclared family is unknown, never different) does: "degrade" keeps the verdict,
    # labelled, and names the contingency self-verification (the turn cannot end ok on it); "refuse"
    # re-routes the edge to a backend of another lineage, else the verdict is BROKEN; "allow" only
    # labels it (ora_core/engine/lineage.py).
    same_lineage: Literal["degrade", "refuse", "allow"] = "degrade"
    # When the answer still FAILs verification after the last corrective revision: "warn" ships it
    # under a one-line warning header (seed 001); "evidence" withholds it and ships what the retrieved
    # evidence says, each sentence with its source. Unset: by the prompt profile of the backend that
    # wrote the answer ("evidence" under "compact", "warn" under "full"; README).
    on_fail: Literal["warn", "evidence"] | None = None


class PipelineConfig(_Section):
    best_guess: bool = False
    default_mode: str = "standard"
    fallback_mode: str = "deep-clarification"
    max_supplements: int = Field(default=2, ge=0, le=5)
    # Verifications per answer in gears 2-4, a FAIL re-revised between two. Unset: by the prompt profile
    # of the backend that writes the re-revision (2 under "full"; 1 under "compact": the bundled model's
    # re-revisions passed the grounding check 0 of 40 times, see profiles.CompactFit).
    verification_cycles: int | None = Field(default=None, ge=1, le=5)
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
    # How long a turn waits for one plugin's ora_turn_started / ora_turn_finished observer (each runs on
    # a thread of its own): past it the turn goes on, the observer named (observer-<plugin>-timed-out).
    observer_timeout_s: float = Field(default=60.0, gt=0)
    # Phase A (prompt cleanup): "auto" skips it when the phase_a backend runs the compact prompt
    # profile (a small local model: its cleanup loses the request's meaning, see
    # benchmarks/phase_a_structured.py), named phase-a-skipped-profile; "run" always runs it;
    # "skip" never (phase-a-skipped-config). A skipped Phase A passes the raw prompt on.
    phase_a: Literal["auto", "run", "skip"] = "auto"

    @model_validator(mode="after")
    def _bands_ordered(self) -> PipelineConfig:
        if self.confidence_retry > self.confidence_proceed:
            raise ValueError(f"confidence_retry ({self.confidence_retry}) must not exceed "
                             f"confidence_proceed ({self.confidence_proceed})")
        return self


#: Seed 002's source types and their classes: institutional evidence goes to the advocate, general
#: evidence to the challenger.
SEED_SOURCE_CLASSES: dict[str, Literal["institutional", "general"]] = {
    "peer_reviewed_study": "institutional", "fact_check_report": "institutional",
    "government_report": "institutional", "legal_document": "institutional",
    "organization_report": "institutional",
    "news_primary": "general", "news_secondary": "general", "expert_statement": "general", "other": "general",
}


#: The two directions a contrarian query looks in.
Direction = Literal["supports", "contradicts"]
DEFAULT_CONTRARIAN_QUERIES: dict[Direction, list[str]] = {
    "contradicts": ["evidence against the claim that {claim}", "{claim}: disputed, refuted, false"],
    "supports": ["evidence for the claim that {claim}", "{claim}: confirmed, supported, true"],
}


def _default_contrarian_queries() -> dict[Direction, list[str]]:
    return {direction: list(queries) for direction, queries in DEFAULT_CONTRARIAN_QUERIES.items()}


class FactCheckConfig(_Section):
    """The fact-check mode (gear 5): seed 002's knowledge-diversity controls (D5) with the seed's
    values as defaults, and how the debate reads its evidence.

    - Evidence sufficiency gate: fewer than ``min_items`` filtered items or fewer than
      ``min_source_types`` distinct source types -> ``INSUFFICIENT_EVIDENCE`` (no debate call).
    - Source-type partitioning (``partition``; ``false`` switches it off: every role sees the full
      pool): institutional items to the advocate, general ones to the challenger, all to the
      reconciler and validation; the full pool to every role when either side has fewer than
      ``partition_min_side`` items.
    - ``evidence_pool_imbalance``: at least ``imbalance_min_directional`` directional items and
      max(b, 1 - b) > ``imbalance_threshold`` (1.0 never fires).
    - Contrarian retrieval after that warning: at most ``contrarian_max_queries`` inverted queries
      (``contrarian_queries`` templates, no model call), skipped when the extra time would pass
      ``runtime_ceiling`` x the baseline: ``baseline_runtime_s`` when set (a calibration run's
      per-turn share of its canonical baseline), else the turn's projected runtime.
    """

    min_items: int = Field(default=3, ge=0)
    min_source_types: int = Field(default=2, ge=0)
    partition: bool = True
    partition_min_side: int = Field(default=2, ge=0)
    imbalance_threshold: float = Field(default=0.8, ge=0.5, le=1.0)
    imbalance_min_directional: int = Field(default=3, ge=1)
    contrarian: bool = True
    contrarian_max_queries: int = Field(default=2, ge=0, le=10)
    contrarian_queries: dict[Direction, list[str]] = Field(default_factory=_default_contrarian_queries)
    runtime_ceiling: float = Field(default=0.15, ge=0.0)
    baseline_runtime_s: float | None = Field(default=None, gt=0)
    # Evidence: which streams count, the filter, the source-type classes, the directions.
    evidence_streams: list[str] = Field(default_factory=lambda: ["concept", "web"])
    min_item_chars: int = Field(default=40, ge=0)
    source_classes: dict[str, Literal["institutional", "general"]] = Field(
        default_factory=lambda: dict(SEED_SOURCE_CLASSES))
    unmapped_source_class: Literal["institutional", "general"] = "general"  # the seed's ``other``
    direction: Literal["model", "provenance"] = "model"
    # The debate.
    max_claims: int = Field(default=5, ge=1, le=50)
    claims_from: Literal["prompt", "cleaned"] = "prompt"
    self_consistency_runs: int = Field(default=2, ge=0, le=5)
    spread_factors: list[tuple[float, float]] = Field(
        default_factory=lambda: [(5.0, 1.0), (12.0, 0.9), (20.0, 0.7)])  # (spread <= pp, factor)
    spread_factor_beyond: float = Field(default=0.4, ge=0.0, le=1.0)
    spread_unknown_factor: float = Field(default=0.4, ge=0.0, le=1.0)
    unverified_below_confidence: float = Field(default=40.0, ge=0.0, le=100.0)
    validation: Literal["model+verifier", "verifier", "model"] = "model+verifier"

    @model_validator(mode="after")
    def _spread_steps_ascending(self) -> FactCheckConfig:
        limits = [limit for limit, _ in self.spread_factors]
        if limits != sorted(limits) or len(set(limits)) != len(limits):
            raise ValueError(f"spread_factors must ascend by spread: {self.spread_factors}")
        for limit, factor in self.spread_factors:
            if limit < 0 or not 0.0 <= factor <= 1.0:
                raise ValueError(f"spread_factors entry ({limit}, {factor}): spread >= 0, factor in 0..1")
        for direction, templates in self.contrarian_queries.items():
            for template in templates:
                if "{claim}" not in template:
                    raise ValueError(f"contrarian_queries.{direction}: {template!r} lacks '{{claim}}'")
        return self


class EmbeddingConfig(_Section):
    """Which registered embedder (``ora_register_embedders``) components use for vectors."""

    embedder: str = "minilm"


class PluginOptions(BaseModel):
    """Base of a plugin's ``[plugins.<name>]`` table: a plugin declares its options as a subclass,
    so an unknown key or a wrong type is an error naming the table and the key.

    Declare it with ``ora_register_options`` (``register(MyOptions, table="name")``); read it with
    ``ctx.options("name")`` or ``MyOptions.of(ctx, "name")`` (``ctx``: a turn, a standalone context, an
    ``OraConfig`` or a ``ResolvedConfig``; works without a plugin host too). Either gives the
    validated instance, the same one while the table does not change: treat it as read-only."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def of(cls, ctx: ConfigSource, table: str) -> Self:
        """``[plugins.<table>]`` of ``ctx``'s configuration, validated as this model (defaults when
        the table is absent); a ``ConfigError`` naming the table and each bad key otherwise."""
        return plugin_options(ctx, table, cls)

    @classmethod
    def from_table(cls, raw: Any, table: str) -> Self:
        """``raw`` (a table's mapping) validated as this model; ``table`` (e.g.
        ``"backends.local.options"``) is what a ``ConfigError`` names."""
        return validated_table(raw, table, cls)


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
    fact_check: FactCheckConfig = Field(default_factory=FactCheckConfig)
    plugins: dict[str, dict[str, Any]] = Field(default_factory=dict)  # per-plugin free tables


class ResolvedConfig(BaseModel):
    """The configuration in force, where it came from, and its hash."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: OraConfig
    sources: list[str]
    hash: str

    def secrets(self) -> list[str]:
        """Every secret value the configuration holds or references (API keys, credential headers,
        URL passwords and credential query parameters, credential keys of plugin tables), each once:
        ``ora_core.kernel.redaction.config_secrets``. The turn's ``Redactor`` replaces them."""
        from ora_core.kernel.redaction import MIN_SECRET_CHARS, config_secrets

        return list(dict.fromkeys(s.value for s in config_secrets(self.config) if len(s.value) >= MIN_SECRET_CHARS))


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
                model = ("dict", get_args(annotation)[1])
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


def merge_layer(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged onto ``base`` as ``load_config`` merges each layer of the configuration: key by
    key, except that a backend table changing ``type`` replaces the base's (``ora_core.testing``)."""
    return deep_merge(_drop_retyped_backends(base, over), over)


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
    if config.verification.same_lineage == "refuse":
        for role in JUDGED_ROLES:
            name = getattr(config.roles, role)
            if not config.backends[name].family.strip():
                raise ConfigError(
                    f"role {role!r} uses backend {name!r}, which declares no family; with [verification] "
                    f"same_lineage = \"refuse\" the lineage of every judged or judging role must be known: declare "
                    f"[backends.{name}] family = \"...\" (the model's maker or lineage, e.g. \"llama\", \"qwen\")",
                    source=source, field=f"backends.{name}.family")


#: The roles on a verification edge (the judged and the judging): a backend of theirs with no declared
#: family has an unknown lineage, which ``same_lineage = "refuse"`` cannot accept.
JUDGED_ROLES = ("analyst", "depth", "breadth", "evaluator", "reviser", "verifier", "consolidator", "final_verifier",
                "advocate", "challenger", "reconciler")


# --- options of plugins and backends ---------------------------------------------------------------

M = TypeVar("M", bound=BaseModel)


class OptionsProblem(BaseModel):
    """One thing wrong (``error``) or unchecked (``warning``) in a plugin's ``[plugins.<name>]``
    table or a backend's ``options``: ``table`` is its dotted path, ``key`` the key inside it."""

    severity: Literal["error", "warning"]
    table: str
    key: str = ""
    message: str

    @property
    def field(self) -> str:
        return f"{self.table}.{self.key}" if self.key else self.table

    def line(self) -> str:
        return f"[{self.table}] {self.key}: {self.message}" if self.key else f"[{self.table}] {self.message}"


def forbids_extra_keys(model: Any) -> bool:
    """``model`` is a pydantic model class that refuses unknown keys (what an options model must be)."""
    return isinstance(model, type) and issubclass(model, BaseModel) and model.model_config.get("extra") == "forbid"


def _model_in(annotation: Any) -> Any:
    """The first pydantic model class inside ``annotation`` (``X | None``, ``list[X]``, ``dict[str, X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _keys_at(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """The keys valid where the last part of ``loc`` sits inside ``model``, for did-you-mean."""
    current, parts, i = model, list(loc[:-1]), 0
    while i < len(parts):
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        field = current.model_fields.get(str(parts[i]))
        if field is None:
            return []
        inner = [a for a in get_args(field.annotation) if a is not type(None)] or [field.annotation]
        container = any(get_origin(a) in (list, dict, tuple, set, frozenset) for a in inner)
        current = _model_in(field.annotation)
        i += 2 if container else 1
    if not (isinstance(current, type) and issubclass(current, BaseModel)):
        return []
    keys = list(current.model_fields)
    keys += [f.alias for f in current.model_fields.values() if f.alias and f.alias not in keys]
    return keys


def table_problems(raw: Any, table: str, model: type[BaseModel]) -> list[OptionsProblem]:
    """Every error of ``raw`` as ``model``: unknown keys (with a did-you-mean or the known keys), wrong
    types and values (with the value), each naming ``table`` and the key."""
    if not isinstance(raw, Mapping):
        return [OptionsProblem(severity="error", table=table, message=f"must be a table, got {raw!r}")]
    try:
        model.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            key = ".".join(str(p) for p in loc)
            if err["type"] == "extra_forbidden":
                known = _keys_at(model, loc)
                close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else (
                    f"; known keys: {', '.join(known)}" if known else "; this table takes no keys")
                message = f"unknown key{hint}"
            else:
                got = err.get("input")
                shown = f" (got {got!r})" if loc and not isinstance(got, (dict, list)) else ""
                message = f"{err['msg']}{shown}"
            problems.append(OptionsProblem(severity="error", table=table, key=key, message=message))
        return problems
    return []


def _options_error(problems: list[OptionsProblem], source: str) -> ConfigError:
    lines = [p.line() for p in problems]
    message = lines[0] if len(lines) == 1 else f"{len(lines)} problems in plugin and backend options:\n  " + (
        "\n  ".join(lines))
    error = ConfigError(message, source=source)
    error.field = problems[0].field
    return error


def validated_table(raw: Any, table: str, model: type[M], source: str = "") -> M:
    """``raw`` validated as ``model``; a ``ConfigError`` naming ``table`` and every bad key otherwise."""
    problems = table_problems(raw, table, model)
    if problems:
        raise _options_error(problems, source)
    return model.model_validate(raw)


_OPTIONS_CACHE: dict[tuple[str, type], tuple[Any, BaseModel]] = {}
_OPTIONS_LOCK = threading.Lock()


class OptionsHost(Protocol):
    """What ``options_for`` asks of the plugin host: the options models plugins declared."""

    def options_model(self, table: str) -> Any: ...

    def options_models(self) -> dict[str, Any]: ...


class Configured(Protocol):
    """Anything with a configuration: a turn, a ``StandaloneContext``, a ``ResolvedConfig``."""

    @property
    def config(self) -> OraConfig: ...


#: What ``PluginOptions.of`` and ``plugin_options`` read a configuration from.
ConfigSource = OraConfig | Configured


def _oraconfig(source: ConfigSource) -> Any:
    """The ``OraConfig`` behind ``source``: a ctx (``.config``), a ``ResolvedConfig``, an ``OraConfig``."""
    for _ in range(3):
        if isinstance(source, OraConfig):
            return source
        inner = getattr(source, "config", None)
        if inner is None:
            return source
        source = inner
    return source


def plugin_options(source: ConfigSource, table: str, model: type[M]) -> M:
    """``[plugins.<table>]`` of ``source``'s configuration validated as ``model`` (its defaults when
    the table is absent). Cached per table and model while the table's content stays the same, so
    a component may ask on every call."""
    plugins = getattr(_oraconfig(source), "plugins", None)
    raw = plugins.get(table) if isinstance(plugins, Mapping) else None
    raw = {} if raw is None else raw
    cached = _OPTIONS_CACHE.get((table, model))
    if cached is not None and cached[0] == raw:
        return cached[1]  # type: ignore[return-value]  # the cache is keyed by the model: an instance of it
    instance = validated_table(raw, f"plugins.{table}", model)
    with _OPTIONS_LOCK:
        _OPTIONS_CACHE[(table, model)] = (copy.deepcopy(raw), instance)
    return instance


def options_for(host: OptionsHost | None, config: ConfigSource, table: str) -> BaseModel:
    """``ctx.options(table)``: ``[plugins.<table>]`` validated as the model a plugin declared for it
    (``ora_register_options``); a ``PluginError`` when no loaded plugin declares that table."""
    model = host.options_model(table) if host is not None else None
    if model is None:
        declared = sorted(host.options_models()) if host is not None else []
        close = difflib.get_close_matches(table, declared, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f" (declared: {', '.join(declared) or 'none'})"
        raise PluginError(f"no loaded plugin declares the options of [plugins.{table}] "
                          f"(ora_register_options){hint}")
    return plugin_options(config, table, model)


def options_source(resolved: Any, fields: Sequence[str] = ()) -> str:
    """Which layer of the configuration in force set each of ``fields`` (dotted paths): the file,
    the environment variable or the application overrides (the last layer that sets it wins), each
    named once; where that cannot be told, every layer, as ``load_config`` names them."""
    sources = list(getattr(resolved, "sources", None) or [])
    found = [origin for origin in (_origin_of(sources, f) for f in fields) if origin]
    if found and len(found) == len(fields):
        return " + ".join(dict.fromkeys(found))
    return " + ".join(sources[1:]) or (sources[0] if sources else "configuration")


def _origin_of(sources: list[str], field: str) -> str | None:
    parts = field.split(".")
    for source in reversed(sources):
        if source.startswith("environment ("):
            for var in source[len("environment ("):-1].split(", "):
                var_parts = [p.lower() for p in var.removeprefix(ENV_PREFIX).split("__") if p]
                if var_parts and var_parts[:len(parts)] == parts[:len(var_parts)]:
                    return var
        elif source.startswith("application overrides ("):
            if parts[0] in source[len("application overrides ("):-1].split(", "):
                return "application overrides"
        else:
            path = DEFAULT_CONFIG_PATH if source.startswith("bundled default") else Path(source)
            try:
                node: Any = _load_toml(path)
            except ConfigError:  # the file changed since it was loaded: the layer cannot be told
                return None
            for part in parts:
                if not isinstance(node, dict):
                    break
                if part not in node:
                    node = None
                    break
                node = node[part]
            if node is not None:
                return str(path)
    return None


def options_problems(resolved: Any, host: Any) -> list[OptionsProblem]:
    """Every problem of the configuration's ``[plugins.<name>]`` tables and backends' ``options``
    against what the loaded plugins declare (``ora_register_options``, ``factory.options_model``).

    Errors: an unknown key or a bad value in a declared table; a table that names no installed plugin
    (with a did-you-mean), when the host loaded its plugins from the entry points (else only when a
    declared or registered name is close: a host of in-process plugins does not know what is
    installed). Warnings (the table is passed on unchecked, and said so): a table of a plugin that
    declares no model, is disabled or failed to load; the options of a backend type that declares no
    model."""
    config = _oraconfig(resolved)
    problems: list[OptionsProblem] = []
    declared = host.options_models()
    records = host.records
    for table in sorted(getattr(config, "plugins", {}) or {}):
        raw = config.plugins[table]
        where = f"plugins.{table}"
        if table in declared:
            problems += table_problems(raw, where, declared[table])
            continue
        record = records.get(table)
        if record is not None:
            if record.status == "disabled":
                why = f"plugin {table!r} is {'; '.join(record.errors) or 'disabled'}"
            elif record.status == "failed":
                why = f"plugin {table!r} failed to load ({'; '.join(record.errors)})"
            else:
                why = f"plugin {table!r} declares no options model (ora_register_options)"
            problems.append(OptionsProblem(severity="warning", table=where,
                                           message=f"is not checked: {why}; its keys are passed on as written"))
            continue
        names = sorted(set(declared) | {r.name for r in records.values()})
        close = difflib.get_close_matches(table, names, n=1, cutoff=0.6)
        if close or getattr(host, "scanned", False):
            hint = f"; did you mean {close[0]!r}?" if close else (
                f" (installed: {', '.join(names)})" if names else " (no plugin is installed)")
            problems.append(OptionsProblem(severity="error", table=where, message=f"names no installed plugin{hint}"))
        else:
            problems.append(OptionsProblem(
                severity="warning", table=where,
                message="is not checked: no plugin of this host (registered in process) has that name"))
    for name in sorted(getattr(config, "backends", {}) or {}):
        backend = config.backends[name]
        where = f"backends.{name}.options"
        try:
            model = host.backend_options_model(backend.type)
        except PluginError as exc:
            problems.append(OptionsProblem(severity="error", table=where, message=str(exc)))
            continue
        if model is None:
            if backend.options and backend.type in host.components("backend"):
                problems.append(OptionsProblem(
                    severity="warning", table=where,
                    message=f"is not checked: backend type {backend.type!r} declares no options_model; "
                            "its keys are passed on as written"))
            continue  # a type no plugin registers is named when the backend is built
        problems += table_problems(backend.options, where, model)
    return problems


def check_options(resolved: Any, host: Any) -> list[OptionsProblem]:
    """``options_problems``: raise every error at once as one ``ConfigError`` naming the configuration
    source, each table and key; return the warnings (for ``ora config show``, ``ora plugins list``)."""
    problems = options_problems(resolved, host)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise _options_error(errors, options_source(resolved, [p.field for p in errors]))
    return [p for p in problems if p.severity == "warning"]


ConfigFormat = Literal["toml", "json"]


def render_config(resolved: ResolvedConfig, fmt: ConfigFormat = "toml") -> str:
    """The resolved configuration as text, secrets masked: API keys, credential headers and keys,
    URL passwords and credential query parameters (``redaction.mask_secrets``), and any configured
    secret left in another value (``Redactor``)."""
    from ora_core.kernel.redaction import Redactor, mask_secrets

    data = mask_secrets(resolved.config.model_dump(mode="json", exclude_none=True))
    data = Redactor.for_config(resolved).data(data)
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
