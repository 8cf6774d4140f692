"""The structure stays true: five floors with arrows only downward, no cycles, no private names
across modules, and plugins that reach Ora only through its public API.

Floors of ``ora_core`` (a module may import its own floor and the ones beneath it), stated once in
``ora_core/kernel/floors.py`` (``python scripts/floors.py`` prints them with their modules):
kernel (0) < kits (1) < engine (2) < api (3) < cli and testing (4). Imports are read with
``ast``: ``import``/``from`` statements anywhere in a module (inside functions too) and string
imports (a string constant that names an ``ora_core`` module, as ``importlib`` targets,
``__import__`` arguments and lazy-export tables hold them).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ora_core.kernel.floors import COUNT_WORDS, FLOOR_NAMES, FLOORS, count

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "ora_core"
FLOOR_DOCS = (REPO / "README.md", CORE / "__init__.py", Path(__file__))
STRING_IMPORT = re.compile(r"^(ora_core(?:\.[A-Za-z_]\w*)*)(?::[A-Za-z_]\w*)?$")
PLUGIN_ALLOWED = ("ora_core", "ora_core.api", "ora_core.api.http", "ora_core.api.text", "ora_core.api.html")
PLUGIN_TEST_ALLOWED = (*PLUGIN_ALLOWED, "ora_core.testing")


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def floor_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "ora_core":
        return None
    if len(parts) == 1:
        return 0  # ora_core/__init__: hookimpl and the version, from the kernel
    return FLOORS.get(parts[1])


def resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports_of(path: Path, module: str) -> Iterator[tuple[str, list[str], int, str]]:
    """``(imported module, imported names, line, how)`` for every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                target = resolve_relative(module, is_package, node.level, node.module)
            names = [a.name for a in node.names]
            yield target, names, node.lineno, f"from {'.' * node.level}{node.module or ''} import {', '.join(names)}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = STRING_IMPORT.match(node.value)
            if match and match.group(1) != "ora_core":
                yield match.group(1), [], node.lineno, f"string import {node.value!r}"


def core_modules() -> dict[str, Path]:
    return {module_name(p, REPO): p for p in CORE.rglob("*.py") if "__pycache__" not in p.parts}


def resolve_target(target: str, names: list[str], known: dict[str, Path]) -> list[str]:
    """The ``ora_core`` modules an import loads: ``from pkg import mod`` loads ``pkg.mod``."""
    out = []
    for name in names:
        if f"{target}.{name}" in known:
            out.append(f"{target}.{name}")
    if target in known and len(out) < len(names):
        out.append(target)
    if not out and target in known:
        out.append(target)
    return out


def core_edges() -> dict[str, set[str]]:
    known = core_modules()
    edges: dict[str, set[str]] = {m: set() for m in known}
    for module, path in known.items():
        for target, names, _line, _how in imports_of(path, module):
            for resolved in resolve_target(target, names, known):
                if resolved != module:
                    edges[module].add(resolved)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def upward_imports(root: Path = REPO) -> list[str]:
    problems = []
    for path in sorted((root / "ora_core").rglob("*.py")):
        module = module_name(path, root)
        own = floor_of(module)
        for target, _names, line, how in imports_of(path, module):
            theirs = floor_of(target)
            if own is None or theirs is None or theirs <= own:
                continue
            problems.append(f"{path.relative_to(root)}:{line}: {how} — the {FLOOR_NAMES[own]} floor imports "
                            f"the {FLOOR_NAMES[theirs]} floor above it")
    return problems


def private_imports(root: Path = REPO) -> list[str]:
    problems = []
    files = [p for p in (root / "ora_core").rglob("*.py")]
    files += [p for p in (root / "plugins").glob("*/*/**/*.py") if "tests" not in p.parts]
    for path in sorted(files):
        if "__pycache__" in path.parts or ".venv" in path.parts:
            continue
        in_plugins = path.is_relative_to(root / "plugins")  # not ora_core/kernel/plugins/
        base = root / "plugins" / path.relative_to(root / "plugins").parts[0] if in_plugins else root
        module = module_name(path, base)
        for target, names, line, how in imports_of(path, module):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            ours = target.split(".")[0] == module.split(".")[0]  # the project's modules, not the stdlib's
            if private and ours and target != module:
                problems.append(f"{path.relative_to(root)}:{line}: {how} — imports private name(s) "
                                f"{', '.join(private)} of another module")
    return problems


def plugin_packages(root: Path = REPO) -> dict[str, Path]:
    """Top-level package name -> distribution directory, for plugins/ and contrib/."""
    found = {}
    for dist in [*sorted((root / "plugins").iterdir()), *sorted((root / "contrib").iterdir())]:
        if not (dist / "pyproject.toml").is_file():
            continue
        for pkg in dist.iterdir():
            if pkg.is_dir() and (pkg / "__init__.py").is_file() and pkg.name != "tests":
                found[pkg.name] = dist
    return found


