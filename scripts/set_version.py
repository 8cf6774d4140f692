"""Move every distribution of this checkout to one version (they move together; CHANGELOG.md says
what changed in it):

    python scripts/set_version.py 0.4.0

Rewrites ``version`` in every pyproject.toml (``scripts/distributions.py`` lists them), every
``__version__`` of their packages, and the meta-distributions' pins of first-party distributions.
CHANGELOG.md is written by hand; ``tests/test_versions.py`` fails until its latest entry is the version.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from distributions import (  # noqa: E402 - the sibling module, found through the path set above
    FIRST_PARTY_PIN,
    MODULE_VERSION,
    PROJECT_VERSION,
    distribution_dirs,
    version_modules,
)

VERSION = re.compile(r"^\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?$")


def set_version(version: str) -> list[Path]:
    changed: list[Path] = []
    for directory in distribution_dirs():
        pyproject = directory / "pyproject.toml"
        text = pyproject.read_text(encoding="utf-8")
        new = PROJECT_VERSION.sub(rf"\g<1>{version}\g<3>", text, count=1)
        if directory.parent.name == "meta":
            new = FIRST_PARTY_PIN.sub(rf"\g<1>{version}\g<3>", new)
        for path, before, after in [(pyproject, text, new),
                                    *((m, m.read_text(encoding="utf-8"), None) for m in version_modules(directory))]:
            after = after if after is not None else MODULE_VERSION.sub(rf"\g<1>{version}\g<3>", before, count=1)
            if after != before:
                path.write_text(after, encoding="utf-8")
                changed.append(path)
    return changed


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not VERSION.match(argv[0]):
        print("usage: python scripts/set_version.py X.Y.Z  (a release version, e.g. 0.4.0)", file=sys.stderr)
        return 2
    for path in set_version(argv[0]):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
