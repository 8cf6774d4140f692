"""The bundled probe pack, run: ``ora probe run`` on the scripted probe configuration
(``probes/scripted/ora.toml``, shipped with the pack) is all PASS, and a regression of a catalogued
failure of seed 000 FAILs its probe, naming the fact.

Only the models are scripted: Stage 0, Phase A's parsing, routing on the MiniLM embedder, Chroma
retrieval of a store holding the sample vault (``vault/``, ingested by ``ora vault add``), the
grounding verifier, the detectors, the fault injectors and the trace are the installed ones, loaded
from their entry points as ``ora`` loads them. The pack runs as a user runs it, in a subprocess of
the command line; the regression tests break one fix in process (monkeypatch) and run the probes that
guard it through the same command (typer's runner), so the break is in the code the command runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ora_core.cli import state as cli_state
from ora_core.cli.app import build_app

pytestmark = pytest.mark.slow  # the real MiniLM embedder and Chroma: ~15 s for the module

REPO = Path(__file__).resolve().parents[1]
VAULT = REPO / "vault"


def scripted_config() -> Path:
    """The scripted probe configuration where the pack is (a source checkout or a wheel install)."""
    import ora_probes

    return ora_probes.probes_dir() / "scripted" / "ora.toml"


def bundled_ids() -> list[str]:
    import ora_probes
    from ora_core.engine.measure.probes import discover
    from ora_core.testing import make_host

    sources = discover(make_host(ora_probes))
    assert [s.error for s in sources if s.error] == []
    return [s.id for s in sources]


def user_env(tmp: Path, store: Path) -> dict[str, str]:
    """What a user's shell gives ``ora`` here: no ORA_* setting of the machine's, no user config or
    data directory, the store at ``store``, no network."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    env.update(ORA__RETRIEVAL__PATH=str(store), HF_HUB_OFFLINE="1",
               XDG_CONFIG_HOME=str(tmp / "xdg-config"), XDG_DATA_HOME=str(tmp / "xdg-data"))
    return env


def ora(tmp: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ora_core.cli", *args], capture_output=True, text=True,
                          env=env, cwd=tmp, timeout=600)


