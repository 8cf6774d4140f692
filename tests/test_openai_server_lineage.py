"""The lineage rule and the README's configuration against a real OpenAI-compatible server:
llama-cpp-python's ``python -m llama_cpp.server`` serving the bundled SmolLM2 GGUF on 127.0.0.1
(``ora_core.testing``'s ``llama_servers``), every role through the ``openai`` plugin.

- the README's llama.cpp configuration ("Point Ora at your models"), read from the README itself, runs
  a turn whose every model call went to the server;
- ``verifier = "model"`` on the analyst's own server: contingency ``self-verification``, the verdict
  labelled ``same``, the turn not ``ok`` (``degrade``); re-routed to another lineage, or BROKEN when
  there is none (``refuse``);
- two server processes declared as two families (they serve the same weights under two model ids:
  the test exercises the lineage code, not model diversity): no contingency, and the trace names which
  model verified which.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from ora_core.api import Ora
from ora_core.testing import LlamaServer, LlamaServers

pytestmark = pytest.mark.slow
MODEL = "SmolLM2-135M-Instruct"
#: The second server's model id (the same GGUF under another alias: one model id would be one lineage)
OTHER_MODEL = "SmolLM2-135M-Instruct-second"
README = Path(__file__).resolve().parents[1] / "README.md"
PROMPT = "Why do harness vendors bundle models with tooling?"
VERIFY = "gear2-cycle1-verify"


@pytest.fixture(scope="module")
def servers(llama_servers: LlamaServers) -> tuple[LlamaServer, LlamaServer]:
    return (llama_servers.start(alias=MODEL, n_ctx=2048, threads=1),
            llama_servers.start(alias=OTHER_MODEL, n_ctx=2048, threads=1))


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("ORA")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)


def readme_llama_cpp_config() -> str:
    """The TOML block the README marks as the llama.cpp configuration."""
    text = README.read_text(encoding="utf-8")
    marker = text.index("<!-- llama.cpp configuration:")
    block = re.search(r"```toml\n(.*?)```", text[marker:], re.S)
    assert block, "the README's llama.cpp configuration block is missing"
    return block.group(1)


def _backend(name: str, server: LlamaServer, family: str) -> str:
    return (f'[backends.{name}]\ntype = "openai"\nbase_url = "{server.base_url}"\nmodel = "{server.alias}"\n'
            f'family = "{family}"\ncontext_window = 2048\nmax_tokens = 48\ntimeout_s = 120\n')


def _run(tmp_path: Path, toml: str, **extra: Any) -> tuple[Any, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "ora.toml"
    path.write_text(f'[trace]\nroot = "{tmp_path / "traces"}"\n\n[retrieval]\npath = "{tmp_path / "chroma"}"\n\n'
                    + toml, encoding="utf-8")
    result = Ora.open(path, **extra).run(PROMPT, mode="standard")
    assert result.status != "halted" or result.diagnostic, result
    assert result.trace_path, result
    return result, Path(result.trace_path)


def _step(trace: Path, name: str) -> dict[str, Any]:
    [path] = sorted(trace.glob(f"[0-9][0-9]-{name}.json"))
    return json.loads(path.read_text())


def _roles(backend: str, **overrides: str) -> str:
    roles = ("direct", "phase_a", "analyst", "depth", "breadth", "evaluator", "reviser", "verifier", "consolidator",
             "final_verifier")
    return "[roles]\n" + "".join(f'{r} = "{overrides.get(r, backend)}"\n' for r in roles)


MODEL_VERIFIER = '[verification]\nverifier = "model"\nfinal_verifier = "model"\n'
ONE_CYCLE = '[pipeline]\nverification_cycles = 1\n'


def test_the_readme_llama_cpp_configuration_runs_on_the_server(tmp_path, servers):
    config = readme_llama_cpp_config().replace("http://127.0.0.1:8080/v1", servers[0].base_url)
    assert servers[0].base_url in config, "the README's base_url is not the one this test replaces"
    result, trace = _run(tmp_path, config + ONE_CYCLE)
    assert result.status in ("ok", "degraded"), result.diagnostic
    calls = [c for s in sorted(trace.glob("[0-9][0-9]-*.json")) for c in json.loads(s.read_text()).get("calls", [])]
    assert calls and {c["backend"] for c in calls} == {"llamacpp"}
    assert all(c["effective_provider"] == "openai" and c["effective_model"] == MODEL for c in calls)
    assert all(c["messages"] and (c["output"] is not None or c["error"]) for c in calls)


def test_a_model_verifier_on_the_analyst_s_own_server_is_self_verification(tmp_path, servers):
    result, trace = _run(tmp_path, _backend("a", servers[0], "smollm") + _roles("a") + MODEL_VERIFIER + ONE_CYCLE)
    step = _step(trace, VERIFY)
    assert step["output"]["verdict"]["data"]["lineage"] == "same"
    assert step["output"]["lineage"]["author"]["backend"] == step["output"]["lineage"]["judges"][0]["backend"] == "a"
    assert "self-verification" in result.contingencies and result.status != "ok"


def test_refuse_re_routes_to_the_other_family_and_is_broken_without_one(tmp_path, servers):
    two = _backend("a", servers[0], "smollm-a") + _backend("b", servers[1], "smollm-b")
    result, trace = _run(tmp_path / "two", two + _roles("a") + MODEL_VERIFIER + 'same_lineage = "refuse"\n'
                         + ONE_CYCLE)
    step = _step(trace, VERIFY)
    assert step["output"]["routed_to"] == "b" and step["output"]["lineage"]["relation"] == "different"
    assert {c["backend"] for c in step["calls"]} == {"b"} and "self-verification" not in result.contingencies
    alone = _backend("a", servers[0], "smollm-a")
    result, trace = _run(tmp_path / "one", alone + _roles("a") + MODEL_VERIFIER + 'same_lineage = "refuse"\n'
                         + ONE_CYCLE)
    step = _step(trace, VERIFY)
    assert result.verdicts[VERIFY] == "BROKEN" and step["calls"] == []
    assert f"{VERIFY}-lineage-refused" in result.contingencies


def test_two_servers_declared_as_two_families_verify_each_other_and_the_trace_says_which(tmp_path, servers):
    two = _backend("a", servers[0], "smollm-a") + _backend("b", servers[1], "smollm-b")
    result, trace = _run(tmp_path, two + _roles("a", verifier="b", final_verifier="b") + MODEL_VERIFIER + ONE_CYCLE)
    assert "self-verification" not in result.contingencies
    lineage = _step(trace, VERIFY)["output"]["lineage"]
    assert lineage["relation"] == "different"
    assert (lineage["author"]["backend"], [j["backend"] for j in lineage["judges"]]) == ("a", ["b"])
    analyst = _step(trace, "gear2-analyst")["calls"]
    assert {c["backend"] for c in analyst} == {"a"} and all(c["family"] == "smollm-a" for c in analyst)
    assert "**Lineage: different**" in sorted(trace.glob(f"[0-9][0-9]-{VERIFY}.md"))[0].read_text()
