"""Meta-tests (datasette's habit): every hookspec is documented in docs/ and has a test."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from ora_core.kernel import hookspecs

REPO = Path(__file__).resolve().parents[1]
THIS_FILE = Path(__file__).resolve()


def hook_names() -> list[str]:
    return sorted(name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
                  if getattr(fn, "ora_spec", None) is not None)


def documented_hooks(docs: Path) -> set[str]:
    found = set()
    for page in docs.glob("**/*.md"):
        found.update(re.findall(r"^#{2,3} `(ora_\w+)\(", page.read_text(), flags=re.M))
    return found


def named_tests(roots: list[Path]) -> set[str]:
    """The names of every test function under ``roots`` (datasette's rule: a hook is tested when
    a test is *named* for it, not when its name merely appears somewhere in a test file)."""
    found: set[str] = set()
    for root in roots:
        for test_file in root.glob("**/test_*.py"):
            if test_file.resolve() == THIS_FILE or ".venv" in test_file.parts:
                continue
            tree = ast.parse(test_file.read_text())
            found.update(node.name for node in ast.walk(tree)
                         if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"))
    return found


def hooks_named_in_tests(roots: list[Path], names: list[str]) -> set[str]:
    tests = named_tests(roots)
    return {n for n in names if any(re.search(rf"(^|_){n}(_|$)", t) for t in tests)}


TEST_ROOTS = [REPO / "tests", REPO / "plugins", REPO / "contrib"]


def test_there_are_hookspecs_to_check() -> None:
    assert len(hook_names()) >= 9


@pytest.mark.parametrize("name", hook_names())
def test_every_hookspec_has_a_docstring_and_typed_arguments(name: str) -> None:
    fn = getattr(hookspecs, name)
    assert (fn.__doc__ or "").strip(), f"{name} has no docstring"
    for param in inspect.signature(fn).parameters.values():
        assert param.annotation is not inspect.Parameter.empty, f"{name}({param.name}) is untyped"


@pytest.mark.parametrize("name", hook_names())
def test_every_hookspec_has_a_section_in_docs(name: str) -> None:
    assert name in documented_hooks(REPO / "docs"), f"docs/ has no '## `{name}(...)`' section"


@pytest.mark.parametrize("name", hook_names())
def test_every_hookspec_has_a_test_named_for_it(name: str) -> None:
    assert name in hooks_named_in_tests(TEST_ROOTS, hook_names()), f"no test function is named for {name}"


def test_the_meta_checks_would_catch_an_undocumented_untested_hook(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "hooks.md").write_text("## `ora_documented(register)`\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "def test_ora_documented_works(): pass\n"
        "def test_something_else(): ora_forgotten  # mentioned, not named: does not count\n")
    assert documented_hooks(tmp_path / "docs") == {"ora_documented"}
    names = ["ora_documented", "ora_forgotten"]
    assert hooks_named_in_tests([tmp_path / "tests"], names) == {"ora_documented"}


def documented_signatures(docs: Path) -> dict[str, list[str]]:
    """``hook -> its arguments`` as the docs' section headings give them (``## `ora_x(a, b)` ``)."""
    found: dict[str, list[str]] = {}
    for page in docs.glob("**/*.md"):
        for name, args in re.findall(r"^#{2,3} `(ora_\w+)\(([^)]*)\)`", page.read_text(), flags=re.M):
            found[name] = [a.strip() for a in args.split(",") if a.strip()]
    return found


@pytest.mark.parametrize("name", hook_names())
def test_every_hook_s_documented_arguments_are_the_hookspec_s(name: str) -> None:
    documented = documented_signatures(REPO / "docs").get(name)
    actual = list(inspect.signature(getattr(hookspecs, name)).parameters)
    assert documented == actual, \
        f"docs say {name}({', '.join(documented or [])}), the hookspec is {name}({', '.join(actual)})"


def test_a_register_call_a_hook_s_docs_section_shows_is_the_one_its_hookspec_shows() -> None:
    """Where a hook's section in docs/hooks.md shows its ``register(...)`` call, the hookspec's
    docstring shows the same call (they disagreed on the mode packs' ``name=``)."""
    text = (REPO / "docs" / "hooks.md").read_text()
    sections = re.split(r"^## `(ora_\w+)\(", text, flags=re.M)
    checked = 0
    for name, body in zip(sections[1::2], sections[2::2], strict=True):
        paragraphs = body.split("\n\n")
        first = paragraphs[1] if len(paragraphs) > 1 else ""  # the paragraph under the heading
        shown = re.findall(r"`(register\([^`]*\))`", first)
        if not shown or not hasattr(hookspecs, name):
            continue
        checked += 1
        doc = getattr(hookspecs, name).__doc__ or ""
        assert f"``{shown[0]}``" in doc, f"docs/hooks.md shows {shown[0]} for {name}; its hookspec says: {doc[:160]!r}"
    assert checked >= 3


def test_every_signal_kind_the_engine_acts_on_has_its_effect_stated_in_code_and_docs() -> None:
    """One truth: the kinds of ``SignalKind`` are the ones the engine acts on; each has its effect in
    ``SIGNAL_EFFECTS`` and a row in docs/hooks.md's table, and the table has no other kind."""
    from ora_core.kernel.signals import SIGNAL_EFFECTS, SignalKind

    assert set(SIGNAL_EFFECTS) == set(SignalKind)
    text = (REPO / "docs" / "hooks.md").read_text()
    table = text.split("### Signal kinds", 1)[1].split("\n\n")[2]  # the table under the heading's paragraph
    rows = set(re.findall(r"^\| `(\w+)` \|", table, flags=re.M))
    assert rows == {k.value for k in SignalKind}, f"docs/hooks.md's table has {sorted(rows)}"


def test_the_engine_picks_no_detector_by_its_name() -> None:
    """The engine acts on signal kinds, never on a detector's name (the direct gear once picked
    ``clock-claims`` by name)."""
    offenders = []
    for path in (REPO / "ora_core" / "engine").rglob("*.py"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\.name\s*==\s*[\"'][a-z-]+[\"']", line) and "detector" in line.lower() + path.name:
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []
