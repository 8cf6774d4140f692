"""A calibration run: every selected pair, both sides through the full fact-check, measured.

The run (``CalibrationRun``):

1. Its configuration: the configuration in force, the profile's overrides (roles, backends,
   fact-check settings), then calibration's own: retrieval from the run's own embedded Chroma store
   (``<run dir>/chroma``, or ``store_dir``), one collection per pair (``cal-<pair id>``, so a pair's
   claims are checked against that pair's notes and nothing else), every note of it retrieved
   (``retrieval.k`` = its chunk count, ``[plugins.chroma] min_score = -1``), only the concept stream
   (conversation memory and the link graph stay out of a calibration turn), traces under the run
   directory, and ``fact_check.baseline_runtime_s`` when given; when the run reads evidence directions
   from provenance (``fact_check.direction = "provenance"``), each note's ``stance`` relative to the
   side's claim (``[plugins.chroma] direction_from``/``directions``, set per side). ``run_hash`` is the hash of that
   configuration with the collection, the store and the trace root left as templates (``cal-{pair}``,
   ``{store}``, ``{run dir}/traces``): two runs of one setup have one hash wherever they write.
2. Ingestion of the selected pairs' notes (``ingest``), then the pairs, concurrently up to
   ``concurrency``, each side a fact-check turn (``mode="fact-check"``, the claim verbatim, its own
   conversation id), left then right. All turns share one backend pool (``Runtime(pool=...)``), so the
   tokens-per-minute guard sees the whole run.
3. Before a pair starts: the token cap (``max_tokens``: the tokens used so far, plus one pair's worth
   for this one and each pair still running, may not pass it) and the cost cap (``max_cost_usd``, with
   the profile's prices; a call whose model has no price makes the cost unknown, which stops the run
   too, named). A capped run stops starting pairs: ``stopped: cost cap``, the rest counted not run.
4. After each pair, the checkpoint ``<out>/<intent>-<mode>-latest.partial.json`` (the report so far,
   written atomically); ``resume=True`` continues from it (same fixture, profile, selection and run
   configuration, else refused), re-running only what is not done. The final report is
   ``<out>/<run id>.json`` (``report.write_reports``); the checkpoint is removed unless the run stopped
   at a cap (then ``--resume`` continues it).
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ora_core import __version__
from ora_core.engine.app import redact_result
from ora_core.engine.calibration.fixture import (
    CalibrationPair,
    Fixture,
    Intent,
    Mode,
    check_version,
    fixture_summary,
    select_pairs,
)
from ora_core.engine.calibration.gates import run_gates, significance
from ora_core.engine.calibration.ingest import ingest_fixture
from ora_core.engine.calibration.metrics import aggregate, asymmetry_rows, pair_metrics, role_usage
from ora_core.engine.calibration.models import (
    Asymmetry,
    CalibrationReport,
    ConfigInfo,
    PairResult,
    Side,
    SideResult,
    Stopped,
    Thresholds,
    Totals,
)
from ora_core.engine.calibration.profiles import Profile
from ora_core.engine.calibration.report import write_atomic
from ora_core.engine.calibration.sides import build_side, exception_side
from ora_core.engine.runner import run_turn_async
from ora_core.engine.runtime import Runtime
from ora_core.kernel.config import (
    ROLE_NAMES,
    OraConfig,
    ResolvedConfig,
    check_options,
    check_roles,
    config_hash,
    deep_merge,
    render_config,
    user_data_dir,
)
from ora_core.kernel.errors import UsageError
from ora_core.kernel.models import FACT_CHECK_DEGRADATION_TYPES

FACT_CHECK_MODE = "fact-check"
#: The roles a fact-check turn calls (Phase A, then the debate's slots).
FACT_CHECK_ROLES = ("phase_a", "evidence", "advocate", "self_consistency", "challenger", "reconciler", "validation")
COLLECTION_TEMPLATE = "cal-{pair}"
MAX_K = 100
#: The fixture notes' front-matter field naming the claim a note speaks for (left | right | neutral).
STANCE_FIELD = "stance"


def side_directions(side: str) -> dict[str, str]:
    """A note's ``stance`` as an evidence direction for ``side``'s claim: its own side's notes support
    it, the other side's contradict it (the claims are mirrored), neutral ones are neutral."""
    other = "right" if side == "left" else "left"
    return {side: "supports", other: "contradicts", "neutral": "neutral"}

Event = Callable[..., None]


def default_out_dir() -> Path:
    return user_data_dir() / "calibration"


