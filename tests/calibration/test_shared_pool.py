"""``Runtime(pool=...)`` / ``Ora(pool=...)``: one backend pool shared by turns on configurations that
differ outside ``[backends]`` and ``[roles]`` (a calibration's per-pair collections): one built backend,
one tokens-per-minute budget across them. A pool that does not fit the configuration is refused, named."""

from __future__ import annotations

from pathlib import Path

import pytest

from ora_core.engine.app import Ora
from ora_core.engine.runtime import Runtime
from ora_core.kernel.errors import ConfigError
from ora_core.testing import make_host, scripted_config

REPLY = "Hello. Nothing here needs a source."


def config(root: Path, **more):
    return scripted_config(root, default=REPLY, plugins={"trace-fs": {"fsync": False}}, **more)


def tokens(result) -> int:
    return sum(c.prompt_tokens + c.completion_tokens for c in result.runtime_role_models)


def test_two_instances_on_different_configurations_share_one_backend_and_one_token_budget(host, tmp_path):
    a = Ora(host=host, config=config(tmp_path / "a"))
    b = Ora(host=host, config=config(tmp_path / "b", retrieval={"k": 3}), pool=a.pool)
    alone = Ora(host=host, config=config(tmp_path / "c"))
    assert a.config.hash != b.config.hash and b.pool is a.pool and alone.pool is not a.pool
    first, second = a.run("Hello!"), b.run("Hello!")
    assert first.runtime_role_models and second.runtime_role_models
    backend = a.pool.get("local")
    assert b.pool.get("local") is backend  # built once, for both
    assert len(backend.calls) == len(first.runtime_role_models) + len(second.runtime_role_models)
    assert a.pool.budget.used("local") == tokens(first) + tokens(second)  # one budget saw both turns
    third = alone.run("Hello!")
    assert alone.pool.budget.used("local") == tokens(third)  # the control: an unshared pool counts its own
    assert a.pool.budget.used("local") == tokens(first) + tokens(second)


def test_a_pool_for_other_backends_roles_or_plugins_is_refused_naming_what_differs(host, tmp_path):
    pool = Ora(host=host, config=config(tmp_path / "a")).pool
    other_model = config(tmp_path / "b", backends={"local": {"model": "scripted-2"}})
    with pytest.raises(ConfigError, match=r"\[backends\] differ \(local\)"):
        Ora(host=host, config=other_model, pool=pool)
    spare = {"spare": {"type": "scripted", "model": "scripted-1", "family": "scripted"}}
    other_roles = config(tmp_path / "c", backends=spare, roles={"challenger": "spare"})
    with pytest.raises(ConfigError, match=r"\[roles\] differ \(challenger\)"):
        Runtime(host=host, resolved=other_roles, pool=pool)
    import ora_scripted

    with pytest.raises(ConfigError, match="another plugin host"):
        Runtime(host=make_host(ora_scripted), resolved=config(tmp_path / "d"), pool=pool)