@pytest.fixture(scope="session")
def vault_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Chroma store holding the sample vault, ingested once by ``ora vault add vault``."""
    assert VAULT.is_dir(), f"the sample vault {VAULT} is missing: the probes need it ingested"
    tmp = tmp_path_factory.mktemp("probe-vault")
    store = tmp / "chroma"
    proc = ora(tmp, user_env(tmp, store), "vault", "add", str(VAULT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return store


def own_store(vault_store: Path, tmp: Path) -> Path:
    """A copy of the ingested store for one run (its turns index their exchanges into it)."""
    store = tmp / "chroma"
    shutil.copytree(vault_store, store)
    return store


def not_passed(report: dict[str, Any]) -> str:
    """Every probe that did not PASS, with the facts that did not hold (or why it is BROKEN)."""
    lines = []
    for result in report["results"]:
        if result["outcome"] == "PASS":
            continue
        lines.append(f"{result['outcome']} {result['id']} (turn {result['turn_status']}, trace {result['trace_path']})")
        if result["error"]:
            lines.append(f"    error: {result['error']}")
        for fact in result["facts"]:
            if not fact["held"]:
                lines += [f"    fact:     {fact['fact']}", f"    expected: {fact['expected']}",
                          f"    trace:    {fact['actual']}", f"    file:     {fact['file']}"]
        if result["stderr"]:
            lines.append("    stderr:   " + result["stderr"][-600:].replace("\n", "\n              "))
    return "\n".join(lines)


# --- the whole pack ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pack_run(tmp_path_factory: pytest.TempPathFactory, vault_store: Path) -> dict[str, Any]:
    """``ora probe run --config <scripted> --json --out ... --junit ...``, run once for this module."""
    tmp = tmp_path_factory.mktemp("probe-pack")
    env = user_env(tmp, own_store(vault_store, tmp))
    proc = ora(tmp, env, "probe", "run", "--config", str(scripted_config()), "--json",
               "--out", str(tmp / "runs"), "--junit", str(tmp / "junit.xml"))
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"ora probe run printed no JSON report (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return {"proc": proc, "report": report, "junit": (tmp / "junit.xml").read_text()}


def test_every_bundled_probe_passes_on_the_scripted_configuration(pack_run: dict[str, Any]) -> None:
    report, proc = pack_run["report"], pack_run["proc"]
    ran = [r["id"] for r in report["results"]]
    assert [i for i in bundled_ids() if i not in ran] == []  # the whole bundled pack, none left out
    assert report["counts"]["PASS"] == len(report["results"]), "\n" + not_passed(report)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert str(scripted_config()) in report["config_sources"]
    assert 'failures="0"' in pack_run["junit"] and 'errors="0"' in pack_run["junit"]


def _turn_dir(report: dict[str, Any], probe: str) -> Path:
    [result] = [r for r in report["results"] if r["id"] == probe]
    assert result["trace_path"], f"{probe} left no trace: {result['error']}"
    return Path(result["trace_path"])


def _step(turn_dir: Path, step: str) -> dict[str, Any]:
    [path] = sorted(turn_dir.glob(f"[0-9][0-9]-{step}.json"))
    return json.loads(path.read_text())


def _jsonl(turn_dir: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (turn_dir / name).read_text().splitlines() if line.strip()]


def _contingencies(turn_dir: Path) -> set[str]:
    return {c["name"] for c in _jsonl(turn_dir, "contingencies.jsonl")}


def test_the_scripted_models_take_the_paths_the_probes_are_about(pack_run: dict[str, Any]) -> None:
    """A PASS on a path the probe is not about would prove nothing: each scripted behaviour is seen
    doing what the configuration says it does."""
    report = pack_run["report"]

    # bypass-class: the model stated seed 000's invented timestamp, twice; the clock check caught it
    # and the clock answered.
    turn = _turn_dir(report, "bypass-class")
    direct = _step(turn, "direct-response")["output"]
    assert "May 15, 2026 at 10:07:49 AM PDT" in direct["completion"]["text"]
    assert "May 15, 2026" in direct["regenerated"]["answer"]
    assert {"gear1-answer-time-not-grounded", "gear1-clock-answered-from-clock"} <= _contingencies(turn)
    assert direct["answered_by"] == "system clock (deterministic)"

    # failure-05: given the directive and the clock reading, the model stated the clock's own time
    # (a time the probe's clock check had to read, not an answer without one).
    turn = _turn_dir(report, "failure-05-confabulated-time")
    step = _step(turn, "direct-response")
    local = step["input"]["clock"]["local"]  # 2026-11-27T16:18:43+00:00
    assert f"{local[11:16]} (" in step["output"]["completion"]["text"]
    assert "clock_claims" not in step["output"] and "regenerated" not in step["output"]

    # failures #6 and #7: Phase A expanded the cui-bono prompts as seed 000's did, so the Stage 1
    # re-scan read "Structured cui bono analysis ..."; Stage 0 read the raw prompt.
    for probe in ("failure-06-substring-collision", "failure-07-phase-a-layering"):
        turn = _turn_dir(report, probe)
        assert _step(turn, "phase-a")["output"]["cleaned_prompt"].startswith("Structured cui bono analysis")
        assert "cui bono analysis" in _step(turn, "stage0-bypass")["input"]["raw_prompt"].lower()

    # specific-number: both authorised paths, in order: a request, then a COVERAGE GAP; no figure.
    turn = _turn_dir(report, "specific-number")
    requests = _jsonl(turn, "supplemental-rag.jsonl")
    assert requests and all(r["query"].startswith("What was Apple's Q3 2024 revenue?") for r in requests)
    assert re.search(r"(?m)^## COVERAGE GAP$", json.loads((turn / "turn.json").read_text())["answer"])

    # vault-content-required: the answer is a retrieved vault chunk's text, and it passed verification.
    turn = _turn_dir(report, "vault-content-required")
    chunks = _step(turn, "context-assembly")["output"]["retrievals"]["concept"]["chunks"]
    answer = json.loads((turn / "turn.json").read_text())["answer"]
    assert any(answer in chunk["text"] for chunk in chunks) and "/vault/" in chunks[0]["provenance"]["source"]
    assert set(_step(turn, "final-output")["output"]["verdicts"].values()) == {"PASS"}

    # failures #9 and #11: the verifier faults landed on a real analyst output.
    for probe in ("failure-09-verifier-exception", "failure-11-visual-hook"):
        analyst = _step(_turn_dir(report, probe), "gear2-analyst")["output"]
        assert analyst["status"] == "ok" and "## COVERAGE GAP" in analyst["text"], analyst


# --- a regression of a catalogued failure FAILs its probe ----------------------------------------------------

@pytest.fixture
def probe_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, vault_store: Path) -> Any:
    """``probe_cli(*ids) -> (exit code, report)``: ``ora probe run IDS --config <scripted> --json`` in
    this process, on the plugins loaded from their entry points, so a monkeypatch reaches them."""
    for name in [k for k in os.environ if k.startswith("ORA")]:
        monkeypatch.delenv(name)
    for name, value in user_env(tmp_path, own_store(vault_store, tmp_path)).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(cli_state.state, "host", None)  # loaded from the entry points, as `ora` does
    monkeypatch.setattr(cli_state.state, "config_path", None)

    def run(*ids: str) -> tuple[int, dict[str, Any]]:
        result = CliRunner().invoke(build_app(), ["probe", "run", *ids, "--config", str(scripted_config()),
                                                  "--json", "--out", str(tmp_path / "runs")])
        try:
            return result.exit_code, json.loads(result.stdout)
        except json.JSONDecodeError:
            pytest.fail(f"ora probe run printed no JSON report (exit {result.exit_code}):\n{result.output[-3000:]}")

    return run


def _failed(report: dict[str, Any], probe: str) -> list[dict[str, Any]]:
    """The facts of ``probe`` that did not hold; the probe must have FAILed (not BROKEN)."""
    [result] = [r for r in report["results"] if r["id"] == probe]
    assert result["outcome"] == "FAIL", f"{probe} is {result['outcome']}, not FAIL:\n{not_passed(report)}"
    return [f for f in result["facts"] if not f["held"]]


def test_a_clock_check_that_sees_nothing_lets_the_invented_time_ship_and_bypass_class_fails(
        probe_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failure #5, its detector broken: the clock-claims check finds no claim, so the stubborn
    confabulator's timestamp ships; the probe's own clock check (not the detector's) names it."""
    from ora_bypass.clock import ClockClaimsDetector

    monkeypatch.setattr(ClockClaimsDetector, "detect", lambda self, text, ctx=None: [])
    code, report = probe_cli("bypass-class")
    assert code == 1
    [fact] = _failed(report, "bypass-class")
    assert fact["fact"].startswith("turn.json: answer states no time or date the clock reading")
    assert "contradicts the clock" in fact["actual"] and "10:07:49 AM PDT" in fact["actual"]


