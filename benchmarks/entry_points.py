"""Where the ``ora`` entry points come from: Ora's entry-point cache beside stevedore's, measured.

Ora loads plugins through stevedore's ``ExtensionManager`` but finds the entry points with its own
scan and cache (``ora_core/kernel/plugins/discovery.py``), not stevedore's (``stevedore/_cache.py``).
This prints why, in figures:

1. time, each way in a fresh interpreter (the modules both need already imported; median of
   ``--runs``): the full ``importlib.metadata`` scan, Ora's cache served, stevedore's cache served,
   and what importing stevedore adds to an ``ora`` command;
2. behaviour, on distributions laid out in a temporary directory: whether each cache gives the
   distribution of an entry point, sees an ``entry_points.txt`` edited in place, says anything
   about a damaged or unwritable file, and whether a process sees a plugin installed after its
   first scan.

    .venv/bin/python benchmarks/entry_points.py [--runs 15]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import unittest.mock
import uuid
from pathlib import Path
from typing import Any

DISCOVERY = Path(__file__).resolve().parents[1] / "ora_core" / "kernel" / "plugins" / "discovery.py"
#: What every way needs anyway; ``discovery.py`` loaded from its file (the package would import stevedore).
PRELUDE = ("import sys, time, json, hashlib, importlib.metadata, importlib.util, pluggy\n"
           f"spec = importlib.util.spec_from_file_location('discovery', {str(DISCOVERY)!r})\n"
           "d = sys.modules['discovery'] = importlib.util.module_from_spec(spec); spec.loader.exec_module(d)\n")
WAYS = {
    "full scan (importlib.metadata)": "t = time.perf_counter(); d.scan_entry_points('ora')",
    "Ora's cache, served": "c = d.EntryPointCache(d.Path({ours!r})); t = time.perf_counter(); c.entry_points('ora'); "
                           "assert c.status == 'hit', c.status",
    "stevedore's cache, served (imported beforehand)": "import stevedore._cache as s; t = time.perf_counter(); "
                                                       "s.Cache({theirs!r}).get_group_all('ora')",
    "import stevedore (what loading through it adds)": "t = time.perf_counter(); import stevedore",
}


def timed(snippet: str, runs: int) -> list[float]:
    code = PRELUDE + snippet + "\nprint(time.perf_counter() - t)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    return [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                 env=env).stdout) for _ in range(runs)]


def measure(runs: int, work: Path) -> dict[str, list[float]]:
    ours, theirs = work / "ora-cache.json", work / "stevedore-cache"
    import stevedore._cache as stevedore_cache

    stevedore_cache.Cache(str(theirs)).get_group_all("ora")
    snippets = {label: code.format(ours=str(ours), theirs=str(theirs)) for label, code in WAYS.items()}
    timed(snippets["full scan (importlib.metadata)"].replace("scan_entry_points('ora')", "EntryPointCache("
          f"d.Path({str(ours)!r})).entry_points('ora')"), 1)  # Ora's cache under a fresh interpreter's sys.path
    out: dict[str, list[float]] = {label: [] for label in snippets}
    for _ in range(runs):  # interleaved, so a change of the machine's load hits every way alike
        for label, code in snippets.items():
            out[label] += timed(code, 1)
    return out


PLUGIN = "VALUE = 1\n"


def site_with(group: str, root: Path, names: list[str], dist: str = "ora-demo") -> Path:
    from ora_core.testing import write_distribution

    modules = {f"{name}_mod.py": PLUGIN for name in names}
    write_distribution(root, dist, modules=modules, entry_points={n: f"{n}_mod" for n in names}, group=group)
    return root


def their_cache(directory: Path) -> Any:
    """stevedore's cache in ``directory``, caching on wherever the interpreter lives (see the /tmp row)."""
    from stevedore import _cache as stevedore_cache

    cache = stevedore_cache.Cache(str(directory))
    cache._disable_caching = False
    return cache


