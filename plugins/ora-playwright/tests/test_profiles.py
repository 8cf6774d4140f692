"""Selector profiles: the built-ins validate, a user's TOML profile loads, bad input names the field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ora_playwright.backend import render_prompt
from ora_playwright.profiles import BUILTIN_PROFILES, load_profile

from ora_core.api import ConfigError, Message


@pytest.mark.parametrize("name", sorted(BUILTIN_PROFILES))
def test_every_builtin_profile_validates_and_knows_its_error_text(name: str) -> None:
    profile = load_profile(name)
    assert profile.url.startswith("https://") and profile.input and profile.reply and profile.login_wall
    assert set(profile.reply_error_text) >= {"session_expired", "rate_limited", "unavailable"}


def test_a_user_profile_file_loads_and_overrides_apply(tmp_path: Path) -> None:
    path = tmp_path / "mysite.toml"
    path.write_text('url = "http://127.0.0.1:1/chat"\ninput = "#in"\nreply = ".bot"\n')
    profile = load_profile("generic", str(path), {"stable_ms": 200})
    assert (profile.name, profile.input, profile.stable_ms, profile.send) == ("mysite", "#in", 200, None)


def test_bad_profiles_are_refused_with_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('url = "x"\ninput = "#in"\n')
    with pytest.raises(ConfigError, match=r"bad\.toml.*reply: Field required"):
        load_profile("generic", str(path))
    path.write_text('url = "x"\ninput = "#in"\nreply = ".r"\n[reply_error_text]\nrate_limited = ["(unclosed"]\n')
    with pytest.raises(ConfigError, match="bad regular expression"):
        load_profile("generic", str(path))
    with pytest.raises(ConfigError, match="unknown selector profile 'chatgtp'"):
        load_profile("chatgtp")
    with pytest.raises(ConfigError, match="needs options.profile_file"):
        load_profile("generic")
    with pytest.raises(ConfigError, match=r"options\.selectors"):
        load_profile("chatgpt", overrides={"stable_ms": 1})


def test_the_system_text_leads_the_typed_prompt() -> None:
    text = render_prompt([Message(role="system", content="RULES"), Message(role="user", content="Q?")])
    assert text == "RULES\n\n---\n\nQ?"


def test_registering_the_plugin_does_not_import_playwright() -> None:
    code = "import sys, ora_playwright; print('playwright' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
