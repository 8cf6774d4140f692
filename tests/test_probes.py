"""``ora probe``: probe files, the probe runner and its three outcomes, facts read from the trace on
disk, the bundled pack (registered through ``ora_register_probes``) and the command line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ora_core import hookimpl
from ora_core.cli import state as cli_state
from ora_core.cli.app import build_app
from ora_core.engine.measure.probes import (
    ProbeFileError,
    ProbeRun,
    ProbeSource,
    discover,
    junit_xml,
    parse_probe_text,
    recheck,
    run_all,
    run_probe,
    select,
)
from ora_core.testing import make_host

GREETING = "Hello, what time is it?"


def first_party(*extra: object) -> Any:
    import ora_broken
    import ora_bypass
    import ora_health_detectors
    import ora_inject
    import ora_scripted
    import ora_signals
    import ora_trace_fs

    import ora_modes
    import ora_probes

    return make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs, ora_broken,
                     ora_health_detectors, ora_inject, ora_probes, *extra)


@pytest.fixture
def scripted_config(tmp_path: Path) -> Path:
    """A user configuration file: every role on the scripted backend, no warm-up, no fsync."""
    path = tmp_path / "ora.toml"
    path.write_text(textwrap.dedent("""
        [backends.local]
        type = "scripted"
        model = "scripted-1"
        family = "scripted"
        [backends.local.options]
        default = "I cannot see a clock. Gap: the time is not in front of me."
        [pipeline]
        warmup = false
        [plugins.trace-fs]
        fsync = false
    """))
    return path


def probe(text: str, name: str = "p.toml", directory: Path | None = None) -> ProbeSource:
    path = (directory or Path("/probes")) / name
    parsed = parse_probe_text(textwrap.dedent(text), path)
    return ProbeSource(id=parsed.id, path=str(path), pack="test", probe=parsed)


BYPASS_PROBE = f'''
    id = "greeting"
    title = "a greeting bypasses"
    prompt = "{GREETING}"
    [[facts]]
    kind = "field"
    file = "step:stage0-bypass"
    path = "output.bypass"
    equals = true
    [[facts]]
    kind = "step_absent"
    step = "phase-a"
    [[facts]]
    kind = "field"
    file = "turn.json"
    path = "mode"
    equals = "simple"
'''


def runner(host: Any, config: Path, tmp_path: Path) -> ProbeRun:
    return ProbeRun(host=host, config_path=config, out_dir=tmp_path / "runs", stamp="t")


# --- the hook and the bundled pack ------------------------------------------------------------------------

def test_ora_register_probes_adds_a_probe_pack_and_refuses_a_missing_directory(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()

    class Pack:
        @hookimpl
        def ora_register_probes(self, register):
            register(pack, name="mine")
            register(tmp_path / "nowhere", name="ghost")

    host = make_host(Pack(), strict=False)
    assert host.components("probe_pack") == {"mine": pack}
    record = host.records[next(iter(host.records))]
    assert record.status == "failed"
    assert record.errors == [f"probe pack directory {str(tmp_path / 'nowhere')!r} does not exist"]


def test_the_bundled_pack_holds_seed_000s_three_probes_and_one_per_catalogued_failure() -> None:
    import ora_probes

    sources = discover(make_host(ora_probes))
    assert [s.error for s in sources if s.error] == []
    ids = {s.id for s in sources}
    assert {"bypass-class", "vault-content-required", "specific-number"} <= ids
    assert sorted(s.probe.catalogue for s in sources if s.probe.catalogue) == list(range(1, 14))
    visual = next(s.probe for s in sources if s.probe.catalogue == 11)
    assert "no visual hook" in visual.counterpart  # the failure without a counterpart says so
    assert all(s.probe.source for s in sources)


# --- probe files --------------------------------------------------------------------------------------------

def test_an_unknown_key_in_a_probe_file_is_an_error_naming_the_file_and_the_field() -> None:
    with pytest.raises(ProbeFileError) as caught:
        probe(BYPASS_PROBE.replace('path = "output.bypass"', 'pth = "output.bypass"'), name="bad.toml")
    message = str(caught.value)
    assert message.startswith("/probes/bad.toml: ")
    assert "facts.0.field.pth: unknown field" in message and "facts.0.field" in message


@pytest.mark.parametrize(("fact", "problem"), [
    ('kind = "field"\nfile = "turn.json"\npath = "mode"', "exactly one of equals, contains, matches"),
    ('kind = "field"\nfile = "turn.json"\npath = "mode"\nmatches = "(unclosed"', "is not a regular expression"),
    ('kind = "field"\nfile = "turn.json"\npath = "a..b"\nexists = true', "empty segment"),
    ('kind = "jsonl"\nfile = "contingencies.jsonl"', "needs 'count', 'min' or 'max'"),
    ('kind = "jsonl"\nfile = "turn.json"\ncount = 1', "is not a JSONL log"),
    ('kind = "contingency"', "exactly one of 'name' and 'matches'"),
    ('kind = "sometimes"', "facts.0"),
])
def test_a_malformed_fact_is_refused_with_the_problem_named(fact: str, problem: str) -> None:
    text = f'id = "x"\ntitle = "x"\nprompt = "hi"\n[[facts]]\n{fact}\n'
    with pytest.raises(ProbeFileError) as caught:
        parse_probe_text(text, Path("x.toml"))
    assert problem in str(caught.value)


def test_a_yaml_probe_file_reads_like_a_toml_one(tmp_path: Path) -> None:
    (tmp_path / "yaml-probe.yaml").write_text(textwrap.dedent(f"""
        title: a greeting
        prompt: "{GREETING}"
        overrides: {{retrieval: false}}
        facts:
          - {{kind: step_ran, step: stage0-bypass}}
          - {{kind: any_of, facts: [{{kind: status, one_of: [ok]}}, {{kind: answer, contains: "(?i)gap"}}]}}
    """))
    (tmp_path / "broken.toml").write_text("id = \n")
    sources = discover(None, [tmp_path])
    by_id = {s.id: s for s in sources}
    assert by_id["yaml-probe"].probe.overrides.retrieval is False  # the id defaults to the file name
    assert "not TOML" in by_id["broken"].error


def test_a_probe_id_defined_twice_makes_the_second_broken_naming_both_files(tmp_path: Path) -> None:
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "same.toml").write_text(textwrap.dedent(BYPASS_PROBE))
    sources = discover(None, [tmp_path / "a", tmp_path / "b"])
    assert sources[0].probe is not None and sources[1].probe is None
    error = sources[1].error
    assert str(tmp_path / "a" / "same.toml") in error and str(tmp_path / "b" / "same.toml") in error
    with pytest.raises(ProbeFileError, match="unknown probe id"):
        select(sources, ["greeting", "nope"])


# --- the runner: PASS, FAIL, BROKEN ---------------------------------------------------------------------------

def test_a_probe_whose_facts_hold_passes_with_its_trace_in_its_own_directory(tmp_path: Path,
                                                                             scripted_config: Path) -> None:
    result = run_probe(probe(BYPASS_PROBE), runner(first_party(), scripted_config, tmp_path))
    assert result.outcome == "PASS", result
    assert [f.held for f in result.facts] == [True, True, True]
    assert result.trace_path.startswith(str(tmp_path / "runs" / "greeting"))
    assert result.turn_status in ("ok", "degraded")


def test_a_probe_whose_fact_fails_names_the_fact_the_expectation_what_the_trace_shows_and_the_file(
        tmp_path: Path, scripted_config: Path) -> None:
    text = BYPASS_PROBE.replace("equals = true", "equals = false").replace('equals = "simple"', 'equals = "cui-bono"')
    result = run_probe(probe(text), runner(first_party(), scripted_config, tmp_path))
    assert result.outcome == "FAIL"
    bypass, absent, mode = result.facts
    assert (bypass.held, absent.held, mode.held) == (False, True, False)
    assert bypass.fact == "step:stage0-bypass: output.bypass equals false"
    assert bypass.actual == "output.bypass = true"
    assert bypass.file.endswith("01-stage0-bypass.json") and Path(bypass.file).is_file()
    assert mode.actual == "mode = 'simple'" and mode.file.endswith("turn.json")


@pytest.mark.parametrize(("overrides", "error"), [
    ('mode = "no-such-mode"', "overrides.mode 'no-such-mode' is not a loaded mode (loaded: "),
    ('inject = "lowconfidence"', "unknown fault-injection mode 'lowconfidence'; known modes: backend-timeout"),
    ('backend = "nowhere"', "role 'direct' uses backend 'nowhere', which is not configured"),
    ('config = { "pipeline.retries" = -1 }', "pipeline.retries"),
])
def test_a_probe_whose_configuration_is_invalid_is_broken_with_its_error_named(
        tmp_path: Path, scripted_config: Path, overrides: str, error: str) -> None:
    text = BYPASS_PROBE + f"\n[overrides]\n{overrides}\n"
    result = run_probe(probe(text), runner(first_party(), scripted_config, tmp_path))
    assert result.outcome == "BROKEN"
    assert error in result.error
    assert result.facts == []


def test_an_invalid_probe_file_is_broken_never_skipped(tmp_path: Path, scripted_config: Path) -> None:
    source = ProbeSource(id="bad", path="/probes/bad.toml", pack="test", error="/probes/bad.toml: prompt: missing")
    report = run_all([source, probe(BYPASS_PROBE)], runner(first_party(), scripted_config, tmp_path))
    assert [r.outcome for r in report.results] == ["BROKEN", "PASS"]
    assert report.results[0].error == "/probes/bad.toml: prompt: missing"
    assert report.counts == {"PASS": 1, "FAIL": 0, "BROKEN": 1} and not report.ok


def test_a_turn_without_a_trace_sink_is_broken(tmp_path: Path, scripted_config: Path) -> None:
    import ora_bypass
    import ora_scripted

    import ora_modes

    result = run_probe(probe(BYPASS_PROBE), runner(make_host(ora_scripted, ora_bypass, ora_modes), scripted_config,
                                                   tmp_path))
    assert result.outcome == "BROKEN" and "left no trace directory" in result.error


# --- facts come from the files on disk -------------------------------------------------------------------------

def test_facts_are_read_from_disk_a_deleted_file_fails_its_fact_by_name(tmp_path: Path,
                                                                        scripted_config: Path) -> None:
    source = probe(BYPASS_PROBE)
    result = run_probe(source, runner(first_party(), scripted_config, tmp_path))
    assert result.outcome == "PASS"
    turn_dir = Path(result.trace_path)
    step_file = next(turn_dir.glob("[0-9][0-9]-stage0-bypass.json"))
    step_file.unlink()
    bypass, absent, mode = recheck(source, turn_dir)
    assert not bypass.held and absent.held and mode.held
    assert "no step file for step 'stage0-bypass'" in bypass.actual
    (turn_dir / "turn.json").unlink()
    assert recheck(source, turn_dir)[2].actual == "cannot read the trace: does not exist"


def test_facts_are_read_from_disk_an_edited_file_changes_the_outcome(tmp_path: Path, scripted_config: Path) -> None:
    source = probe(BYPASS_PROBE)
    result = run_probe(source, runner(first_party(), scripted_config, tmp_path))
    turn = Path(result.trace_path) / "turn.json"
    doc = json.loads(turn.read_text())
    doc["mode"] = "steelman"
    turn.write_text(json.dumps(doc))
    assert [f.held for f in recheck(source, result.trace_path)] == [True, True, False]


def test_probe_overrides_apply_over_the_users_configuration(tmp_path: Path, scripted_config: Path) -> None:
    text = '''
        id = "forced"
        title = "a forced mode with an inject mode, retrieval off"
        prompt = "Who benefits from the harbour plan?"
        [overrides]
        mode = "standard"
        inject = "verifier-exception"
        retrieval = false
        config = { "verification.verifier" = "model", "verification.final_verifier" = "model" }
        [[facts]]
        kind = "contingency"
        name = "gear2-cycle1-verify-verifier-exception"
        [[facts]]
        kind = "field"
        file = "step-health.json"
        path = "steps[step=gear2-cycle1-verify].verdict"
        equals = "BROKEN"
        [[facts]]
        kind = "field"
        file = "step:context-assertions"
        path = "input.streams_enabled"
        equals = []
        [[facts]]
        kind = "contingency"
        name = "fault-injection-verifier-exception"
    '''
    result = run_probe(probe(text), runner(first_party(), scripted_config, tmp_path))
    assert result.outcome == "PASS", [f for f in result.facts if not f.held]


# --- the command line -----------------------------------------------------------------------------------------

@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scripted_config: Path):  # noqa: ANN201
    (tmp_path / "probes").mkdir()
    monkeypatch.setattr(cli_state.state, "host", first_party())
    monkeypatch.setattr(cli_state.state, "config_path", None)

    def invoke(*args: str) -> Any:
        return CliRunner().invoke(build_app(), ["probe", *args])

    return invoke


def _write(directory: Path, name: str, text: str) -> None:
    (directory / name).write_text(textwrap.dedent(text))


def test_ora_probe_run_json_reports_every_selected_probe_and_exits_non_zero_on_a_fail(
        cli: Any, tmp_path: Path, scripted_config: Path) -> None:
    probes = tmp_path / "probes"
    _write(probes, "greeting.toml", BYPASS_PROBE)
    _write(probes, "wrong.toml", BYPASS_PROBE.replace('id = "greeting"', 'id = "wrong"').replace(
        "equals = true", "equals = false"))
    junit = tmp_path / "junit.xml"
    args = ["run", "greeting", "wrong", "--config", str(scripted_config), "--dir", str(probes), "--json",
            "--junit", str(junit), "--out", str(tmp_path / "out")]
    result = cli(*args)
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert [(r["id"], r["outcome"]) for r in report["results"]] == [("greeting", "PASS"), ("wrong", "FAIL")]
    assert report["counts"] == {"PASS": 1, "FAIL": 1, "BROKEN": 0}
    xml = junit.read_text()
    assert '<testcase classname="ora.probes" name="greeting"' in xml and "<failure message=" in xml
    assert 'failures="1"' in xml and 'errors="0"' in xml
    assert cli("run", "greeting", "--config", str(scripted_config), "--dir", str(probes), "--json",
               "--out", str(tmp_path / "out2")).exit_code == 0
    human = cli("run", "wrong", "--config", str(scripted_config), "--dir", str(probes), "--out", str(tmp_path / "o3"))
    assert human.exit_code == 1
    assert "FAIL    wrong" in human.stdout
    assert "    fact:     step:stage0-bypass: output.bypass equals false\n    expected: output.bypass equals false\n" \
           "    trace:    output.bypass = true\n    file:     " in human.stdout


def test_ora_probe_run_names_an_unknown_probe_id_with_exit_2(cli: Any, tmp_path: Path,
                                                             scripted_config: Path) -> None:
    result = cli("run", "no-such-probe", "--config", str(scripted_config))
    assert result.exit_code == 2
    assert "unknown probe id(s) no-such-probe; known: bypass-class" in result.output


def test_ora_probe_list_names_an_invalid_probe_file(cli: Any, tmp_path: Path) -> None:
    _write(tmp_path / "probes", "odd.toml", 'title = "x"\nprompt = "hi"\nfacts = []\n')
    result = cli("list", "--dir", str(tmp_path / "probes"), "--json")
    assert result.exit_code == 1
    rows = {r["id"]: r for r in json.loads(result.stdout)}
    assert "facts: List should have at least 1 item" in rows["odd"]["error"]
    assert rows["failure-11-visual-hook"]["catalogue"] == 11 and rows["specific-number"]["model_dependent"]


def test_junit_xml_marks_broken_probes_as_errors(tmp_path: Path, scripted_config: Path) -> None:
    source = ProbeSource(id="bad", path="/probes/bad.toml", pack="test", error="cannot be read")
    report = run_all([source], runner(first_party(), scripted_config, tmp_path))
    xml = junit_xml(report)
    assert '<error message="cannot be read">' in xml and 'errors="1"' in xml
