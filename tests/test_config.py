"""Configuration: lookup order, environment overrides, validation messages, hash."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ora_core.kernel.config import load_config, render_config
from ora_core.kernel.errors import ConfigError


@pytest.fixture(autouse=True)
def isolated_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No real user config dir, no stray ORA_* variables."""
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    for var in [v for v in __import__("os").environ if v.startswith("ORA")]:
        monkeypatch.delenv(var)
    return home


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_bundled_default_loads_and_has_a_stable_hash(tmp_path: Path) -> None:
    first = load_config(env={}, cwd=tmp_path)
    second = load_config(env={}, cwd=tmp_path)
    assert first.hash == second.hash and len(first.hash) == 16
    assert first.sources == ["bundled default (default_config.toml)"]
    assert first.config.backends["local"].type == "local-llm"
    assert first.config.verification.verifier == "grounding"


def test_lookup_order_explicit_then_env_then_cwd_then_user_dir(tmp_path: Path,
                                                             isolated_user_config: Path) -> None:
    user = write(isolated_user_config / "ora" / "ora.toml", "[retrieval]\nk = 2\n")
    cwd = tmp_path / "work"
    local = write(cwd / "ora.toml", "[retrieval]\nk = 3\n")
    env_file = write(tmp_path / "env.toml", "[retrieval]\nk = 4\n")
    explicit = write(tmp_path / "explicit.toml", "[retrieval]\nk = 5\n")

    assert load_config(explicit, env={"ORA_CONFIG": str(env_file)}, cwd=cwd).config.retrieval.k == 5
    assert load_config(env={"ORA_CONFIG": str(env_file)}, cwd=cwd).config.retrieval.k == 4
    assert load_config(env={}, cwd=cwd).config.retrieval.k == 3
    resolved = load_config(env={}, cwd=tmp_path)
    assert resolved.config.retrieval.k == 2
    assert resolved.sources[-1] == str(user)
    assert str(local) not in resolved.sources


def test_a_file_changes_the_hash(tmp_path: Path) -> None:
    base = load_config(env={}, cwd=tmp_path).hash
    changed = load_config(write(tmp_path / "c.toml", "[retrieval]\nk = 9\n"), env={}, cwd=tmp_path).hash
    assert base != changed


def test_environment_overrides_a_single_field_and_says_so(tmp_path: Path) -> None:
    resolved = load_config(env={"ORA__RETRIEVAL__K": "7", "ORA__TRACE__ROOT": "/tmp/traces-x"}, cwd=tmp_path)
    assert resolved.config.retrieval.k == 7
    assert str(resolved.config.trace.root) == "/tmp/traces-x"
    assert "ORA__RETRIEVAL__K" in resolved.sources[-1]


def test_a_malformed_file_names_the_file_and_the_problem(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.toml", "[retrieval]\nk = = 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad, env={}, cwd=tmp_path)
    message = str(info.value)
    assert message.startswith(f"{bad}: malformed TOML: ")
    assert "line 2" in message


def test_an_unknown_key_is_an_error_with_a_did_you_mean(tmp_path: Path) -> None:
    bad = write(tmp_path / "typo.toml", "[trace]\nenabeld = false\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad, env={}, cwd=tmp_path)
    assert str(info.value) == f"{bad}: trace.enabeld: unknown key; did you mean 'enabled'?"
    assert info.value.field == "trace.enabeld"


def test_an_unknown_section_lists_the_known_keys(tmp_path: Path) -> None:
    bad = write(tmp_path / "typo.toml", "[retreival]\nk = 3\n")
    with pytest.raises(ConfigError, match=r"retreival: unknown key; did you mean 'retrieval'\?"):
        load_config(bad, env={}, cwd=tmp_path)


def test_a_wrong_type_names_the_field_path_and_the_value(tmp_path: Path) -> None:
    bad = write(tmp_path / "type.toml", '[retrieval]\nk = "five"\n')
    with pytest.raises(ConfigError) as info:
        load_config(bad, env={}, cwd=tmp_path)
    assert str(info.value).startswith(f"{bad}: retrieval.k: Input should be a valid integer")
    assert "'five'" in str(info.value)


def test_a_bad_backend_field_names_its_table(tmp_path: Path) -> None:
    bad = write(tmp_path / "b.toml", '[backends.local]\ntemperature = 9\n')
    with pytest.raises(ConfigError, match=r"backends\.local\.temperature: Input should be less than or equal to 2"):
        load_config(bad, env={}, cwd=tmp_path)


def test_a_bad_environment_override_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"retrieval\.k \(from ORA__RETRIEVAL__K\): Input should be a valid integer"):
        load_config(env={"ORA__RETRIEVAL__K": "lots"}, cwd=tmp_path)
    with pytest.raises(ConfigError, match=r"retrieval\.kk \(from ORA__RETRIEVAL__KK\): unknown key; did you mean 'k'"):
        load_config(env={"ORA__RETRIEVAL__KK": "3"}, cwd=tmp_path)


def test_a_role_on_an_unconfigured_backend_is_an_error(tmp_path: Path) -> None:
    bad = write(tmp_path / "r.toml", '[roles]\ndepth = "gpt"\n')
    with pytest.raises(ConfigError) as info:
        load_config(bad, env={}, cwd=tmp_path)
    assert "roles.depth" in str(info.value)
    assert "role 'depth' uses backend 'gpt', which is not configured (configured backends: local)" in str(info.value)


def test_a_missing_explicit_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--config names a file that does not exist"):
        load_config(tmp_path / "nope.toml", env={}, cwd=tmp_path)


def test_secrets_are_masked_when_shown(tmp_path: Path) -> None:
    cfg = write(tmp_path / "s.toml", '[backends.remote]\ntype = "openai"\napi_key = "sk-very-secret-1234"\n')
    resolved = load_config(cfg, env={}, cwd=tmp_path)
    assert resolved.secrets() == ["sk-very-secret-1234"]
    shown = render_config(resolved)
    assert "sk-very-secret-1234" not in shown and "**********" in shown
    assert shown.startswith(f"# config hash: {resolved.hash}\n")


def test_ora_config_show_prints_the_resolved_configuration_and_its_hash(tmp_path: Path) -> None:
    cfg = write(tmp_path / "c.toml", "[retrieval]\nk = 8\n")
    out = subprocess.run([sys.executable, "-m", "ora_core.cli", "--config", str(cfg), "config", "show"],
                         capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    expected_hash = load_config(cfg, env={}, cwd=tmp_path).hash
    assert out.splitlines()[0] == f"# config hash: {expected_hash}"
    assert "k = 8" in out


def test_ora_config_show_reports_a_malformed_file_and_exits_1(tmp_path: Path) -> None:
    cfg = write(tmp_path / "c.toml", "[trace]\nenabeld = true\n")
    proc = subprocess.run([sys.executable, "-m", "ora_core.cli", "--config", str(cfg), "config", "show"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1
    assert f"ora: {cfg}: trace.enabeld: unknown key; did you mean 'enabled'?" in proc.stderr
