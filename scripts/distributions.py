"""Every distribution this checkout builds, and the one version they all carry.

The checkout holds ora-core (the root), the first-party plugins (``plugins/*``), the contributed
examples (``contrib/*``) and the meta-distribution of the default set (``meta/*``): every directory
there with a ``pyproject.toml`` is a distribution, so one added later (``plugins/ora-serve``) is
covered without editing anything here. ``nox -s build`` builds them, ``tests/test_versions.py``
checks that their versions move together, ``python scripts/set_version.py X.Y.Z`` moves them.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The directories whose sub-directories with a pyproject.toml are distributions (beside the root's).
GROUPS = ("plugins", "contrib", "meta")
#: ``version = "..."`` in a pyproject's ``[project]`` table, and ``__version__ = "..."`` in a module.
PROJECT_VERSION = re.compile(r'^(version\s*=\s*")([^"]+)(")', re.M)
MODULE_VERSION = re.compile(r'^(__version__\s*=\s*")([^"]+)(")', re.M)
#: A pin of a first-party distribution in the meta-distribution: ``"ora-x==1.2.3"`` (extras allowed).
FIRST_PARTY_PIN = re.compile(r'("ora-[a-z0-9-]+(?:\[[a-z0-9,]+\])?==)([^"]+)(")')


def distribution_dirs(root: Path = ROOT) -> list[Path]:
    """The root, then every ``<group>/<name>/`` holding a pyproject.toml, in name order."""
    found = [root]
    for group in GROUPS:
        found += sorted(p.parent for p in (root / group).glob("*/pyproject.toml"))
    return found


def project(directory: Path) -> dict:
    """The ``[project]`` table of ``directory``'s pyproject.toml."""
    return tomllib.loads((directory / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def core_version(root: Path = ROOT) -> str:
    return str(project(root)["version"])


def version_modules(directory: Path, root: Path = ROOT) -> list[Path]:
    """The modules of a distribution that state its version as ``__version__ = "..."`` (its own
    packages only: a plugin's tests and the root's plugins/ are not its modules)."""
    candidates = [root / "ora_core" / "__init__.py"] if directory == root else sorted(directory.glob("*/__init__.py"))
    return [p for p in candidates if "tests" not in p.parts and MODULE_VERSION.search(p.read_text(encoding="utf-8"))]


def changelog_latest(root: Path = ROOT) -> str:
    """The version of CHANGELOG.md's latest released entry (``## [X.Y.Z] - date``)."""
    text = (root / "CHANGELOG.md").read_text(encoding="utf-8")
    found = re.search(r"^## \[(\d+\.\d+\.\d+[^\]]*)\]", text, re.M)
    if found is None:
        raise ValueError("CHANGELOG.md has no '## [X.Y.Z] - YYYY-MM-DD' entry")
    return found.group(1)
