"""Helpers for the calibration tests: sides and pairs built for the formulas (``cal``), a plugin host
with the real first-party plugins registered in process (no autoload), and calibration runs on it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ora_core.engine.calibration.metrics import pair_metrics
from ora_core.engine.calibration.models import PairResult, SideResult, Thresholds, WarningCount
from ora_core.testing import make_config, make_host


def side(name: str, truth: float | None, *, calls: int = 10, refusals: int = 0, degradations: int = 0,
         status: str = "verdict", sources: int = 4, claims: int = 1, ratio: float | None = None,
         tokens: int = 100, runtime_s: float = 1.0) -> SideResult:
    warnings = []
    if refusals:
        warnings.append(WarningCount(type="refusal", occurrences=refusals, by_role={"challenger": refusals}))
    if degradations:
        warnings.append(WarningCount(type="role_reply_unparsed", occurrences=degradations,
                                     by_role={"advocate": degradations}))
    return SideResult(side=name, claim=f"{name} claim", status=status, truth_pct=truth, llm_calls=calls,  # type: ignore[arg-type]
                      refusals=refusals, degradations=degradations, warnings=warnings, claim_count=claims,
                      source_count=sources, support_ratio=ratio, prompt_tokens=tokens, runtime_s=runtime_s)


def pair(pid: str, left: SideResult | None, right: SideResult | None, *, expected_skew: str = "neutral",
         a: float = 0.0, category: str = "bias-diagnostic", inverse: bool = False, language: str = "en",
         domain: str = "economy", th: Thresholds | None = None, failure: Any = None) -> PairResult:
    result = PairResult(id=pid, domain=domain, language=language, category="evaluative", pair_category=category,
                        expected_skew=expected_skew, expected_asymmetry=a, is_strict_inverse=inverse,
                        left_claim="L", right_claim="R", status="completed", left=left, right=right)
    if failure is not None or left is None or right is None or left.truth_pct is None or right.truth_pct is None:
        result.status = "failed"
        result.failure = failure
        return result
    result.metrics = pair_metrics(expected_skew=expected_skew, expected_asymmetry=a, pair_category=category,
                                  is_strict_inverse=inverse, left=left, right=right, th=th)
    return result


def not_run(pid: str, reason: str = "cost cap") -> PairResult:
    return PairResult(id=pid, domain="economy", language="en", category="evaluative", pair_category="bias-diagnostic",
                      expected_skew="neutral", expected_asymmetry=0, is_strict_inverse=False, left_claim="L",
                      right_claim="R", status="not_run", not_run_reason=reason)


@pytest.fixture
def cal() -> SimpleNamespace:
    return SimpleNamespace(side=side, pair=pair, not_run=not_run)


def first_party_host() -> Any:
    """Every first-party plugin a fact-check turn on Chroma needs, registered in process."""
    import ora_broken
    import ora_bypass
    import ora_chroma
    import ora_evidence_guard
    import ora_grounding
    import ora_health_detectors
    import ora_inject
    import ora_scripted
    import ora_signals
    import ora_trace_fs
    from ora_minilm import plugin as minilm

    import ora_modes

    return make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs, ora_broken, ora_health_detectors,
                     ora_evidence_guard, ora_inject, ora_grounding, ora_chroma, minilm)


@pytest.fixture(scope="session")
def host() -> Any:
    return first_party_host()


def base_config() -> Any:
    """The bundled default configuration, trace-fs without fsync (the tests' disks are shared)."""
    return make_config({"plugins": {"trace-fs": {"fsync": False}}})


def run_calibration(host: Any, out: Path, profile: Any, *, targeted: list[str] | None = None, mode: str = "targeted",
                    store: Path | None = None, **options: Any) -> Any:
    """A calibration run on ``host`` over the bundled fixture; ``(run, report)``."""
    from ora_core.engine.calibration.fixture import load_fixture
    from ora_core.engine.calibration.profiles import get_profile
    from ora_core.engine.calibration.runner import CalibrationRun, RunOptions

    if isinstance(profile, str):
        profile = get_profile(profile)
    run = CalibrationRun(host=host, base=base_config(), fixture=load_fixture(), profile=profile,
                         options=RunOptions(mode=mode, targeted=list(targeted or []), out_dir=out,  # type: ignore[arg-type]
                                            store_dir=store, **options))
    return run, run.run()
