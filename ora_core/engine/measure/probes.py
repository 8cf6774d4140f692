"""Probes: a prompt, optional configuration overrides, and the trace facts its turn must leave.

A probe file (TOML or YAML, one probe each) is validated by ``Probe``: an unknown key or a bad
value is an error naming the file and the field. Probe packs are registered through
``ora_register_probes`` (the bundled one is the ``probes-default`` plugin); users add directories
(``ora probe run --dir``). ``run_probe`` runs one probe as a turn through the engine (``Ora``) on
the user's configuration with the probe's overrides on top, its trace in a directory of its own,
then checks every fact against the files on disk. The outcome is

- ``PASS``: every fact held;
- ``FAIL``: a fact did not hold; its result names the fact, what was expected, what the trace
  shows and the file it read;
- ``BROKEN``: the probe could not run (an invalid file, a configuration that does not load, a
  mode that is not loaded, an unknown inject mode, a turn that crashed or left no trace): the
  error is named. Never a silent skip.
"""

from __future__ import annotations

import asyncio
import io
import re
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal
from xml.etree import ElementTree

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ora_core.engine.app import Ora, nest_overrides
from ora_core.engine.measure.facts import Fact, FactResult, check_facts
from ora_core.engine.measure.tracefiles import TraceFileError, TurnFiles
from ora_core.kernel.config import RolesConfig, deep_merge, load_config, user_data_dir
from ora_core.kernel.errors import OraError
from ora_core.kernel.modes import STREAMS

PROBE_SUFFIXES = (".toml", ".yaml", ".yml")
Outcome = Literal["PASS", "FAIL", "BROKEN"]
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class ProbeFileError(Exception):
    """A probe file that cannot be read or does not validate; the message names file and field."""


class ProbeOverrides(BaseModel):
    """What a probe changes in the configuration it runs on (applied over the user's)."""

    model_config = ConfigDict(extra="forbid")

    mode: str | None = None  # run the turn on this mode (routing is then skipped)
    inject: str | None = None  # a registered fault-injection mode
    retrieval: bool | None = None  # false: every retrieval stream off; true: concept, conversation, relationship on
    backend: str | None = None  # every role on this configured backend
    best_guess: bool | None = None  # pipeline.best_guess
    config: dict[str, Any] = Field(default_factory=dict)  # any other keys, dotted or as nested tables


class Probe(BaseModel):
    """One probe file."""

    model_config = ConfigDict(extra="forbid")

    id: str
    title: str = Field(min_length=1)
    prompt: str
    source: str = ""  # where the probe comes from (seed 000 §4.4, catalogued failure #N)
    catalogue: int | None = Field(default=None, ge=1, le=13)  # seed 000's failure number, if one
    why: str = ""  # what boundary it exercises and which trace field shows it
    counterpart: str = ""  # the failure has no counterpart in Ora: what is probed instead, and why
    model_dependent: bool = False  # whether the facts depend on what the model does
    overrides: ProbeOverrides = Field(default_factory=ProbeOverrides)
    facts: list[Fact] = Field(min_length=1)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError(f"{value!r} is not a probe id (lower-case letters, digits and '-')")
        return value

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the prompt is empty")
        return value


class ProbeSource(BaseModel):
    """A probe as found on disk: parsed, or the problem that keeps it from running."""

    model_config = ConfigDict(extra="forbid")

    id: str
    path: str
    pack: str
    probe: Probe | None = None
    error: str | None = None


