"""``ora run`` takes its prompt from the argument, standard input (``-``) or ``--prompt-file``;
bad input is a usage error (exit 2) naming what was wrong, before any model call."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ora_core.api import UsageError
from ora_core.cli.run import read_prompt


def ora(*args: str, stdin: bytes | None = None, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "ORA__TRACE__ROOT": str(tmp_path / "traces"),
           "ORA__BACKENDS__LOCAL__TYPE": "scripted", "ORA__BACKENDS__LOCAL__MODEL": "scripted-1",
           "ORA__BACKENDS__LOCAL__OPTIONS": '{ default = "Hello back." }', "ORA_CONFIG": ""}
    return subprocess.run([sys.executable, "-m", "ora_core.cli", "run", "--no-progress", *args], input=stdin,
                          capture_output=True, env={k: v for k, v in env.items() if v}, cwd=tmp_path, timeout=120)


def test_a_prompt_from_standard_input_with_dash() -> None:
    assert read_prompt("-", None, io.TextIOWrapper(io.BytesIO("Hallo, wie spät ist es?".encode()))) == \
        "Hallo, wie spät ist es?"


def test_a_prompt_larger_than_the_argument_limit_comes_through_a_file(tmp_path: Path) -> None:
    big = "Why did the Roman Empire fall? " * 20_000  # ~600 KB: well past the 128 KiB argument limit
    path = tmp_path / "prompt.txt"
    path.write_text(big, encoding="utf-8")
    assert read_prompt(None, str(path)) == big


@pytest.mark.parametrize(("prompt", "prompt_file", "stdin", "message"), [
    ("", None, None, None),
    (None, None, None, "no prompt"),
    ("-", None, b"   \n", "standard input is empty"),
    ("-", None, b"\xff\xfe bad", "standard input is not UTF-8"),
    ("x", "f.txt", None, "not both"),
])
def test_bad_prompt_input_is_a_usage_error_naming_it(tmp_path: Path, prompt, prompt_file, stdin, message) -> None:
    if prompt == "":
        with pytest.raises(UsageError):
            from ora_core.engine.app import check_prompt

            check_prompt(read_prompt(prompt, prompt_file))
        return
    stream = io.TextIOWrapper(io.BytesIO(stdin)) if stdin is not None else None
    with pytest.raises(UsageError, match=message):
        read_prompt(prompt, prompt_file, stream)


def test_a_missing_or_non_utf8_prompt_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    with pytest.raises(UsageError, match=f"{missing}.*does not exist"):
        read_prompt(None, str(missing))
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("Café crème".encode("latin-1"))
    with pytest.raises(UsageError, match=f"{latin}.*not UTF-8"):
        read_prompt(None, str(latin))


def test_ora_run_dash_reads_stdin_and_an_empty_one_exits_2_without_a_model_call(tmp_path: Path) -> None:
    answered = ora("-", stdin=b"Hello there", tmp_path=tmp_path)
    assert answered.returncode == 0, answered.stderr.decode()[-2000:]
    assert b"Hello back." in answered.stdout
    empty = ora("-", stdin=b"", tmp_path=tmp_path)
    assert empty.returncode == 2 and b"standard input is empty" in empty.stderr
    blank = ora("   ", tmp_path=tmp_path)
    assert blank.returncode == 2 and b"the prompt is empty" in blank.stderr
    turns = list((tmp_path / "traces").rglob("turn.json")) if (tmp_path / "traces").exists() else []
    assert len(turns) == 1  # only the answered prompt opened a turn


def test_a_pending_clarification_is_asked_on_the_terminal_and_the_answer_runs(tmp_path: Path) -> None:
    """Not a request at all ("zzqx vlorp"): the routing asks; on a terminal (forced with --ask)
    the user picks option 1 and the turn runs on that mode, recording the question and answer."""
    import json

    asked = ora("--ask", "zzqx vlorp", stdin=b"1\n", tmp_path=tmp_path)
    err = asked.stderr.decode()
    assert "1. " in err and "just answer" in err, err[-2000:]
    assert asked.returncode == 0, err[-2000:]
    turns = sorted((tmp_path / "traces").rglob("turn.json"))
    assert len(turns) == 2  # the asking turn and the answered one
    answered = [c for c in (turns[-1].parent / "contingencies.jsonl").read_text().splitlines()
                if "clarification-answered-by-user" in c]
    record = json.loads(answered[0])["data"]
    assert record["chosen"] and record["question"] and record["asked_in_turn"]


def test_without_a_terminal_the_turn_returns_needs_clarification_exit_3(tmp_path: Path) -> None:
    result = ora("zzqx vlorp", stdin=b"", tmp_path=tmp_path)
    assert result.returncode == 3 and b"Clarification needed" in result.stdout


def test_an_answer_that_is_not_an_option_is_named_and_just_answer_runs_simple() -> None:
    from ora_core.api import TurnResult
    from ora_core.engine.app import answer_clarification

    pending = TurnResult(status="needs_clarification", question="Which?", options=["standard", "steelman"],
                         turn_id="t1")
    assert answer_clarification(pending, "2").chosen == "steelman"
    assert answer_clarification(pending, "just answer").chosen == "simple"
    assert answer_clarification(pending, "3").chosen == "simple"
    with pytest.raises(UsageError, match="not one of the options: 1 \\(standard\\), 2 \\(steelman\\)"):
        answer_clarification(pending, "cui-bono")
