"""benchmarks/install.py judges what it says: README command 1 is the README's, each ``==> `` line of
scripts/install.sh starts a phase (the time after ``==> installed:`` is the README prompt's run), and a
total over its target, or a failed command, is a MISS."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("_ora_bench_install", REPO / "benchmarks" / "install.py")
assert spec and spec.loader
bench = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = bench
spec.loader.exec_module(bench)


def test_command_1_is_the_readmes_first_line() -> None:
    command = bench.readme_command_1()
    assert command.startswith("bash scripts/install.sh && .venv/bin/ora run ")
    assert command in (REPO / "README.md").read_text(encoding="utf-8")


def test_every_phase_install_sh_announces_is_a_marker_the_benchmark_reads() -> None:
    script = (REPO / "scripts" / "install.sh").read_text(encoding="utf-8")
    assert "say() { printf '\\n==> %s\\n' \"$*\" >&2; }" in script
    assert re.search(r'^say "installed: ', script, re.M)  # the end of the install: the README run starts


def test_phases_are_split_at_the_markers_and_the_run_after_installed(tmp_path: Path) -> None:
    command = ("echo '==> first' >&2; sleep 0.2; echo noise >&2; echo '==> second' >&2; sleep 0.3; "
               "echo '==> installed: .venv/bin/ora' >&2; sleep 0.1; echo answer")
    run = bench.run_phased("fake", command, tmp_path, dict(os.environ))
    names = [p.name for p in run.phases]
    assert names == ["(start: until install.sh's first phase)", "first", "second", "ora run (the README prompt)"]
    seconds = {p.name: p.seconds for p in run.phases}
    assert 0.15 < seconds["first"] < 1.5 and 0.25 < seconds["second"] < 1.5
    assert abs(sum(seconds.values()) - run.total_s) < 0.05
    assert bench.print_run(run, target_s=60.0) is True
    assert bench.print_run(run, target_s=0.1) is False


def test_a_failed_command_is_a_miss_whatever_its_time(tmp_path: Path, capsys) -> None:
    run = bench.run_phased("failing", "echo '==> step' >&2; echo 'boom: it broke' >&2; exit 3", tmp_path,
                           dict(os.environ))
    assert run.returncode == 3
    assert bench.print_run(run, target_s=600.0) is False
    out = capsys.readouterr().out
    assert "MISS (the command failed" in out and "boom: it broke" in out


def test_the_fresh_environment_has_an_empty_private_pip_cache(tmp_path: Path) -> None:
    env = bench.fresh_env(tmp_path)
    assert env["PIP_CACHE_DIR"] == str(tmp_path / "pip-cache")
    assert env["XDG_DATA_HOME"].startswith(str(tmp_path))
    assert not any(k.startswith("ORA") for k in env)