def utc_stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H-%M-%SZ")


def derive_config(base: ResolvedConfig, overrides: dict[str, Any], label: str) -> ResolvedConfig:
    """``base`` with ``overrides`` merged in (a backend table that changes ``type`` replaces the base's
    instead of merging into it), validated, roles checked, hashed."""
    data = base.config.model_dump()
    over_backends = overrides.get("backends") or {}
    if over_backends:
        data["backends"] = {name: table for name, table in data["backends"].items()
                            if not (name in over_backends and "type" in over_backends[name]
                                    and over_backends[name]["type"] != table.get("type"))}
    config = OraConfig.model_validate(deep_merge(data, overrides))
    check_roles(config, label)
    return ResolvedConfig(config=config, sources=[*base.sources, label], hash=config_hash(config))


def role_map(config: OraConfig) -> dict[str, dict[str, str]]:
    out = {}
    for role in ROLE_NAMES:
        backend = getattr(config.roles, role)
        settings = config.backends[backend]
        out[role] = {"backend": backend, "provider": settings.type, "model": settings.model}
    return out


@dataclass
class RunOptions:
    mode: Mode = "quick"
    intent: Intent = "smoke"
    targeted: list[str] = field(default_factory=list)
    out_dir: Path | None = None
    concurrency: int = 1
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    baseline_runtime_s: float | None = None
    resume: bool = False
    store_dir: Path | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)


