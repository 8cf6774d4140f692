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


def first_party_host(*extra: Any) -> Any:
    """Every first-party plugin a fact-check turn on Chroma needs, registered in process (and ``extra``)."""
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
                     ora_evidence_guard, ora_inject, ora_grounding, ora_chroma, minilm, *extra)


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


# --- a cross-provider-like run, for the HTML report -----------------------------------------------------------

#: Planted in a claim of the fixture copy the HTML runs use: if a page interpreted it, ``window.__pwned``
#: would be set, the title would change, an element ``#injected`` would exist.
MARKUP = ('<script>window.__pwned = 1; document.title = "PWNED";</script>'
          '<img src="x" id="injected" onerror="window.__pwned = 2"> & <b>bold</b>')
MARKUP_PAIR = "minimum-wage-en"
FAILING_PAIR = "rent-control-en"
HTML_PAIRS = [f"pair:{MARKUP_PAIR}", f"pair:{FAILING_PAIR}", "pair:gun-laws-inverse-en", "pair:retraites-fr"]
CHALLENGER_REPLY = ("```\nPOINT: none\n```\nI checked the verdict against my items and raise no point.\n"
                    "CONFIDENCE: 0.90")


class ChatServer:
    """A real HTTP server on 127.0.0.1 speaking OpenAI's chat-completions format: every request gets
    ``CHALLENGER_REPLY`` from the model it asked for (the planted-bias challenger, on another provider)."""

    def __init__(self) -> None:
        import http.server
        import json
        import threading

        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                server.requests.append({"path": self.path, "model": body.get("model")})
                words = len(CHALLENGER_REPLY.split())
                data = json.dumps({
                    "id": "chatcmpl-cal", "object": "chat.completion", "created": 0, "model": body.get("model"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": CHALLENGER_REPLY},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 200, "completion_tokens": words, "total_tokens": 200 + words}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the http.server API
                return

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def cross_provider_profile(base_url: str) -> Any:
    """The planted-bias instrument with seed 002's cross-provider shape: the challenger on an OpenAI-type
    backend ``cross`` (gpt-4.1) whose tokens-per-minute budget sends every call to its fallback
    ``cross-mini`` (gpt-4.1-mini; seed 002 A-2b's TPM guard), so the challenger's effective model is not
    the planned one; and the left advocate of ``FAILING_PAIR`` made to raise, so that pair fails, diagnosed."""
    import re

    from ora_core.engine.calibration.fixture import load_fixture
    from ora_core.engine.calibration.profiles import Price, get_profile

    claim = load_fixture().pair(FAILING_PAIR).left_claim
    openai = {"type": "openai", "base_url": base_url, "max_retries": 0, "timeout_s": 20.0}
    return get_profile("planted-bias").model_copy(update={
        "name": "cross-provider-planted",
        "description": "The planted-bias instrument with the challenger on an OpenAI-type backend (gpt-4.1, "
                       "falling back to gpt-4.1-mini under its tokens-per-minute budget).",
        "roles": {"challenger": "cross"},
        "backends": {"cross": {**openai, "model": "gpt-4.1", "tokens_per_minute": 1, "fallbacks": ["cross-mini"]},
                     "cross-mini": {**openai, "model": "gpt-4.1-mini"}},
        "prices": {"planted-bias-20pp": Price(input_per_mtok=0.1, output_per_mtok=0.1),
                   "gpt-4.1": Price(input_per_mtok=2.0, output_per_mtok=8.0),
                   "gpt-4.1-mini": Price(input_per_mtok=0.4, output_per_mtok=1.6)},
        "instrument_rules_first": [
            {"match": r"(?s)\A(?=.*ROLE: FACT-CHECK ADVOCATE\.).*## THE CLAIM\s+" + re.escape(claim), "on": "any",
             "reply": "!error:unavailable"}]})


def markup_fixture(root: Path) -> Path:
    """A copy of the bundled fixture whose ``MARKUP_PAIR`` left claim ends in ``MARKUP`` (its version's
    recorded hash then no longer matches: the report says so)."""
    import json
    import shutil

    from ora_core.engine.calibration.fixture import BUNDLED

    target = root / "fixture"
    shutil.copytree(BUNDLED, target)
    pairs_file = target / "pairs.json"
    data = json.loads(pairs_file.read_text(encoding="utf-8"))
    for pair in data["pairs"]:
        if pair["id"] == MARKUP_PAIR:
            pair["leftClaim"] = f"{pair['leftClaim']} {MARKUP}"
    pairs_file.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return target


@pytest.fixture(scope="session")
def html_runs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Real runs for the HTML report, on a fixture copy with markup in a claim: ``cross`` (the
    cross-provider-like profile above: two providers, a fallback, a failed pair) and, made on first use,
    ``reference()`` (planted-bias-no-controls on the same pairs, run A of a comparison)."""
    import ora_openai

    from ora_core.engine.calibration.fixture import load_fixture
    from ora_core.engine.calibration.profiles import get_profile
    from ora_core.engine.calibration.report import write_reports
    from ora_core.engine.calibration.runner import CalibrationRun, RunOptions

    root = tmp_path_factory.mktemp("html-runs")
    fixture = load_fixture(markup_fixture(root))
    server = ChatServer()
    host = first_party_host(ora_openai)
    store = root / "store"
    made: dict[str, Any] = {}

    def run(name: str, profile: Any) -> Any:
        calibration = CalibrationRun(host=host, base=base_config(), fixture=fixture, profile=profile,
                                     options=RunOptions(mode="targeted", targeted=HTML_PAIRS, out_dir=root / name,
                                                        store_dir=store, concurrency=2))
        report = calibration.run()
        written = write_reports(report, calibration.out_dir)
        calibration.finish()
        return SimpleNamespace(run=calibration, report=report, written=written)

    def reference() -> Any:
        if "reference" not in made:
            made["reference"] = run("reference", get_profile("planted-bias-no-controls"))
        return made["reference"]

    try:
        cross = run("cross", cross_provider_profile(server.url))
        yield SimpleNamespace(cross=cross, reference=reference, server=server, fixture=fixture, root=root,
                              markup=MARKUP, markup_pair=MARKUP_PAIR, failing_pair=FAILING_PAIR,
                              pairs=[t.split(":", 1)[1] for t in HTML_PAIRS])
    finally:
        server.close()