def plugin_boundary_violations(root: Path = REPO) -> list[str]:
    packages = plugin_packages(root)
    problems = []
    for package, dist in sorted(packages.items()):
        for path in sorted(dist.rglob("*.py")):
            if "__pycache__" in path.parts or ".venv" in path.parts:
                continue
            in_tests = "tests" in path.relative_to(dist).parts or path.name == "conftest.py"
            allowed = PLUGIN_TEST_ALLOWED if in_tests else PLUGIN_ALLOWED
            module = module_name(path, dist)
            for target, _names, line, how in imports_of(path, module):
                top = target.split(".")[0]
                if top == "ora_core" and target not in allowed:
                    problems.append(f"{path.relative_to(root)}:{line}: {how} — a plugin imports Ora only from "
                                    f"{', '.join(allowed)}")
                elif not in_tests and top in packages and top != package:
                    problems.append(f"{path.relative_to(root)}:{line}: {how} — plugin {package!r} imports plugin "
                                    f"{top!r}; plugins never import each other (ask the host for a component)")
    return problems


# --- the checks ----------------------------------------------------------------------------------


def test_every_module_of_ora_core_sits_on_a_floor() -> None:
    unplaced = [m for m in core_modules() if floor_of(m) is None]
    assert unplaced == []


def test_no_floor_imports_a_floor_above_it() -> None:
    assert upward_imports() == []


def test_ora_core_has_no_import_cycle_string_imports_included() -> None:
    assert cycles(core_edges()) == []


def test_no_module_imports_another_modules_private_names() -> None:
    assert private_imports() == []


def test_plugins_import_ora_only_through_its_public_api_and_never_each_other() -> None:
    assert plugin_boundary_violations() == []


# --- the checks would catch what they are for ----------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, source in files.items():
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source, encoding="utf-8")
    return tmp_path


def test_the_layering_check_names_an_upward_and_a_string_import(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "ora_core/__init__.py": "",
        "ora_core/kernel/__init__.py": "",
        "ora_core/kernel/trace.py": "def f():\n    from ora_core.engine import runner\n",
        "ora_core/kernel/lazy.py": "TARGET = 'ora_core.cli.app:main'\n",
        "ora_core/engine/__init__.py": "",
        "ora_core/engine/runner.py": "from ora_core.kernel import trace\n",
    })
    problems = upward_imports(root)
    assert any("kernel/trace.py:2: from ora_core.engine import runner — the kernel floor imports the engine"
               in p for p in problems)
    assert any("kernel/lazy.py:1: string import 'ora_core.cli.app:main'" in p for p in problems)
    assert not any("engine/runner.py" in p for p in problems)


def test_the_cycle_check_finds_a_cycle_through_a_lazy_import() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]


def test_the_private_name_check_names_the_file_and_the_import(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "ora_core/engine/supplement.py": "from ora_core.engine.context import _retrieve, resolve\n",
        "plugins/ora-x/ora_x/__init__.py": "from ora_core.api import Signal\n",
    })
    assert private_imports(root) == ["ora_core/engine/supplement.py:1: from ora_core.engine.context import "
                                     "_retrieve, resolve — imports private name(s) _retrieve of another module"]


def test_the_boundary_check_names_a_kernel_import_and_a_plugin_importing_a_plugin(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "plugins/ora-x/pyproject.toml": "",
        "plugins/ora-x/ora_x/__init__.py": "from ora_core.kernel.models import Signal\nimport ora_y\n",
        "plugins/ora-x/tests/test_x.py": "from ora_core.testing import make_host\nimport ora_y\n",
        "plugins/ora-y/pyproject.toml": "",
        "plugins/ora-y/ora_y/__init__.py": "from ora_core.api import Signal\nfrom ora_core import hookimpl\n",
    })
    (root / "contrib").mkdir()
    problems = plugin_boundary_violations(root)
    assert problems == [
        "plugins/ora-x/ora_x/__init__.py:1: from ora_core.kernel.models import Signal — a plugin imports Ora only "
        "from ora_core, ora_core.api, ora_core.api.http, ora_core.api.text, ora_core.api.html",
        "plugins/ora-x/ora_x/__init__.py:2: import ora_y — plugin 'ora_x' imports plugin 'ora_y'; plugins never "
        "import each other (ask the host for a component)",
    ]


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_each_floor_exists_as_a_folder_or_module(name: str) -> None:
    assert (CORE / name).is_dir() or (CORE / f"{name}.py").is_file()


def test_every_text_that_counts_the_floors_counts_the_ones_the_layering_enforces():
    """The floors are stated once (``ora_core/kernel/floors.py``); a doc that says how many there are
    says that number."""
    number = r"\b(one|two|three|four|five|six|seven|eight) floors\b"
    said = {path.name: re.findall(number, path.read_text(encoding="utf-8"), re.IGNORECASE) for path in FLOOR_DOCS}
    assert all(said.values()), f"a doc that names the floors no longer counts them: {said}"
    wrong = {name: words for name, words in said.items() if any(w.lower() != COUNT_WORDS[count()] for w in words)}
    assert wrong == {}, f"the floors are {count()} ({', '.join(FLOOR_NAMES.values())}), not: {wrong}"


def test_the_floors_script_prints_every_floor_and_module():
    import subprocess
    import sys

    shown = subprocess.run([sys.executable, str(REPO / "scripts" / "floors.py")], capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"ora_core: {count()} floors")
    for floor, name in FLOOR_NAMES.items():
        assert f"floor {floor}: {name} (" in shown.stdout
    assert "    ora_core.engine.lineage\n" in shown.stdout and "    ora_core.kernel.floors\n" in shown.stdout
