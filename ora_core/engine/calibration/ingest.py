"""Ingesting a fixture's evidence notes into the run's own Chroma store, one collection per pair.

The notes go in through the vault plugin's public interface, ``ora vault add --json --strict``, run
by the installed ``ora`` program as a process of its own: the engine never imports a plugin (nor
the command line), and a plugin's command module keeps its ``CommandContext`` in a module global,
which another process leaves untouched. The child resolves a configuration made only of what
ingestion reads from the run's: ``[retrieval] path`` (in a file under the run directory, so no
configuration file of the user's is looked up), ``[embedding]`` and every ``[plugins.*]`` table,
the pair's collection set (``ORA__EMBEDDING`` and ``ORA__PLUGINS``, environment only: a secret in a
plugin table never lands on disk). The retrievers of this process then read the same store with the
same embedder. ``vault add`` is idempotent: a resumed run re-adds nothing that did not change.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ora_core.engine.calibration.fixture import CalibrationPair, Fixture
from ora_core.engine.calibration.models import IngestInfo
from ora_core.kernel.config import OraConfig
from ora_core.kernel.errors import OraError

INGEST_TIMEOUT_S = 600.0
HOW = ("`ora vault add --json --strict <notes>` (the installed ora program) in a child process, per pair, into "
       "collection cal-<pair id> of the run's own store; the child's configuration: the run's [retrieval] path, "
       "[embedding] and [plugins.*]")


class IngestError(OraError):
    """The fixture's notes could not be ingested (the pair, the command and its stderr named)."""


def toml_literal(value: Any) -> str:
    """``value`` as a TOML literal (what ``ORA__X=...`` environment overrides parse); None has no TOML
    form and is refused, named."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's escapes are TOML basic-string escapes
    if isinstance(value, Path):
        return json.dumps(str(value), ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_literal(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)} = {toml_literal(v)}"
                               for k, v in value.items() if v is not None) + "}"
    raise TypeError(f"no TOML literal for {type(value).__name__} {value!r}")


def _plain(value: Any) -> Any:
    """Secret values as their text (the child needs them; they travel in its environment only)."""
    if hasattr(value, "get_secret_value"):
        return value.get_secret_value()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def child_environment(config: OraConfig, collection: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA__") and k != "ORA_CONFIG"}
    plugins = _plain(config.model_dump()["plugins"])
    plugins.setdefault("chroma", {})
    plugins["chroma"] = {**plugins["chroma"], "collection": collection}
    env["ORA__PLUGINS"] = toml_literal(plugins)
    env["ORA__EMBEDDING"] = toml_literal(config.embedding.model_dump(mode="json"))
    return env


def ora_program() -> str:
    """The installed ``ora`` program: the one beside this interpreter (a virtual environment's), else the
    one on PATH; an ``IngestError`` when there is none."""
    beside = Path(sys.executable).with_name("ora.exe" if os.name == "nt" else "ora")
    if beside.is_file():
        return str(beside)
    found = shutil.which("ora")
    if found is None:
        raise IngestError(f"the `ora` program is neither beside {sys.executable} nor on PATH: the fixture's notes "
                          "are ingested with `ora vault add` (is ora-core installed in this environment?)")
    return found


def ingest_pair(fixture: Fixture, pair: CalibrationPair, config: OraConfig, store: Path, workdir: Path) -> int:
    """Ingest ``pair``'s notes into ``cal-<id>`` of ``store``; the chunks the collection holds."""
    workdir.mkdir(parents=True, exist_ok=True)
    config_file = workdir / "ingest.toml"
    config_file.write_text("# written by `ora calibrate run`: the store its fixture notes are ingested into\n"
                           f"[retrieval]\npath = {toml_literal(str(store))}\n", encoding="utf-8")
    notes = fixture.notes_path(pair)
    command = [ora_program(), "-c", str(config_file), "vault", "add", "--json", "--strict", str(notes)]
    shown = f"ora -c {config_file} vault add --json --strict {notes}"
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=INGEST_TIMEOUT_S, cwd=workdir,
                              env=child_environment(config, pair.collection), check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IngestError(f"pair {pair.id}: `{shown}` could not run: {type(exc).__name__}: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-1500:]
        hint = " (is the ora-chroma plugin installed? `ora vault` is its command)" if "vault" in tail and \
            "No such command" in tail else ""
        raise IngestError(f"pair {pair.id}: `{shown}` exited {done.returncode}{hint}: {tail}")
    try:
        report = json.loads(done.stdout)
        chunks = int(report["chunks_total"])
    except (ValueError, KeyError, TypeError) as exc:
        raise IngestError(f"pair {pair.id}: `{shown}` printed no ingest report ({type(exc).__name__}: {exc}): "
                          f"{done.stdout.strip()[:500]!r}") from exc
    if chunks < len(pair.notes):
        raise IngestError(f"pair {pair.id}: collection {pair.collection} holds {chunks} chunk(s) for "
                          f"{len(pair.notes)} note(s)")
    return chunks


def ingest_fixture(fixture: Fixture, pairs: list[CalibrationPair], config: OraConfig, store: Path, workdir: Path,
                   on_pair: Callable[[str], None] | None = None) -> IngestInfo:
    """Every selected pair's notes, one collection each (pairs one after another: one store)."""
    started = time.perf_counter()
    collections: dict[str, int] = {}
    for pair in pairs:
        if on_pair is not None:
            on_pair(pair.id)
        collections[pair.collection] = ingest_pair(fixture, pair, config, store, workdir)
    return IngestInfo(store=str(store), collections=collections, seconds=round(time.perf_counter() - started, 3),
                      how=HOW)
