"""``ora --version``: ora-core's version; with ``-v``, every installed Ora distribution and its version.

Every first-party distribution moves with ora-core's version (CHANGELOG.md): a row whose version
differs from ora-core's is marked, so a stale plugin left by an earlier install is seen at once.
"""

from __future__ import annotations

import typer

from ora_core.kernel.distributions import CORE_DISTRIBUTION, OraDistribution, installed_version, ora_distributions


def version_lines(verbose: bool) -> list[str]:
    from ora_core import __version__

    core = installed_version(CORE_DISTRIBUTION) or __version__
    if not verbose:
        return [f"{CORE_DISTRIBUTION} {core}"]
    rows = ora_distributions()
    if not any(d.name == CORE_DISTRIBUTION for d in rows):  # run from a checkout on sys.path, not installed
        rows.insert(0, OraDistribution(name=CORE_DISTRIBUTION, version=core, entry_points=(), why="core"))
    width = max(len(d.name) for d in rows)
    lines = []
    for dist in rows:
        what = dist.why if not dist.entry_points else f"plugin: {', '.join(dist.entry_points)}"
        mark = "" if dist.version == core else f"  (differs from {CORE_DISTRIBUTION} {core})"
        lines.append(f"{dist.name.ljust(width)}  {dist.version}  {what}{mark}")
    return lines


def print_version(verbose: bool) -> None:
    typer.echo("\n".join(version_lines(verbose)))
