"""Modes: loading from packs and config dirs, named problems per file and field, the CLI check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ora_modes
from ora_core.kernel.errors import ModeError
from ora_core.kernel.modes import REQUIRED_SECTIONS, load_modes, parse_mode_text
from ora_core.testing import make_config, make_host

GOOD = (Path(ora_modes.modes_dir()) / "standard.md").read_text()


def without_examples(text: str) -> str:
    head, rest = text.split("\nexamples:\n", 1)
    return head + "\nretrieval:" + rest.split("\nretrieval:", 1)[1]


BARE = without_examples(GOOD)


def test_default_pack_ships_real_modes_with_every_section():
    library = load_modes(make_host(ora_modes), None)
    assert not library.problems
    for name, gear in [("simple", 1), ("standard", 2), ("deep-clarification", 2), ("cui-bono", 4),
                       ("steelman", 3), ("decision-analysis", 4)]:
        mode = library.get(name)
        assert mode.gear == gear
        for section in REQUIRED_SECTIONS:
            assert len(mode.section(section).split()) >= 15, (name, section)
    assert library.get("cui-bono").retrieval.filters_for("conversation").types == ["chat"]


@pytest.mark.parametrize("text, field, words", [
    ("no front matter\n## DEPTH ANALYSIS GUIDANCE\nx", "front matter", "missing"),
    ("---\nname: [unclosed\n---\n", "front matter", "malformed YAML"),
    (GOOD.replace("gear: 2", "gear: 7"), "gear", "unknown gear 7"),
    (GOOD.replace("gear: 2", "gear: 2\ncolour: blue"), "colour", "unknown key"),
    (GOOD.replace("## EVALUATION CRITERIA", "## EVALUATION NOTES"), "section EVALUATION CRITERIA", "missing"),
    (GOOD.replace("name: standard", "name: Standard Mode"), "name", "lower-case"),
    (GOOD.replace("conversation: {types: [chat]}", "conversaton: {types: [chat]}"), "retrieval.streams",
     "unknown stream(s) conversaton"),
])
def test_problems_name_the_file_and_the_field(text, field, words):
    _mode, problems = parse_mode_text(text, "/x/standard.md")
    assert problems, "a malformed mode must not load silently"
    assert any(p.field == field and words in p.message and p.path == "/x/standard.md" for p in problems), problems


def test_empty_section_and_duplicate_names_are_problems(tmp_path):
    empty = GOOD.replace("## REVISION GUIDANCE", "## REVISION GUIDANCE\n\n## IGNORED")
    (tmp_path / "standard.md").write_text(empty)
    library = load_modes(make_host(ora_modes), None, [tmp_path])
    messages = [str(p) for p in library.problems]
    assert any("defined twice" in m and str(tmp_path / "standard.md") in m for m in messages)
    _mode, problems = parse_mode_text(empty, "standard.md")
    assert [(p.field, p.message) for p in problems] == [("section REVISION GUIDANCE", "empty")]


def test_a_missing_mode_is_a_mode_error_naming_where_it_looked(tmp_path):
    library = load_modes(None, make_config({"modes": {"dirs": [str(tmp_path)]}}).config)
    with pytest.raises(ModeError, match="'simple' is not defined in config:"):
        library.get("simple")


def test_modes_check_cli_exits_1_naming_the_file_and_field(tmp_path):
    (tmp_path / "broken.md").write_text(GOOD.replace("name: standard", "name: broken").replace("gear: 2", "gear: 9"))
    cfg = tmp_path / "ora.toml"
    cfg.write_text(f'[modes]\ndirs = ["{tmp_path}"]\n')
    ora = str(Path(sys.executable).with_name("ora"))
    env = {k: v for k, v in os.environ.items() if k != "ORA_CONFIG"}
    env["ORA_PLUGINS"] = "modes-default"
    check = subprocess.run([ora, "-c", str(cfg), "modes", "check"], capture_output=True, text=True, env=env)
    assert check.returncode == 1
    assert f"{tmp_path / 'broken.md'}: gear: unknown gear 9" in check.stderr
    listing = subprocess.run([ora, "-c", str(cfg), "modes", "list", "--json"], capture_output=True, text=True,
                             env=env)
    assert listing.returncode == 0 and '"cui-bono"' in listing.stdout


@pytest.mark.parametrize("examples, field, words", [
    ("examples: Who gains from the tariff?", "examples", "must be a list of example prompts"),
    ("examples: {who: gains}", "examples", "must be a list of example prompts"),
    ("examples: [1, 2]", "examples.0", "every example must be a prompt (a string), got int"),
    ("examples: [[a, list]]", "examples.0", "got list"),
    ('examples: ["fine", "  "]', "examples", "example 1 is empty"),
])
def test_examples_that_are_not_a_list_of_strings_name_the_file_and_the_field(examples, field, words):
    mode, problems = parse_mode_text(BARE.replace("gear: 2", f"gear: 2\n{examples}"), "/x/standard.md")
    assert mode is None, "a malformed examples field must not load silently"
    assert any(p.field == field and words in p.message and p.path == "/x/standard.md" for p in problems), problems


def test_examples_load_with_the_mode():
    mode, problems = parse_mode_text(BARE.replace("gear: 2", 'gear: 2\nexamples: ["Why  is the sea salty?"]'),
                                     "/x/standard.md")
    assert not problems and mode.examples == ["Why is the sea salty?"]


def test_modes_check_names_the_modes_without_examples_and_still_passes(tmp_path):
    (tmp_path / "plain.md").write_text(BARE.replace("name: standard", "name: plain"))
    cfg = tmp_path / "ora.toml"
    cfg.write_text(f'[modes]\ndirs = ["{tmp_path}"]\n')
    ora = str(Path(sys.executable).with_name("ora"))
    env = {k: v for k, v in os.environ.items() if k != "ORA_CONFIG"}
    env["ORA_PLUGINS"] = "modes-default"
    check = subprocess.run([ora, "-c", str(cfg), "modes", "check"], capture_output=True, text=True, env=env)
    assert check.returncode == 0, check.stderr
    assert f"note: pack config:{tmp_path} ({tmp_path}): mode(s) without examples, routed by vocabulary only: plain" \
        in check.stderr
    assert "pack default" not in check.stderr  # every bundled mode declares examples