def test_a_system_prompt_without_the_directive_fails_failure_05_naming_the_directive(
        probe_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failure #5, its fix undone: the directive no longer heads the system prompts. The kernel then
    refuses the model call (``call_role``) and the turn halts; the probe names the missing directive,
    and the model reply that therefore does not exist."""
    from ora_core.engine import prompts

    monkeypatch.setattr(prompts, "directive", lambda profile="full": "")
    code, report = probe_cli("failure-05-confabulated-time")
    assert code == 1
    failed = _failed(report, "failure-05-confabulated-time")
    assert [f["fact"] for f in failed] == [
        "step:direct-response: input.messages.0.content contains '## UNIVERSAL ANTI-CONFABULATION DIRECTIVE'",
        "step:direct-response: output.completion.text states no time or date the clock reading "
        "(step:direct-response: input.clock) contradicts",
    ]
    assert failed[0]["actual"].startswith('input.messages.0.content = "\\n\\n## SYSTEM CLOCK READING')
    assert "no key 'completion'" in failed[1]["actual"]


def test_a_clock_reading_kept_from_the_model_fails_failure_05_naming_the_prompt_and_the_invented_time(
        probe_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failure #5's other half undone: the clock reading is taken (and recorded) but no longer put in
    front of the model. The scripted model then confabulates seed 000's timestamp; Ora's clock check
    still answers from the clock, so the shipped answer holds, and the probe names what the model
    was sent and what it said."""
    from ora_core.engine import prompts

    original = prompts.system_prompt

    def without_clock(task: str = "", *, extra: str = "", **kw: Any) -> str:
        kept = [p for p in extra.split("\n\n") if not p.startswith("## SYSTEM CLOCK READING")]
        return original(task, extra="\n\n".join(kept), **kw)

    monkeypatch.setattr(prompts, "system_prompt", without_clock)
    code, report = probe_cli("failure-05-confabulated-time")
    assert code == 1
    failed = {f["fact"]: f["actual"] for f in _failed(report, "failure-05-confabulated-time")}
    reply = ("step:direct-response: output.completion.text states no time or date the clock reading "
             "(step:direct-response: input.clock) contradicts")
    assert set(failed) == {"step:direct-response: input.messages.0.content contains '## SYSTEM CLOCK READING'",
                           reply}, failed
    assert "contradicts the clock" in failed[reply] and "10:07:49 AM PDT" in failed[reply]


def test_a_substring_bypass_matcher_fails_the_collision_and_layering_probes(
        probe_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failure #6 re-introduced: the bypass vocabulary matched as plain substrings (seed 000's
    ``_signal_present`` before its fix), so "no analysis" fires inside "cui bono analysis"."""
    import ora_bypass

    from ora_core.api import Signal

    def substring_detect(self: Any, text: str, ctx: Any = None) -> list[Signal]:
        lowered, found = text.lower(), []
        for phrase, (category, strength) in self.vocabulary.items():
            at = lowered.find(phrase)
            if at >= 0:
                found.append(Signal(detector=self.name, kind=self.kind, name=phrase, strength=strength,
                                    matched=text[at:at + len(phrase)], start=at, end=at + len(phrase),
                                    data={"category": category}))
        return found

    monkeypatch.setattr(ora_bypass.BypassDetector, "detect", substring_detect)
    code, report = probe_cli("failure-06-substring-collision", "failure-07-phase-a-layering")
    assert code == 1
    collision = {f["fact"]: f["actual"] for f in _failed(report, "failure-06-substring-collision")}
    assert collision["step:stage0-bypass: output.bypass equals false"] == "output.bypass = true"
    assert '"name": "no analysis"' in collision["step:stage0-bypass: output.signals[name=no analysis] is absent"]
    layering = [f["fact"] for f in _failed(report, "failure-07-phase-a-layering")]
    assert "step:pre-routing: output.stage1_bypass_rescan.acted equals false" in layering


def test_an_auto_pass_on_a_verifier_exception_fails_failure_09(probe_cli: Any,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Failure #9 re-introduced: a verifier fault becomes ``VERIFIED [auto-pass]`` (seed 000's
    substitution) instead of BROKEN. The probe names the verdict on record and the unmarked answer."""
    from ora_core.engine import verification
    from ora_core.kernel.models import Verdict, VerdictStatus

    def auto_pass(verifier: str, reasons: list[str], raw: str = "", **data: Any) -> Verdict:
        return Verdict(status=VerdictStatus.PASS, verifier=verifier, reasons=reasons,
                       raw_output=f"VERIFIED\n[Verification error, auto-pass: {'; '.join(reasons)}]")

    monkeypatch.setattr(verification, "_broken", auto_pass)
    code, report = probe_cli("failure-09-verifier-exception")
    assert code == 1
    failed = {f["fact"]: f["actual"] for f in _failed(report, "failure-09-verifier-exception")}
    assert set(failed) == {
        "contingency 'gear2-cycle1-verifier-BROKEN-not-verified' fired",
        "step-health.json: steps[step=gear2-cycle1-verify].verdict equals 'BROKEN'",
        "the answer contains '\\\\[warning: not verified'",
    }, failed
    assert "'PASS'" in failed["step-health.json: steps[step=gear2-cycle1-verify].verdict equals 'BROKEN'"]