def _validation_message(path: Path, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(file)"
        msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        problems.append(f"{loc}: {msg}")
    return f"{path}: " + "; ".join(problems)


def parse_probe_text(text: str, path: Path) -> Probe:
    """A probe from the text of ``path`` (its suffix says TOML or YAML); ``ProbeFileError`` names
    the file and the field of any problem."""
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ProbeFileError(f"{path}: not TOML: {exc}") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ProbeFileError(f"{path}: not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ProbeFileError(f"{path}: a probe file holds one table (mapping), not {type(data).__name__}")
    data.setdefault("id", path.stem)
    try:
        return Probe.model_validate(data)
    except ValidationError as exc:
        raise ProbeFileError(_validation_message(path, exc)) from None


def load_probe_file(path: Path) -> Probe:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProbeFileError(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from None
    return parse_probe_text(text, path)


def pack_dirs(host: Any, extra_dirs: Iterable[Path | str] = ()) -> list[tuple[str, Path]]:
    """``(pack, directory)``: the registered probe packs by name, then ``extra_dirs``."""
    found = [(name, Path(d)) for name, d in sorted(host.components("probe_pack").items())] if host else []
    return found + [(f"dir:{d}", Path(d).expanduser()) for d in extra_dirs]


def discover(host: Any, extra_dirs: Iterable[Path | str] = ()) -> list[ProbeSource]:
    """Every probe file of every pack and directory, in pack order then file name. An invalid file,
    a missing directory or an id defined twice is a ``ProbeSource`` with its ``error``."""
    sources: list[ProbeSource] = []
    seen: dict[str, ProbeSource] = {}
    for pack, directory in pack_dirs(host, extra_dirs):
        if not directory.is_dir():
            sources.append(ProbeSource(id=f"({pack})", path=str(directory), pack=pack,
                                       error=f"probe directory {str(directory)!r} of {pack} does not exist"))
            continue
        for path in sorted(p for p in directory.iterdir() if p.suffix in PROBE_SUFFIXES and p.is_file()):
            try:
                probe = load_probe_file(path)
                source = ProbeSource(id=probe.id, path=str(path), pack=pack, probe=probe)
            except ProbeFileError as exc:
                source = ProbeSource(id=path.stem, path=str(path), pack=pack, error=str(exc))
            first = seen.get(source.id)
            if first is not None:
                source.probe = None
                source.error = (f"probe id {source.id!r} is defined twice: by {first.path} and by {path}; "
                                "the first is used")
            else:
                seen[source.id] = source
            sources.append(source)
    return sources


def select(sources: list[ProbeSource], ids: Iterable[str]) -> list[ProbeSource]:
    """The probes named by ``ids`` (in that order), all when none; an unknown id is a
    ``ProbeFileError`` listing the known ones."""
    wanted = list(ids)
    if not wanted:
        return list(sources)
    by_id: dict[str, ProbeSource] = {}
    for source in sources:
        by_id.setdefault(source.id, source)
    unknown = [i for i in wanted if i not in by_id]
    if unknown:
        raise ProbeFileError(f"unknown probe id(s) {', '.join(unknown)}; known: {', '.join(by_id) or 'none'}")
    return [by_id[i] for i in wanted]


# --- running ------------------------------------------------------------------------------------

class ProbeResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    title: str = ""
    path: str
    outcome: Outcome
    error: str | None = None  # BROKEN: why the probe could not run
    facts: list[FactResult] = Field(default_factory=list)
    source: str = ""
    catalogue: int | None = None
    counterpart: str = ""
    model_dependent: bool = False
    overrides: dict[str, Any] = Field(default_factory=dict)
    trace_path: str | None = None
    turn_status: str | None = None  # as turn.json records it
    tracing_degraded: bool = False
    duration_s: float = 0.0
    stderr: str = ""  # what the turn wrote on stderr (warnings), kept for the report

    @property
    def failed_facts(self) -> list[FactResult]:
        return [f for f in self.facts if not f.held]


class ProbeReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ora_version: str
    config_hash: str | None
    config_sources: list[str] = Field(default_factory=list)
    started_at: str
    out_dir: str
    duration_s: float
    counts: dict[str, int]
    results: list[ProbeResult]

    @property
    def ok(self) -> bool:
        return all(r.outcome == "PASS" for r in self.results)


@dataclass
class ProbeRun:
    """Where and on what a set of probes runs: the loaded plugins, the user's configuration file
    (None: the usual lookup), and the directory each probe's trace goes under."""

    host: Any
    config_path: str | Path | None
    out_dir: Path
    stamp: str = field(default_factory=lambda: datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ"))


def default_out_dir(stamp: str) -> Path:
    return user_data_dir() / "probe-runs" / stamp


def probe_overrides(probe: Probe, trace_root: Path, conversation_id: str) -> dict[str, Any]:
    """The configuration overrides a probe's turn runs with: its own, then the runner's (its trace in
    ``trace_root``, committed before the turn returns, under a conversation of its own)."""
    data: dict[str, Any] = nest_overrides(probe.overrides.config) if probe.overrides.config else {}
    named: dict[str, Any] = {}
    if probe.overrides.retrieval is not None:
        on = probe.overrides.retrieval
        named["retrieval"] = {"streams": {s: on for s in STREAMS if on is False or s != "web"}}
    if probe.overrides.backend is not None:
        named["roles"] = {role: probe.overrides.backend for role in RolesConfig.model_fields}
    if probe.overrides.best_guess is not None:
        named.setdefault("pipeline", {})["best_guess"] = probe.overrides.best_guess
    runner = {"trace": {"enabled": True, "root": str(trace_root), "durability": "turn"},
              "pipeline": {"conversation_id": conversation_id}}
    return deep_merge(deep_merge(data, named), runner)


def _broken(source: ProbeSource, error: str, started: float, **extra: Any) -> ProbeResult:
    probe = source.probe
    return ProbeResult(id=source.id, title=probe.title if probe else "", path=source.path, outcome="BROKEN",
                       error=error, duration_s=round(time.perf_counter() - started, 3),
                       **_about(probe), **extra)


def _about(probe: Probe | None) -> dict[str, Any]:
    if probe is None:
        return {}
    return {"source": probe.source, "catalogue": probe.catalogue, "counterpart": probe.counterpart,
            "model_dependent": probe.model_dependent,
            "overrides": probe.overrides.model_dump(mode="json", exclude_defaults=True)}


def run_probe(source: ProbeSource, run: ProbeRun, on_event: Callable[[Any], None] | None = None) -> ProbeResult:
    """Run one probe's turn and check its facts against the files it left (module docstring)."""
    started = time.perf_counter()
    probe = source.probe
    if probe is None:
        return _broken(source, source.error or "the probe file did not load", started)
    trace_root = run.out_dir / probe.id
    conversation = f"probe-{probe.id}-{run.stamp}"
    try:
        resolved = load_config(run.config_path, overrides=probe_overrides(probe, trace_root, conversation))
    except OraError as exc:
        return _broken(source, f"the configuration does not load with the probe's overrides: {exc}", started)
    stderr = io.StringIO()
    ora = Ora(host=run.host, config=resolved, stderr=stderr)
    mode = probe.overrides.mode
    if mode is not None and mode not in ora.runtime.modes:
        loaded = ", ".join(sorted(ora.runtime.modes.modes)) or "none"
        return _broken(source, f"overrides.mode {mode!r} is not a loaded mode (loaded: {loaded})", started)
    try:
        result = asyncio.run(ora.arun(probe.prompt, mode=mode, inject=probe.overrides.inject, on_event=on_event))
    except OraError as exc:
        return _broken(source, f"{type(exc).__name__}: {exc}", started, stderr=stderr.getvalue()[-4000:])
    except Exception as exc:  # noqa: BLE001 - a crashed turn is BROKEN, named with its class
        return _broken(source, f"the turn crashed: {type(exc).__name__}: {exc}", started,
                       stderr=stderr.getvalue()[-4000:])
    if not result.trace_path:
        return _broken(source, "the turn left no trace directory (is a trace sink such as ora-trace-fs installed "
                               "and listed in [trace] sinks?)", started, stderr=stderr.getvalue()[-4000:])
    files = TurnFiles(result.trace_path, root=trace_root)
    facts = check_facts(probe.facts, files)
    try:
        status = files.turn().get("status")
    except TraceFileError:
        status = None  # the facts that read turn.json say why
    outcome: Outcome = "PASS" if all(f.held for f in facts) else "FAIL"
    return ProbeResult(id=probe.id, title=probe.title, path=source.path, outcome=outcome, facts=facts,
                       trace_path=result.trace_path, turn_status=status, tracing_degraded=result.tracing_degraded,
                       duration_s=round(time.perf_counter() - started, 3), stderr=stderr.getvalue()[-4000:],
                       **_about(probe))


def recheck(source: ProbeSource, trace_path: str | Path, trace_root: str | Path | None = None) -> list[FactResult]:
    """The probe's facts against a turn already on disk (no turn is run)."""
    if source.probe is None:
        raise ProbeFileError(source.error or f"{source.path}: the probe did not load")
    return check_facts(source.probe.facts, TurnFiles(trace_path, root=trace_root))


def run_all(sources: list[ProbeSource], run: ProbeRun, *,
            on_start: Callable[[ProbeSource, int], None] | None = None,
            on_event: Callable[[Any], None] | None = None,
            on_done: Callable[[ProbeResult], None] | None = None,
            version: str = "", config_hash: str | None = None,
            config_sources: Iterable[str] = ()) -> ProbeReport:
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.perf_counter()
    results = []
    for number, source in enumerate(sources, 1):
        if on_start is not None:
            on_start(source, number)
        result = run_probe(source, run, on_event)
        results.append(result)
        if on_done is not None:
            on_done(result)
    counts = {k: sum(1 for r in results if r.outcome == k) for k in ("PASS", "FAIL", "BROKEN")}
    return ProbeReport(ora_version=version, config_hash=config_hash, config_sources=list(config_sources),
                       started_at=started_at, out_dir=str(run.out_dir),
                       duration_s=round(time.perf_counter() - started, 3), counts=counts, results=results)


# --- reports --------------------------------------------------------------------------------------

def fact_lines(fact: FactResult, indent: str = "    ") -> list[str]:
    lines = [f"{indent}fact:     {fact.fact}", f"{indent}expected: {fact.expected}",
             f"{indent}trace:    {fact.actual}"]
    if fact.file:
        lines.append(f"{indent}file:     {fact.file}")
    if fact.why:
        lines.append(f"{indent}why:      {fact.why}")
    return lines


def junit_xml(report: ProbeReport) -> str:
    """The report as JUnit XML: one test case per probe; FAIL is a ``failure`` (the facts that did
    not hold), BROKEN an ``error`` (why the probe could not run)."""
    suite = ElementTree.Element("testsuite", {
        "name": "ora-probes", "tests": str(len(report.results)), "failures": str(report.counts.get("FAIL", 0)),
        "errors": str(report.counts.get("BROKEN", 0)), "skipped": "0", "time": f"{report.duration_s:.3f}",
        "timestamp": report.started_at})
    for result in report.results:
        case = ElementTree.SubElement(suite, "testcase", {"classname": "ora.probes", "name": result.id,
                                                          "file": result.path, "time": f"{result.duration_s:.3f}"})
        if result.outcome == "FAIL":
            failed = result.failed_facts
            node = ElementTree.SubElement(case, "failure", {
                "message": f"{len(failed)} fact(s) did not hold: " + "; ".join(f.fact for f in failed)})
            node.text = "\n".join(line for f in failed for line in fact_lines(f, ""))
        elif result.outcome == "BROKEN":
            node = ElementTree.SubElement(case, "error", {"message": result.error or "broken"})
            node.text = result.error or ""
        out = [f"trace: {result.trace_path}"] if result.trace_path else []
        if result.stderr:
            out.append(result.stderr)
        if out:
            ElementTree.SubElement(case, "system-out").text = "\n".join(out)
    ElementTree.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(suite, encoding="unicode") + "\n"


def counts_line(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{counts.get(k, 0)} {k}" for k in ("PASS", "FAIL", "BROKEN"))
