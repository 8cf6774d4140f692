"""A backend type no loaded plugin registers: the error lists the registered types and names the
first-party distribution providing it with the command that installs it (``ora_core/kernel/providers.py``),
and the kernel's table of first-party names agrees with what the installed first-party plugins register."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ora_core.kernel.errors import ConfigError
from ora_core.kernel.plugins import PluginHost
from ora_core.kernel.providers import FIRST_PARTY, missing_hint

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def loaded_host() -> PluginHost:
    host = PluginHost(env={})
    host.load_entrypoints()
    return host


def test_every_first_party_name_in_the_table_is_registered_by_that_distribution(loaded_host: PluginHost) -> None:
    for (kind, name), distribution in FIRST_PARTY.items():
        component = loaded_host.registry[kind].get(name)
        assert component is not None, f"{kind} {name!r} is not registered by any installed plugin"
        assert loaded_host.records[component.plugin].distribution == distribution, (kind, name)


def test_every_backend_type_a_first_party_plugin_registers_is_in_the_table(loaded_host: PluginHost) -> None:
    first_party = {tomllib.loads(p.read_text())["project"]["name"] for p in REPO.glob("plugins/*/pyproject.toml")}
    for kind in ("backend", "embedder"):
        for name, component in loaded_host.registry[kind].items():
            distribution = loaded_host.records[component.plugin].distribution
            if distribution in first_party:
                assert FIRST_PARTY.get((kind, name)) == distribution, f"{kind} {name!r} of {distribution}"


def test_a_first_party_type_not_installed_names_the_distribution_and_the_install_command() -> None:
    hint = missing_hint("backend", "anthropic", installed=lambda dist: None)
    assert hint == ("backend 'anthropic' is provided by the first-party distribution ora-anthropic, which is "
                    "not installed: install it with 'ora plugins install ora-anthropic'")


def test_a_first_party_type_installed_but_failed_says_so() -> None:
    hint = missing_hint("backend", "openai", installed=lambda dist: "0.3.0",
                        plugin_status={"ora-openai": "failed: import failed: No module named 'httpx'"})
    assert "ora-openai 0.3.0, which is installed but its plugin is failed: import failed" in hint
    assert "'ora plugins install ora-openai --upgrade'" in hint


def test_a_type_no_first_party_distribution_provides_gets_the_general_hint() -> None:
    hint = missing_hint("backend", "my-engine", installed=lambda dist: None)
    assert hint == ("no first-party distribution provides backend 'my-engine'; install the plugin that does "
                    "with 'ora plugins install <distribution>'")


def test_the_backend_pool_error_lists_the_registered_types_and_the_provider(tmp_path: Path) -> None:
    import ora_scripted

    from ora_core.engine.backends import BackendPool
    from ora_core.testing import make_host, scripted_config

    host = make_host(ora_scripted)
    resolved = scripted_config(tmp_path / "traces")
    config = resolved.config.model_copy(deep=True)
    config.backends["local"] = config.backends["local"].model_copy(update={"type": "anthropic"})
    with pytest.raises(ConfigError) as caught:
        BackendPool(config, host).get("local")
    message = str(caught.value)
    assert "backend 'local' has type 'anthropic', but no installed plugin registers that backend type" in message
    assert "(registered: scripted)" in message
    assert "first-party distribution ora-anthropic" in message
    assert "ora plugins install ora-anthropic" in message


def test_ora_run_on_a_disabled_first_party_backend_says_which_and_why(tmp_path: Path) -> None:
    (tmp_path / "ora.toml").write_text('[backends.local]\ntype = "anthropic"\nmodel = "m"\nfamily = "anthropic"\n'
                                       f'[trace]\nroot = "{tmp_path / "traces"}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    env.update(ORA_DISABLE_PLUGINS="anthropic", XDG_DATA_HOME=str(tmp_path / "data"))
    done = subprocess.run([sys.executable, "-m", "ora_core.cli", "--config", str(tmp_path / "ora.toml"), "run",
                           "--mode", "simple", "What is 2 + 2?"], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "backend 'local' has type 'anthropic', but no installed plugin registers that backend type" in done.stderr
    assert "ora-anthropic" in done.stderr and "its plugin is disabled" in done.stderr
