"""The entry-point cache the CLI loads plugins through: the same plugin set as a full scan,
never a stale one (a distribution added, removed or edited is seen at once), a damaged cache
rebuilt and said so, load failures recorded exactly as without it.

Each test lays out real distributions in a temporary directory on ``sys.path`` under an
entry-point group of its own, and keeps the cache file in its temporary directory."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from ora_core.kernel.plugins import EntryPointCache, PluginHost, environment_key
from ora_core.testing import write_distribution

PLUGIN = '''
from ora_core import hookimpl

class Quiet:
    name = "{name}"
    kind = "style"
    layer = "model_output"

    def detect(self, text, ctx):
        return []

@hookimpl
def ora_register_detectors(register):
    register(Quiet())
'''


@pytest.fixture
def group() -> str:
    return f"ora_cache_test_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    return root


def publish(site: Path, group: str, dist: str, ep: str, source: str, version: str = "1.0") -> None:
    module = f"mod_{uuid.uuid4().hex[:8]}"
    write_distribution(site, dist, version=version, modules={f"{module}.py": source}, entry_points={ep: module},
                       group=group)


def cache_at(tmp_path: Path) -> EntryPointCache:
    return EntryPointCache(tmp_path / "cache" / "entry-points.json", stderr=io.StringIO())


def load(group: str, cache: EntryPointCache | None) -> list[dict[str, Any]]:
    host = PluginHost(env={})
    host.load_entrypoints(group, cache=cache)
    return host.summary()


def test_the_cached_scan_loads_the_same_plugins_as_a_full_scan(site: Path, group: str, tmp_path: Path) -> None:
    publish(site, group, "ora-one", "one", PLUGIN.format(name="one-detector"))
    publish(site, group, "ora-two", "two", "raise RuntimeError('boom at import')\n", version="2.5")
    cache = cache_at(tmp_path)
    scanned = load(group, None)
    first = load(group, cache)
    assert cache.status == "miss"
    again = load(group, cache)
    assert cache.status == "hit"
    assert scanned == first == again
    failed = next(r for r in again if r["name"] == "two")
    # a load failure is recorded exactly as without the cache
    assert failed["status"] == "failed" and failed["distribution"] == "ora-two" and failed["version"] == "2.5"
    assert "import failed: RuntimeError: boom at import" in failed["error"]


def test_a_distribution_installed_after_caching_is_loaded_at_once(site: Path, group: str, tmp_path: Path) -> None:
    publish(site, group, "ora-one", "one", PLUGIN.format(name="one-detector"))
    cache = cache_at(tmp_path)
    load(group, cache)
    publish(site, group, "ora-late", "late", PLUGIN.format(name="late-detector"))
    rows = load(group, cache)
    assert cache.status == "miss"
    assert {r["name"] for r in rows} == {"one", "late"}


def test_a_removed_distribution_is_gone_at_once(site: Path, group: str, tmp_path: Path) -> None:
    publish(site, group, "ora-one", "one", PLUGIN.format(name="one-detector"))
    publish(site, group, "ora-gone", "gone", PLUGIN.format(name="gone-detector"))
    cache = cache_at(tmp_path)
    load(group, cache)
    for info in site.glob("ora_gone-*.dist-info"):
        for f in info.iterdir():
            f.unlink()
        info.rmdir()
    assert {r["name"] for r in load(group, cache)} == {"one"}
    assert cache.status == "miss"


def test_an_entry_points_file_edited_in_place_is_seen(site: Path, group: str, tmp_path: Path) -> None:
    publish(site, group, "ora-one", "one", PLUGIN.format(name="one-detector"))
    cache = cache_at(tmp_path)
    load(group, cache)
    (site / "extra_mod.py").write_text(PLUGIN.format(name="extra-detector"))
    (info,) = site.glob("ora_one-*.dist-info")
    eps = info / "entry_points.txt"
    before = eps.stat()
    eps.write_text(eps.read_text() + "extra = extra_mod\n")
    os.utime(eps, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))  # even within one clock tick
    assert {r["name"] for r in load(group, cache)} == {"one", "extra"}
    assert cache.status == "miss"


def test_a_corrupt_cache_is_rebuilt_and_said_on_stderr(site: Path, group: str, tmp_path: Path) -> None:
    publish(site, group, "ora-one", "one", PLUGIN.format(name="one-detector"))
    cache = cache_at(tmp_path)
    expected = load(group, cache)
    assert cache.path is not None
    for damage in (b"{not json", b'{"format": 1, "key": 3}', b'{"format": 1, "key": "k", "groups": {"x": [1]}}',
                   b"[]"):
        cache.path.write_bytes(damage)
        cache.stderr = io.StringIO()
        assert load(group, cache) == expected
        assert cache.status == "rebuilt" and cache.problem
        said = cache.stderr.getvalue()
        assert f"the plugin entry-point cache {cache.path}" in said and "rebuilt from a full scan" in said
        assert load(group, cache) == expected and cache.status == "hit"  # and the rebuilt file serves


def test_a_cache_that_cannot_be_written_is_said_and_the_scan_serves(site: Path, group: str, tmp_path: Path) -> None:
    publish(site, group, "ora-one", "one", PLUGIN.format(name="one-detector"))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cache = EntryPointCache(blocker / "entry-points.json", stderr=io.StringIO())
    assert {r["name"] for r in load(group, cache)} == {"one"}
    assert cache.status == "miss" and "cannot write it" in cache.problem
    assert "cannot write it" in cache.stderr.getvalue()


def test_a_foreign_distribution_finder_bypasses_the_cache(site: Path, group: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    class Finder:
        def find_spec(self, *args: Any) -> None:
            return None

        def find_distributions(self, *args: Any, **kwargs: Any) -> list[Any]:
            return []

    publish(site, group, "ora-one", "one", PLUGIN.format(name="one-detector"))
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder()])
    assert environment_key() is None
    cache = cache_at(tmp_path)
    assert {r["name"] for r in load(group, cache)} == {"one"}
    assert cache.status == "bypassed"
    assert cache.path is not None and not cache.path.exists()


def test_the_cache_is_per_environment_file_and_can_be_turned_off(tmp_path: Path) -> None:
    off = EntryPointCache.for_environment({"ORA_PLUGIN_CACHE": "off"})
    assert off.path is None and off.status == "off"
    named = EntryPointCache.for_environment({"ORA_PLUGIN_CACHE": str(tmp_path / "c.json")})
    assert named.path == tmp_path / "c.json"
    default = EntryPointCache.for_environment({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    if sys.platform.startswith("linux"):
        assert default.path is not None and default.path.parent == tmp_path / "xdg" / "ora"


def ora(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    full_env.update(env)
    return subprocess.run([sys.executable, "-m", "ora_core.cli", *args], capture_output=True, text=True,
                          env=full_env, timeout=120)


@pytest.mark.slow
def test_ora_says_how_the_scan_was_served_and_names_a_corrupt_cache(tmp_path: Path) -> None:
    path = tmp_path / "entry-points.json"
    env = {"ORA_PLUGIN_CACHE": str(path), "ORA_DEBUG_HOOKS": "1"}
    first = ora("plugins", "list", "--json", env=env)
    assert first.returncode == 0, first.stderr
    assert f"ora plugins: entry points: cache miss ({path})" in first.stderr
    second = ora("plugins", "list", "--json", env=env)
    assert f"ora plugins: entry points: cache hit ({path})" in second.stderr
    assert json.loads(second.stdout) == json.loads(first.stdout)
    path.write_text("garbage")
    damaged = ora("plugins", "list", "--json", env={"ORA_PLUGIN_CACHE": str(path)})
    assert damaged.returncode == 0
    assert f"ora: the plugin entry-point cache {path}: not JSON" in damaged.stderr
    assert json.loads(damaged.stdout) == json.loads(first.stdout)


def test_a_bypassed_cache_names_why_no_key_could_be_made(site: Path, group: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    publish(site, group, "ora-one", "one", PLUGIN.format(name="one-detector"))
    unreadable = tmp_path / "locked"
    unreadable.mkdir()
    real_listdir = os.listdir

    def listdir(path: Any = ".") -> list[str]:
        if str(path) == str(unreadable):
            raise PermissionError(13, "Permission denied", str(path))
        return real_listdir(path)

    monkeypatch.setattr(sys, "path", [*sys.path, str(unreadable)])
    monkeypatch.setattr(os, "listdir", listdir)
    cache = cache_at(tmp_path)
    assert {r["name"] for r in load(group, cache)} == {"one"}  # the full scan still finds the plugin
    assert cache.status == "bypassed"
    assert f"no environment key: cannot list {unreadable} on sys.path (PermissionError" in cache.describe()


@pytest.mark.slow
def test_ora_keeps_its_own_entry_point_cache_and_stevedore_writes_none(tmp_path: Path) -> None:
    # stevedore imports the plugins (kernel/plugins/loading.py); the scan is served from Ora's cache only
    listed = ora("plugins", "list", "--json", env={"XDG_CACHE_HOME": str(tmp_path)})
    assert listed.returncode == 0, listed.stderr
    assert len(list((tmp_path / "ora").glob("entry-points-*.json"))) == 1
    assert not (tmp_path / "python-entrypoints").exists()
