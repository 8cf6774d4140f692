"""numpy's BLAS thread count: one by default, ORA_MINILM_THREADS to change it, a warning when
it cannot be applied."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from ora_minilm import MiniLMError, threads

PROBE = """
import json, ora_minilm
t = ora_minilm.get_encoder().blas_threads
print(json.dumps({"requested": t.requested, "applied": t.applied, "threads": t.threads}))
"""


def probe(value: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != threads.ENV}
    if value is not None:
        env[threads.ENV] = value
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_one_blas_thread_by_default_and_the_variable_changes_it():
    assert probe(None) == {"requested": 1, "applied": True, "threads": 1}
    assert probe("2") == {"requested": 2, "applied": True, "threads": 2}
    auto = probe("auto")
    assert auto["requested"] is None and auto["applied"]


@pytest.mark.parametrize("value", ["0", "-1", "many", "1.5"])
def test_a_bad_thread_count_names_the_variable(value: str):
    with pytest.raises(MiniLMError, match=f"environment variable {threads.ENV}: expected a positive integer"):
        threads.requested_threads(value)


def test_without_a_blas_library_the_failure_is_a_warning_and_recorded(monkeypatch: pytest.MonkeyPatch):
    from types import SimpleNamespace

    monkeypatch.setattr(threads, "blas_libraries", lambda: SimpleNamespace(lib_controllers=[]))
    with pytest.warns(RuntimeWarning, match="cannot set numpy's BLAS threads to 1"):
        result = threads.set_blas_threads(1)
    assert not result.applied and "no BLAS library is loaded" in result.detail
