"""``ora plugins install SPEC…`` and ``ora plugins uninstall NAME…``: pip in the interpreter that runs
``ora`` (``sys.executable -m pip``), so a plugin lands where ``ora`` will find it whatever the user's
``pip`` on ``PATH`` is (simonw/llm's ``llm install``, for Ora).

After pip, the entry-point cache is rebuilt (and said so), and the plugins of the distributions that
changed are printed as ``ora plugins list`` shows them: their records come from a fresh ``ora plugins
list --json`` (a new interpreter: a module installed a moment ago, an editable install's path, are
seen as the next ``ora`` command will see them). A plugin that fails to load is named with its error
and the command exits 1 after saying what was installed. pip's own output goes to standard error as
pip writes it; its failure is passed on with its exit status, and what it changed (if anything) is
named. pip's ``PIP_*`` environment variables apply as they do to pip. (``ora_core/cli/plugins.py`` adds
the two commands to its group.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any, Optional

import typer

from ora_core.cli.plugin_table import print_plugin_table
from ora_core.cli.state import EXIT_ERROR, echo, echo_err, fail
from ora_core.kernel.distributions import CORE_DISTRIBUTION, ENTRY_POINT_GROUP, canonical, ora_distributions

#: ``python -m <this package>`` runs ``ora`` (the package of this module, not named as a string: the
#: layering test reads a module name in a string as an import).
CLI_PACKAGE = __name__.rpartition(".")[0]


def installed_versions() -> dict[str, str]:
    """Every installed distribution (canonical name -> version), from the metadata on ``sys.path``."""
    import importlib
    from importlib import metadata

    importlib.invalidate_caches()
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = canonical(dist.metadata["Name"] or "")
        if name and name not in found:
            found[name] = dist.version
    return found


def changes(before: dict[str, str], after: dict[str, str]) -> dict[str, tuple[str | None, str | None]]:
    """Distribution -> (version before, version after) for every one added, removed or changed."""
    return {name: (before.get(name), after.get(name)) for name in sorted(set(before) | set(after))
            if before.get(name) != after.get(name)}


def describe_changes(changed: dict[str, tuple[str | None, str | None]]) -> list[str]:
    lines = []
    for name, (old, new) in changed.items():
        if old is None:
            lines.append(f"installed {name} {new}")
        elif new is None:
            lines.append(f"removed {name} {old}")
        else:
            lines.append(f"changed {name} {old} -> {new}")
    return lines


def run_pip(args: Sequence[str]) -> int:
    """``sys.executable -m pip <args>``, its output passed on line by line to standard error (through
    the command's redacting stream); pip's exit status."""
    argv = [sys.executable, "-m", "pip", *args]
    echo_err(f"ora: running {' '.join(argv)}")
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                errors="replace")
    except OSError as exc:
        raise fail(f"cannot run pip in {sys.executable}: {type(exc).__name__}: {exc}") from None
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stderr.write(line)
    sys.stderr.flush()
    return proc.wait()


def refresh_entry_point_cache() -> str:
    """Rebuild the environment's entry-point cache now (``EntryPointCache``), so the next command does not
    pay the scan; what happened to it, in ``describe()``'s words."""
    from ora_core.kernel.plugins import EntryPointCache

    cache = EntryPointCache.for_environment(os.environ, stderr=sys.stderr)
    cache.entry_points(ENTRY_POINT_GROUP)
    return cache.describe()


def fresh_plugin_rows() -> list[dict[str, Any]]:
    """``ora plugins list --json`` in a new interpreter of this environment: the records the next ``ora``
    command will show. A listing that cannot run or parse is a failure of this command, named."""
    argv = [sys.executable, "-m", CLI_PACKAGE, "plugins", "list", "--json"]
    env = {k: v for k, v in os.environ.items() if k not in {"ORA_PLUGINS", "ORA_DISABLE_PLUGINS"}}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise fail(f"the plugins were installed, but listing them failed (exit {done.returncode}): "
                   f"{done.stderr.strip()[-2000:]}")
    try:
        rows = json.loads(done.stdout)
    except ValueError as exc:
        raise fail(f"the plugins were installed, but 'ora plugins list --json' printed no JSON ({exc}): "
                   f"{done.stdout[:500]!r}") from None
    return list(rows)


def report(rows: list[dict[str, Any]], changed: dict[str, tuple[str | None, str | None]], as_json: bool,
           verb: str) -> None:
    """The changed distributions' plugin records (a table, or JSON with the changes), then a summary line;
    exit 1 when one of them failed to load."""
    touched = {name for name, (_, new) in changed.items() if new is not None}
    mine = [row for row in rows if canonical(row["distribution"]) in touched]
    failed = [row for row in mine if row["status"] in {"failed", "incompatible"}]
    with_plugins = {canonical(row["distribution"]) for row in mine}
    no_plugin = sorted(touched - with_plugins)
    if as_json:
        echo(json.dumps({"changed": {n: {"before": o, "after": v} for n, (o, v) in changed.items()},
                         "plugins": mine, "without_plugins": no_plugin}, indent=2))
    elif mine:
        print_plugin_table(mine)
    for name in no_plugin:
        echo_err(f"ora: {name} {changed[name][1]} publishes no 'ora' plugin (a library or a dependency)")
    if failed:
        names = ", ".join(f"{row['name']} ({row['distribution']}): {row['status']}: {row['error']}" for row in failed)
        raise fail(f"{verb}, but {len(failed)} plugin(s) did not load: {names}", EXIT_ERROR)


def plugins_install(
    specs: Optional[list[str]] = typer.Argument(None, help="What pip installs: a name, name==version, a path, a URL."),
    editable: Optional[list[str]] = typer.Option(None, "--editable", "-e", help="A path pip installs editable."),
    upgrade: bool = typer.Option(False, "--upgrade", "-U", help="Upgrade what is already installed."),
    find_links: Optional[list[str]] = typer.Option(None, "--find-links", "-f",
                                                   help="A directory or URL of wheels pip also looks in."),
    no_deps: bool = typer.Option(False, "--no-deps", help="Install without dependencies."),
    as_json: bool = typer.Option(False, "--json", help="Print the changes and the plugins' records as JSON."),
) -> None:
    """Install plugins with pip into the environment that runs ora; print their records."""
    specs, editable, find_links = list(specs or []), list(editable or []), list(find_links or [])
    if not specs and not editable:
        raise fail("nothing to install: give a name, a path or -e PATH (ora plugins install ora-anthropic)", 2)
    args = ["install"]
    args += ["--upgrade"] if upgrade else []
    args += ["--no-deps"] if no_deps else []
    for link in find_links:
        args += ["--find-links", link]
    for path in editable:
        args += ["--editable", path]
    args += specs
    before = installed_versions()
    status = run_pip(args)
    after = installed_versions()
    changed = changes(before, after)
    if status != 0:
        what = "; ".join(describe_changes(changed)) or "the environment is unchanged"
        raise fail(f"pip install failed (exit {status}; its message is above): {what}", EXIT_ERROR)
    for line in describe_changes(changed) or ["nothing changed: every requirement was already installed"]:
        echo_err(f"ora: {line}")
    echo_err(f"ora: {refresh_entry_point_cache()}")
    report(fresh_plugin_rows(), changed, as_json, "installed")


def refused(names: Sequence[str]) -> list[str]:
    """Why each name may not be uninstalled: ora-core, and the distribution that provides ``ora`` itself."""
    from importlib import metadata

    protected = {CORE_DISTRIBUTION: "it is Ora's kernel: every plugin and the 'ora' command need it"}
    for ep in metadata.entry_points(group="console_scripts", name="ora"):
        if ep.dist is not None:
            protected.setdefault(canonical(ep.dist.metadata["Name"]),
                                 f"it provides the 'ora' command ({ep.value}) this uninstall runs from")
    return [f"{name}: refused: {protected[canonical(name)]}" for name in names if canonical(name) in protected]


def plugins_uninstall(
    names: list[str] = typer.Argument(..., help="Distribution names (ora plugins list shows them)."),
    as_json: bool = typer.Option(False, "--json", help="Print the changes as JSON."),
) -> None:
    """Uninstall plugin distributions with pip from the environment that runs ora."""
    problems = refused(names)
    installed = installed_versions()
    problems += [f"{name}: not installed in {sys.prefix}" for name in names if canonical(name) not in installed]
    if problems:
        raise fail("nothing was uninstalled: " + "; ".join(problems))
    before_plugins = {d.name: d for d in ora_distributions()}
    status = run_pip(["uninstall", "--yes", *names])
    changed = changes(installed, installed_versions())
    if status != 0:
        what = "; ".join(describe_changes(changed)) or "the environment is unchanged"
        raise fail(f"pip uninstall failed (exit {status}; its message is above): {what}", EXIT_ERROR)
    echo_err(f"ora: {refresh_entry_point_cache()}")
    removed = {name: before_plugins[name] for name in changed if name in before_plugins}
    if as_json:
        echo(json.dumps({"changed": {n: {"before": o, "after": v} for n, (o, v) in changed.items()},
                         "plugins_removed": {n: list(d.entry_points) for n, d in removed.items()}}, indent=2))
        return
    for line in describe_changes(changed):
        name = line.split()[1]
        plugins = ", ".join(removed[name].entry_points) if name in removed else ""
        echo(line + (f" (plugin(s): {plugins})" if plugins else ""))
