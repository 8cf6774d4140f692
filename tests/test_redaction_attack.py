"""Issue 13, item 1, as an attacker tests it: every kind of secret configured against a real server on
127.0.0.1 that echoes the credentials it receives (``Authorization``, ``X-Api-Key``, ``Cookie``, the
query string, Basic auth decoded) in its 401 and 500 bodies and in the text of its successful answers;
``ora`` run as a user runs it (a subprocess per command: ``ora run`` as text and ``--json`` through turns
that fail and succeed, ``ora config show`` in both formats, ``ora models list --check`` as a table and as
JSON); then every file under the trace root and every captured stream is searched for every spelling of
the secret. Zero hits.

Observed on main before this: the header credential, the URL password and the echoed key were in
``turn.json``, ``step-health.json``, ``contingencies.jsonl``, the step files, ``config show``, the
``Diagnostic:`` block, the ``--json`` result and ``models list --check``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "faults"))

from servers import EchoServer  # noqa: E402

PROMPT = "Why did the Roman Empire fall?"
ENV_VAR = "ORA_ATTACK_API_KEY"


@dataclass
class Attack:
    """One configuration: the secret, where it is configured, and the spellings it must never take."""

    kind: str
    secret: str
    backend_type: str = "openai"
    api_key: str | None = None
    api_key_env: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    userinfo: str = ""
    query: str = ""
    env: dict[str, str] = field(default_factory=dict)

    def forms(self) -> set[str]:
        """Every spelling of the secret an output could carry."""
        forms = {self.secret, quote(self.secret, safe=""), json.dumps(self.secret)[1:-1]}
        if self.userinfo:
            user, _, password = self.userinfo.partition(":")
            forms.add(base64.b64encode(f"{user}:{password}".encode()).decode())
        return forms

    def backend(self, name: str, url: str, fallbacks: list[str]) -> str:
        lines = [f"[backends.{name}]", f'type = "{self.backend_type}"', 'model = "echo-model"', f'family = "{name}"',
                 "max_retries = 0", f"base_url = {json.dumps(url)}", f"fallbacks = {json.dumps(fallbacks)}"]
        if self.api_key is not None:
            lines.append(f"api_key = {json.dumps(self.api_key)}")
        if self.api_key_env:
            lines.append(f'api_key_env = "{ENV_VAR}"')
        if self.headers:
            lines.append(f"[backends.{name}.options.headers]")
            lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in self.headers.items()]
        return "\n".join(lines) + "\n"


def _secret(tag: str) -> str:
    return f"{tag}{uuid.uuid4().hex}"


def attacks() -> list[Attack]:
    key, env_key, bearer, xkey, cookie = (_secret("sk-atk-"), _secret("sk-env-"), _secret("brr-"), _secret("xk-"),
                                          _secret("ck-"))
    password, query_key, anthropic_key = _secret("pw-"), _secret("qk-"), _secret("sk-ant-atk-")
    return [
        Attack("api_key", key, api_key=key),
        Attack("api_key_env", env_key, api_key_env=True, env={ENV_VAR: env_key}),
        Attack("headers.Authorization", bearer, headers={"Authorization": f"Bearer {bearer}"}),
        Attack("headers.X-Api-Key", xkey, headers={"X-Api-Key": xkey}),
        Attack("headers.Cookie", cookie, headers={"Cookie": f"session={cookie}; theme=dark"}),
        Attack("base_url userinfo", password, userinfo=f"attacker:{password}"),
        Attack("base_url ?api_key=", query_key, query=f"api_key={query_key}"),
        Attack("anthropic api_key (x-api-key)", anthropic_key, backend_type="anthropic", api_key=anthropic_key),
    ]


ATTACKS = attacks()


@pytest.fixture(scope="module")
def echo_server() -> Iterator[EchoServer]:
    with EchoServer() as server:
        yield server  # type: ignore[misc]


def config_text(attack: Attack, server: EchoServer, trace_root: Path) -> str:
    """``phase_a`` on a backend that answers (echoing the secret in its answer); the analyst on one
    that refuses (401, echoing), falling back to one that fails (500, echoing), then to the one that
    answers; the verifiers on the failing one. ``down`` (set by ``ORA__ROLES__ANALYST``) fails
    without a way out: the turn halts and prints its diagnostic."""
    def url(behaviour: str) -> str:
        return server.url(behaviour, userinfo=attack.userinfo, query=attack.query)

    return (f'[trace]\nroot = {json.dumps(str(trace_root))}\n'
            "[retrieval.streams]\nconcept = false\nconversation = false\nrelationship = false\n"
            "[pipeline]\nwarmup = false\n"
            '[verification]\nverifier = "model"\nfinal_verifier = "model"\n'
            '[roles]\nanalyst = "refuses"\nverifier = "fails"\nfinal_verifier = "fails"\n'
            + attack.backend("local", url("ok"), [])
            + attack.backend("refuses", url("401"), ["fails", "local"])
            + attack.backend("fails", url("500"), [])
            + attack.backend("down", url("401"), ["fails"]))


def ora(config: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ora_core.cli", "-c", str(config), *args], capture_output=True,
                          text=True, env=env, timeout=120, cwd=config.parent)


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.kind for a in ATTACKS])
def test_the_secret_scan_finds_nothing_in_any_file_or_stream(attack: Attack, echo_server: EchoServer,
                                                              tmp_path: Path) -> None:
    trace_root = tmp_path / "traces"
    config = tmp_path / "ora.toml"
    config.write_text(config_text(attack, echo_server, trace_root))
    env = {**os.environ, **attack.env, "ORA_PLUGIN_CACHE": "off"}
    down = {**env, "ORA__ROLES__ANALYST": "down"}
    before = len(echo_server.requests)
    runs = {
        "run (text; fails, falls back, succeeds)": ora(config, "run", "--mode", "standard", PROMPT, env=env),
        "run --json (fails, falls back, succeeds)": ora(config, "run", "--mode", "standard", "--json", PROMPT, env=env),
        "run (text; halts)": ora(config, "run", "--mode", "standard", PROMPT, env=down),
        "run --json (halts)": ora(config, "run", "--mode", "standard", "--json", PROMPT, env=down),
        "config show": ora(config, "config", "show", env=env),
        "config show --json": ora(config, "config", "show", "--json", env=env),
        "models list --check": ora(config, "models", "list", "--check", env=env),
        "models list --check --json": ora(config, "models", "list", "--check", "--json", env=env),
    }
    # The attack happened: the server received the secret and echoed it back.
    seen = json.dumps(echo_server.requests[before:])
    assert any(form in seen for form in attack.forms()), f"the server never received the {attack.kind} secret"
    # The commands did what they were asked (else an empty output would prove nothing).
    results = {name: json.loads(p.stdout) for name, p in runs.items() if "--json" in name and "run" in name}
    ok, halted = results["run --json (fails, falls back, succeeds)"], results["run --json (halts)"]
    assert ok["status"] in ("ok", "degraded") and ok["answer"], runs["run (text; fails, falls back, succeeds)"].stderr
    assert [c["error"]["kind"] for c in ok["runtime_role_models"] if c["error"]][:2] == ["auth", "unavailable"]
    assert halted["status"] == "halted" and halted["diagnostic"]
    assert "Diagnostic:" in runs["run (text; halts)"].stderr
    assert runs["models list --check"].returncode == 1 and "UNREACHABLE" in runs["models list --check"].stdout
    assert "[backends.refuses]" in runs["config show"].stdout
    # Zero hits: every stream of every command, every file under the trace root.
    files = [p for p in trace_root.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"turn.json", "step-health.json", "contingencies.jsonl"} <= names and len(files) > 20
    hits = [f"{name} ({stream})" for name, p in runs.items() for stream, text in (("stdout", p.stdout),
                                                                                   ("stderr", p.stderr))
            if any(form in text for form in attack.forms())]
    hits += [str(p.relative_to(trace_root)) for p in files
             if any(form.encode() in p.read_bytes() for form in attack.forms())]
    assert hits == [], f"the {attack.kind} secret leaked into: {hits}"
    assert "[REDACTED" in runs["run --json (fails, falls back, succeeds)"].stdout + runs["config show"].stdout \
        or "**********" in runs["config show"].stdout