def behaviour(work: Path) -> list[tuple[str, str, str]]:
    """``(question, Ora's cache, stevedore's cache)`` rows, each answer observed here."""
    import stevedore._cache as stevedore_cache
    from stevedore import ExtensionManager

    from ora_core.kernel.plugins import EntryPointCache

    rows: list[tuple[str, str, str]] = []
    group = f"ora_bench_{uuid.uuid4().hex[:8]}"
    site = site_with(group, work / "site", ["one"])
    sys.path.insert(0, str(site))
    path = tuple(sys.path)
    ours = EntryPointCache(work / "ours.json", stderr=io.StringIO())
    theirs_dir = work / "theirs"

    found = ours.entry_points(group)
    theirs = their_cache(theirs_dir).get_group_all(group, path=path)
    rows.append(("the distribution of an entry point", f"{found[0].distribution} {found[0].version}",
                 "none kept" if theirs[0].dist is None else str(theirs[0].dist)))

    (info,) = site.glob("*.dist-info")
    eps = info / "entry_points.txt"
    (site / "two_mod.py").write_text(PLUGIN)
    base = 1_700_000_000  # a fixed time, so the result does not hang on where now falls
    os.utime(eps, (base, base))
    ours.entry_points(group)
    their_cache(theirs_dir).get_group_all(group, path=path)
    eps.write_text(eps.read_text() + "two = two_mod\n")
    for seconds in (1, 60):
        os.utime(eps, (base + seconds, base + seconds))
        seen_ours = "two" in [f.entry_point.name for f in ours.entry_points(group)]
        seen_theirs = "two" in [ep.name for ep in their_cache(theirs_dir).get_group_all(group,
                                                                                                       path=path)]
        rows.append((f"an entry point added in place, entry_points.txt {seconds} s newer",
                     "seen" if seen_ours else "NOT seen", "seen" if seen_theirs else "NOT seen (stale)"))

    for damage in (b"{not json", b"[]"):
        for f in theirs_dir.iterdir():
            f.write_bytes(damage)
        assert ours.path is not None
        ours.path.write_bytes(damage)
        ours.stderr = heard = io.StringIO()
        ours.entry_points(group)
        said = "rebuilt, said on stderr" if "rebuilt from a full scan" in heard.getvalue() else "silent"
        try:
            their_cache(theirs_dir).get_group_all(group, path=path)
            outcome = "rebuilt, nothing said"
        except Exception as exc:  # noqa: BLE001 - the observation this row reports
            outcome = f"raises {type(exc).__name__}: {exc}"
        rows.append((f"a cache file holding {damage.decode()!r}", said, outcome))

    blocker = work / "a-file"
    blocker.write_text("")
    said_ours = io.StringIO()
    EntryPointCache(blocker / "ours.json", stderr=said_ours).entry_points(group)
    heard = io.StringIO()
    with contextlib.redirect_stderr(heard):
        served = their_cache(blocker / "theirs").get_group_all(group, path=path)
    rows.append(("a cache directory that cannot be written",
                 "said on stderr" if "cannot write it" in said_ours.getvalue() else "silent",
                 ("said on stderr" if heard.getvalue() else "nothing said")
                 + (" (the scan serves)" if served else " (no entry points)")))

    # stevedore turns its cache off for an interpreter under /tmp (``sys.executable[0:4] == '/tmp'``,
    # for Ansible); the rows above force it on so they observe the cache wherever this runs (a CI
    # clone under /tmp included). This row observes the switch itself.
    with unittest.mock.patch.object(sys, "executable", "/tmp/venv/bin/python"):
        ours_tmp = EntryPointCache(work / "tmp-interpreter" / "ours.json", stderr=io.StringIO())
        ours_tmp.entry_points(group)
        stevedore_cache.Cache(str(work / "tmp-interpreter" / "theirs")).get_group_all(group, path=path)
    rows.append(("an interpreter installed under /tmp",
                 "cached" if (work / "tmp-interpreter" / "ours.json").is_file() else "NOT cached",
                 "cached" if (work / "tmp-interpreter" / "theirs").is_dir() else "NOT cached (caching off)"))

    default = stevedore_cache._c  # the cache ExtensionManager reads: kept in ``work`` for this row
    kept_dir, default._dir = default._dir, str(work / "stevedore-default")
    try:
        first = ExtensionManager(group).names()
        site_with(group, site, ["late"], dist="ora-late")
        again = ExtensionManager(group).names()
    finally:
        default._dir = kept_dir
    late_ours = "late" in [f.entry_point.name for f in ours.entry_points(group)]
    rows.append(("a plugin installed after the process's first scan",
                 "seen" if late_ours else "NOT seen",
                 "seen" if "late" in again else f"NOT seen (ExtensionManager.ENTRY_POINT_CACHE keeps {first})"))
    sys.path.remove(str(site))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per way (at least 5)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        times = measure(max(5, args.runs), work)
        rows = behaviour(work)
    if args.json:
        print(json.dumps({"ms": {k: statistics.median(v) * 1000 for k, v in times.items()},
                          "behaviour": rows}, indent=2))
        return 0
    print(f"entry points of the 'ora' group, median of {len(next(iter(times.values())))} fresh interpreters "
          f"(load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs):")
    for label, values in times.items():
        print(f"  {label:<50} {statistics.median(values) * 1000:7.2f} ms (min {min(values) * 1000:.2f})")
    print("\nbehaviour (observed here):")
    for question, ours, theirs in rows:
        print(textwrap.indent(f"{question}\n  Ora's:       {ours}\n  stevedore's: {theirs}", "  "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