class CalibrationRun:
    """One run over a fixture under a profile; ``execute()`` (async) or ``run()`` returns the report."""

    def __init__(self, *, host: Any, base: ResolvedConfig, fixture: Fixture, profile: Profile,
                 options: RunOptions, on_event: Event | None = None) -> None:
        if options.concurrency < 1:
            raise UsageError(f"--concurrency must be at least 1, not {options.concurrency}")
        self.host, self.base, self.fixture, self.profile, self.options = host, base, fixture, profile, options
        self.on_event = on_event or (lambda *_a, **_k: None)
        self.pairs = select_pairs(fixture, options.mode, options.targeted)
        self.out_dir = (options.out_dir or default_out_dir()).expanduser().resolve()
        self.checkpoint = self.out_dir / f"{options.intent}-{options.mode}-latest.partial.json"
        self.created_at = datetime.now(timezone.utc)
        self.run_id = f"{options.intent}-{options.mode}-{utc_stamp(self.created_at)}"
        resumed = self._load_checkpoint() if options.resume else None
        if resumed is not None:
            self.run_id, self.created_at = resumed.run_id, resumed.created_at
        self.workdir = self.out_dir / self.run_id
        self.store = (options.store_dir.expanduser().resolve() if options.store_dir is not None
                      else self.workdir / "chroma")
        self.profile_overrides = profile.overrides(self.pairs)
        self.calibration_overrides = self._calibration_overrides()
        self.run_config = derive_config(base, deep_merge(self.profile_overrides, self.calibration_overrides),
                                        f"calibration (profile {profile.name})")
        # what the run's configuration is, wherever it writes: its hash identifies "the same run setup"
        self.template_config = derive_config(base, deep_merge(self.profile_overrides,
                                                              self._calibration_overrides(template=True)),
                                             f"calibration (profile {profile.name})")
        self.options_warnings = check_options(self.run_config, host)
        self.report = self._new_report()
        if resumed is not None:
            self._adopt(resumed)
        self.chunks: dict[str, int] = {}
        self._lock = asyncio.Lock()

    # --- configuration ---------------------------------------------------------------------------------

    def _calibration_overrides(self, *, template: bool = False) -> dict[str, Any]:
        """Calibration's own settings; ``template``: the run's locations as placeholders (``{store}``,
        ``{run dir}``), for the hash and the report's ``runConfig``."""
        k = min(MAX_K, max((len(p.notes) for p in self.pairs), default=1))
        store, traces = ("{store}", "{run dir}/traces") if template else (str(self.store), str(self.workdir / "traces"))
        over: dict[str, Any] = {
            "retrieval": {"path": store, "server_url": None, "k": k,
                          "streams": {"concept": True, "conversation": False, "relationship": False, "web": False}},
            "plugins": {"chroma": {"collection": COLLECTION_TEMPLATE, "min_score": -1.0}},
            "trace": {"enabled": True, "root": traces},
        }
        if self.options.baseline_runtime_s is not None:
            over["fact_check"] = {"baseline_runtime_s": self.options.baseline_runtime_s}
        if self.directions_from_stance:
            over["plugins"]["chroma"].update(direction_from=STANCE_FIELD, directions={"neutral": "neutral"})
        return over

    @property
    def directions_from_stance(self) -> bool:
        """Whether the run reads evidence directions from provenance (``fact_check.direction =
        "provenance"``, the instrument's): then each side's notes are labelled from their ``stance``,
        relative to the side's claim (``side_directions``); a model-labelling run labels them itself."""
        fact_check = deep_merge(self.base.config.fact_check.model_dump(), self.profile_overrides.get("fact_check", {}))
        return fact_check.get("direction") == "provenance"

    def pair_config(self, pair: CalibrationPair, side: str | None = None) -> ResolvedConfig:
        """The configuration of a pair's turns: its collection, every chunk of it; with ``side``, the
        evidence directions of its notes' stances relative to that side's claim (when the run reads them)."""
        k = min(MAX_K, max(self.chunks.get(pair.collection, len(pair.notes)), 1))
        chroma: dict[str, Any] = {"collection": pair.collection}
        if side is not None and self.directions_from_stance:
            chroma["directions"] = side_directions(side)
        over = {"plugins": {"chroma": chroma}, "retrieval": {"k": k}}
        return derive_config(self.run_config, over, f"calibration pair {pair.id}" + (f" ({side})" if side else ""))

    # --- the report ------------------------------------------------------------------------------------

    def _config_info(self) -> ConfigInfo:
        roles = role_map(self.run_config.config)
        providers = {roles[r]["provider"] for r in FACT_CHECK_ROLES}
        mode = "single" if len(providers) == 1 else "mixed"
        masked = json.loads(render_config(self.template_config, "json"))["config"]
        return ConfigInfo(base_hash=self.base.hash, run_hash=self.template_config.hash,
                          sources=list(self.run_config.sources),
                          calibration_overrides=self.calibration_overrides, run_config=masked, roles=roles,
                          global_provider=next(iter(providers)) if mode == "single" else "mixed",
                          role_provider_mode=mode)

    def _new_report(self) -> CalibrationReport:
        o = self.options
        return CalibrationReport(
            run_id=self.run_id, mode=o.mode, intent=o.intent, targeted=list(o.targeted), created_at=self.created_at,
            ora_version=__version__, fixture=fixture_summary(self.fixture),
            fixture_version_check=check_version(self.fixture),
            profile=self.profile.info(), config=self._config_info(), thresholds=o.thresholds,
            concurrency=o.concurrency, max_tokens=o.max_tokens, max_cost_usd=o.max_cost_usd,
            baseline_runtime_s=o.baseline_runtime_s, workdir=str(self.workdir),
            selected_pairs=[p.id for p in self.pairs])

    def _load_checkpoint(self) -> CalibrationReport:
        if not self.checkpoint.is_file():
            raise UsageError(f"--resume: no checkpoint {self.checkpoint.name} in {self.checkpoint.parent} (a run of "
                             f"intent {self.options.intent}, mode {self.options.mode} left none to continue)")
        try:
            return CalibrationReport.model_validate_json(self.checkpoint.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"--resume: the checkpoint {self.checkpoint} cannot be read: {exc}") from None

    def _adopt(self, old: CalibrationReport) -> None:
        """Continue ``old``: the same run, or a refusal naming what differs."""
        new = self.report
        differences = [f"{what}: checkpoint {a!r}, now {b!r}" for what, a, b in (
            ("fixture hash", old.fixture.get("hash"), new.fixture.get("hash")),
            ("profile", old.profile.name, new.profile.name),
            ("selected pairs", old.selected_pairs, new.selected_pairs),
            ("run configuration hash", old.config.run_hash, new.config.run_hash)) if a != b]
        if differences:
            raise UsageError(f"--resume: {self.checkpoint} is another run ({'; '.join(differences)}); start a new run "
                             "without --resume, or resume with the same fixture, profile, selection and configuration")
        done = [p for p in old.pairs if p.status in ("completed", "failed")]
        new.pairs = done
        new.totals = old.totals
        new.ingest = old.ingest
        new.resumed_from = [*old.resumed_from, str(self.checkpoint)]

    def done_ids(self) -> set[str]:
        return {p.id for p in self.report.pairs if p.status in ("completed", "failed")}

    def summarise(self, *, final: bool = False, stopped: Stopped | None = None) -> CalibrationReport:
        """Recompute everything derived from the pairs; a pair not done is ``not_run`` (why: pending, or
        the stop's reason)."""
        report = self.report
        done = {p.id: p for p in report.pairs if p.status in ("completed", "failed")}
        why = stopped.reason if stopped is not None else ("interrupted" if final else "pending")
        ordered = [done.get(p.id) or self._not_run(p, why) for p in self.pairs]
        report.pairs = ordered
        th = report.thresholds
        report.failures = [p.failure for p in ordered if p.status == "failed" and p.failure is not None]
        report.aggregates = aggregate(ordered)
        report.gates = run_gates(report.aggregates, th)
        report.runtime_role_usage = role_usage(ordered, report.config.roles)
        report.asymmetry = Asymmetry(**asymmetry_rows(ordered, FACT_CHECK_DEGRADATION_TYPES))
        sides = [s for p in ordered for s in (p.left, p.right) if s is not None]
        costs = [s.cost_usd for s in sides]
        report.totals = Totals(
            llm_calls=sum(s.llm_calls for s in sides), prompt_tokens=sum(s.prompt_tokens for s in sides),
            completion_tokens=sum(s.completion_tokens for s in sides), tokens=sum(s.tokens for s in sides),
            cost_usd=round(sum(c for c in costs if c is not None), 6) if sides and all(c is not None for c in costs)
            else None, pipeline_runtime_s=round(sum(s.runtime_s for s in sides), 3),
            wall_s=report.totals.wall_s, ingest_s=report.ingest.seconds if report.ingest else 0.0)
        report.stopped = stopped
        report.significance = significance(ordered, report.aggregates, report.gates, report.runtime_role_usage,
                                           stopped, report.intent)
        if final:
            report.status = "stopped" if stopped is not None else "complete"
            report.finished_at = datetime.now(timezone.utc)
        return report

    @staticmethod
    def _not_run(pair: CalibrationPair, reason: str) -> PairResult:
        return PairResult(id=pair.id, domain=pair.domain, language=pair.language, category=pair.category,
                          pair_category=pair.pair_category, expected_skew=pair.expected_skew,
                          expected_asymmetry=pair.expected_asymmetry, is_strict_inverse=pair.is_strict_inverse,
                          left_claim=pair.left_claim, right_claim=pair.right_claim, status="not_run",
                          not_run_reason=reason)

    def write_checkpoint(self) -> Path:
        self.summarise()
        write_atomic(self.checkpoint, self.report.model_dump_json(by_alias=True, indent=2))
        return self.checkpoint

    # --- running ---------------------------------------------------------------------------------------

    async def run_side(self, pair: CalibrationPair, side: Side, runtime_base: Runtime) -> SideResult:
        claim = pair.claim(side)
        resolved = self.pair_config(pair, side)
        stderr = io.StringIO()
        runtime = Runtime(host=self.host, resolved=resolved, stderr=stderr, pool=runtime_base.pool)
        conversation = f"calibration-{self.run_id}-{pair.id}-{side}"
        self.on_event("side_started", pair=pair.id, side=side)
        started = time.perf_counter()
        try:
            result = await run_turn_async(runtime, claim, mode=FACT_CHECK_MODE, conversation_id=conversation,
                                          best_guess=True)
            result = redact_result(result, runtime.redactor)
        except Exception as exc:  # noqa: BLE001 - the side's failure, diagnosed in the report
            roles = role_map(resolved.config)["advocate"]
            out = exception_side(side, claim, exc, provider=roles["provider"], model=roles["model"],
                                 runtime_s=time.perf_counter() - started, config_hash=resolved.hash,
                                 messages=_lines(stderr.getvalue()))
        else:
            prices = {m: p.model_dump() for m, p in self.profile.prices.items()}
            out = build_side(side, claim, result, runtime_s=time.perf_counter() - started,
                             config_hash=resolved.hash, prices=prices,
                             messages=_lines(stderr.getvalue()))
        self.on_event("side_done", pair=pair.id, side=side, result=out)
        return out

    async def run_pair(self, pair: CalibrationPair, runtime_base: Runtime) -> PairResult:
        started_at = datetime.now(timezone.utc)
        started = time.perf_counter()
        left = await self.run_side(pair, "left", runtime_base)
        right = await self.run_side(pair, "right", runtime_base)
        result = self._not_run(pair, "")
        result.left, result.right, result.started_at = left, right, started_at
        result.duration_s = round(time.perf_counter() - started, 3)
        failed = [s for s in (left, right) if s.failure is not None or s.truth_pct is None]
        if failed:
            result.status = "failed"
            result.failure = failed[0].failure
        else:
            result.status = "completed"
            result.metrics = pair_metrics(expected_skew=pair.expected_skew, expected_asymmetry=pair.expected_asymmetry,
                                          pair_category=pair.pair_category, is_strict_inverse=pair.is_strict_inverse,
                                          left=left, right=right, th=self.report.thresholds)
        return result

    def cap_reached(self, running: int) -> Stopped | None:
        """Whether starting one more pair could pass a cap (with ``running`` pairs still under way)."""
        sides = [s for p in self.report.pairs for s in (p.left, p.right) if s is not None]
        done_pairs = sum(1 for p in self.report.pairs if p.status in ("completed", "failed"))
        o = self.options
        if o.max_tokens is not None:
            used = sum(s.tokens for s in sides)
            per_pair = used / done_pairs if done_pairs else 0.0
            projected = used + per_pair * (running + 1)
            if used >= o.max_tokens or projected > o.max_tokens:
                return Stopped(reason="cost cap", detail=f"tokens: {used} used, ~{per_pair:.0f} per pair, {running} "
                               f"pair(s) still running: one more would pass --max-tokens {o.max_tokens}")
        if o.max_cost_usd is not None and sides:
            unknown = sorted({c.effective_model or c.planned_model for s in sides for c in s.runtime_role_models
                              if (c.effective_model or c.planned_model) not in self.profile.prices})
            if unknown:
                return Stopped(reason="cost cap", detail=f"the cost is unknown: no price for model(s) "
                               f"{', '.join(unknown)} in profile {self.profile.name!r}, so --max-cost "
                               f"{o.max_cost_usd:g} cannot be kept")
            spent = sum(s.cost_usd or 0.0 for s in sides)
            per_pair_usd = spent / done_pairs if done_pairs else 0.0
            if spent >= o.max_cost_usd or spent + per_pair_usd * (running + 1) > o.max_cost_usd:
                return Stopped(reason="cost cap", detail=f"USD {spent:.4f} spent, ~{per_pair_usd:.4f} per pair: one "
                               f"more would pass --max-cost {o.max_cost_usd:g}")
        return None

    async def execute(self) -> CalibrationReport:
        wall = time.perf_counter()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.write_checkpoint()
        self.on_event("ingest_started", pairs=len(self.pairs), store=str(self.store))
        info = await asyncio.to_thread(ingest_fixture, self.fixture, self.pairs, self.run_config.config, self.store,
                                       self.workdir, lambda pid: self.on_event("ingest", pair=pid))
        self.report.ingest = info
        self.chunks = dict(info.collections)
        runtime_base = Runtime(host=self.host, resolved=self.run_config, stderr=io.StringIO())
        todo = [p for p in self.pairs if p.id not in self.done_ids()]
        self.on_event("pairs_started", total=len(self.pairs), todo=len(todo), done=len(self.pairs) - len(todo))
        stopped: Stopped | None = None
        running = 0
        slots = asyncio.Semaphore(self.options.concurrency)

        async def one(pair: CalibrationPair, number: int) -> None:
            nonlocal running
            try:
                self.on_event("pair_started", pair=pair.id, number=number)
                result = await self.run_pair(pair, runtime_base)
                async with self._lock:
                    self.report.pairs.append(result)
                    self.report.totals.wall_s = round(time.perf_counter() - wall, 3)
                    self.write_checkpoint()
                self.on_event("pair_done", pair=pair.id, result=result)
            finally:
                running -= 1
                slots.release()

        tasks: list[asyncio.Task[None]] = []
        try:
            for number, pair in enumerate(todo, len(self.pairs) - len(todo) + 1):
                await slots.acquire()
                stopped = self.cap_reached(running)
                if stopped is not None:
                    slots.release()
                    self.on_event("stopped", reason=stopped.reason, detail=stopped.detail)
                    break
                running += 1
                tasks.append(asyncio.create_task(one(pair, number)))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
        self.report.totals.wall_s = round(time.perf_counter() - wall, 3)
        report = self.summarise(final=True, stopped=stopped)
        if stopped is None:
            write_atomic(self.checkpoint, report.model_dump_json(by_alias=True, indent=2))
        return report

    def finish(self) -> None:
        """After the final report is written: the checkpoint goes, unless the run stopped at a cap."""
        if self.report.stopped is None and self.checkpoint.exists():
            self.checkpoint.unlink()

    def run(self) -> CalibrationReport:
        return asyncio.run(self.execute())


def _lines(text: str, keep: int = 40) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-keep:]
