"""``ora config check`` prints the lineage of every verification edge the configuration plans, before
any turn runs, and exits 1 when ``same_lineage = "refuse"`` leaves an edge with no judge of another
lineage."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ora_broken
import ora_scripted
import pytest
from typer.testing import CliRunner

from ora_core.cli import state as cli_state
from ora_core.cli.app import build_app
from ora_core.testing import make_host

TWO_FAMILIES = """
[backends.local]
type = "scripted"
model = "scripted-a"
family = "alpha"
[backends.checker]
type = "scripted"
model = "scripted-b"
family = "beta"
[roles]
breadth = "checker"
final_verifier = "checker"
[verification]
verifier = "model"
final_verifier = "model"
"""


@pytest.fixture
def check(tmp_path: Path) -> Iterator[Any]:
    saved = (cli_state.state.host, cli_state.state.config_path)
    cli_state.state.host = make_host(ora_scripted, ora_broken)

    def _check(config: str, *args: str) -> Any:
        path = tmp_path / "ora.toml"
        path.write_text(config)
        return CliRunner().invoke(build_app(), ["--config", str(path), "config", "check", *args])

    yield _check
    cli_state.state.host, cli_state.state.config_path = saved


def _edges(result: Any) -> dict[str, dict[str, Any]]:
    return {e["edge"]: e for e in json.loads(result.stdout)}


def test_two_families_plan_cross_verification_and_name_the_edges_that_stay_on_one_lineage(check):
    result = check(TWO_FAMILIES, "--json")
    assert result.exit_code == 0, result.output
    edges = _edges(result)
    depth = edges["cross-verification of the depth stream"]
    assert (depth["author"]["backend"], depth["judge"]["backend"], depth["relation"]) == ("local", "checker",
                                                                                          "different")
    breadth = edges["cross-verification of the breadth stream"]
    assert (breadth["author"]["backend"], breadth["judge"]["backend"]) == ("checker", "local")
    assert edges["final verifier on the consolidator"]["relation"] == "different"
    analyst = edges["verifier on the analyst"]  # gear 2: the verifier role is the analyst's own backend
    assert analyst["relation"] == "same" and "self-verification" in analyst["outcome"]
    assert edges["reconciler on the advocate"]["relation"] == "same"


def test_the_table_marks_the_edges_a_turn_would_name(check):
    result = check(TWO_FAMILIES)
    assert result.exit_code == 0
    assert "! gear 2   verifier on the analyst" in result.stdout
    assert "  gear 4   final verifier on the consolidator" in result.stdout
    assert "verifier: local (scripted-a, alpha)" in result.stdout


def test_refuse_re_routes_where_it_can_and_exits_1_where_it_cannot(check):
    result = check(TWO_FAMILIES + 'same_lineage = "refuse"\n', "--json")
    edges = _edges(result)
    assert edges["verifier on the analyst"]["outcome"] == "re-routed to checker"
    assert result.exit_code == 0  # every edge finds a judge of another lineage
    alone = TWO_FAMILIES.replace('[backends.checker]\ntype = "scripted"\nmodel = "scripted-b"\nfamily = "beta"\n', "")
    alone = alone.replace('breadth = "checker"\nfinal_verifier = "checker"\n', "")
    result = check(alone + 'same_lineage = "refuse"\n')
    assert result.exit_code == 1 and "refused: same_lineage = 'refuse'" in result.stdout


def test_a_non_llm_verifier_has_no_lineage(check):
    result = check(TWO_FAMILIES.replace('verifier = "model"\nfinal_verifier = "model"\n',
                                        'verifier = "model"\nfinal_verifier = "grounding"\n'), "--json")
    edge = _edges(result)["final verifier on the consolidator"]
    assert edge["judge"] is None and edge["relation"] == "not-a-model" and "not installed" in edge["judge_kind"]
