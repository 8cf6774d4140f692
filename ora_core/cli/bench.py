"""``ora bench``: the command group for Ora's measurements (``ora bench grounding`` ...).

The commands are defined here, at module level, on ``group`` (the root app adds it as ``ora bench``):
``ora bench`` itself (no subcommand, or ``ora bench pipeline``) is the reliability bench, its work in
``ora_core.engine.measure.bench``; ``ora bench grounding`` measures a verifier, its work in
``ora_core.cli.bench_grounding``. Another measurement is another ``@group.command`` here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ora_core.cli.bench_defaults import DEFAULT_DATA, DEFAULT_FOLDS, DEFAULT_SEED

#: ``ora bench``: its commands below (the root app adds it: ``ora_core/cli/app.py``).
group = typer.Typer(help="Measurements: how well Ora's components do on labelled data.", no_args_is_help=True)


# --- ``ora bench grounding`` ------------------------------------------------------------------------------

# (registered first: listed first in ``ora bench --help``; its work, in ``ora_core.cli.bench_grounding``, is
# imported when it runs)
@group.command("grounding")
def bench_grounding(
    data: Path = typer.Option(DEFAULT_DATA, "--data", help="Directory of labelled *.jsonl files "
                              "(default: ../shared/data beside the repository)."),
    folds: int = typer.Option(DEFAULT_FOLDS, "--folds", min=2, help="Cross-validation folds."),
    seed: int = typer.Option(DEFAULT_SEED, "--seed", help="Seed of the fold split."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the report here as JSON."),
    verifier_name: str = typer.Option("grounding", "--verifier", help="The registered verifier to measure."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="First N examples of each file (quick runs)."),
    timing: bool = typer.Option(True, "--timing/--no-timing", help="Measure the 300-word/6-chunk case."),
) -> None:
    """The verifier vs content-word overlap and answer length: AUROC and accuracy under k-fold CV."""
    from ora_core.cli.bench_grounding import (
        BenchDataError,
        VerifierFailed,
        data_files,
        load_examples,
        print_report,
        run_with_progress,
    )
    from ora_core.cli.state import EXIT_ERROR, EXIT_USAGE, fail, get_host, load_resolved
    from ora_core.kernel.errors import OraError
    from ora_core.kernel.trace import StandaloneContext

    try:
        files = data_files(data)
        for path in files:  # every file is read (and its errors named) before the model loads
            load_examples(path)
    except BenchDataError as exc:
        raise fail(exc.message, EXIT_USAGE) from None
    host = get_host()
    try:
        verifier = host.get("verifier", verifier_name)
        config = load_resolved()
    except OraError as exc:
        raise fail(str(exc)) from None
    ctx = StandaloneContext(config, host=host)
    try:
        report = run_with_progress(data, verifier, verifier_name, ctx, folds, seed, timing, limit)
    except BenchDataError as exc:
        raise fail(exc.message, EXIT_USAGE) from None
    except VerifierFailed as exc:
        raise fail(str(exc)) from None
    print_report(report)
    if json_path is not None:
        json_path.write_text(report.model_dump_json(indent=2), encoding="utf-8")
    if not report.all_met:
        raise typer.Exit(EXIT_ERROR)


# --- ``ora bench`` itself: the reliability bench (seed 003's, on Ora) -----------------------------------------

PIPELINE_HELP = """Measurements. Without a subcommand: the reliability bench (seed 003's, on Ora).

Bundled documents × inject modes (none, lowconf, hallucination, persistent, coverage,
verifier-exception, verifier-garbage, backend-timeout, rate-limit, rag-down), one Gear-4 turn each;
the metrics are read back from the turns' trace files and printed beside seed 003's published
figures. By default offline and deterministic (the scripted backend over the bundled default
configuration): the figures reproduce run to run. With --config it runs on that configuration's
models instead (not deterministic). --save writes the figures with the bench hash and the version;
--compare prints the deltas against such a file; --from recomputes the metrics of an earlier run
directory without running anything."""


# The reliability bench's options, declared once for ``ora bench`` and ``ora bench pipeline``.
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")]
SaveOpt = Annotated[Optional[Path], typer.Option("--save", help="Write the figures (bench hash, version) here.")]
CompareOpt = Annotated[Optional[Path], typer.Option("--compare", help="Print the deltas against this file.")]
ConfigOpt = Annotated[Optional[str], typer.Option("--config", "-c",
                                                  help="Run on this configuration's models (not deterministic).")]
DocumentsOpt = Annotated[Optional[Path], typer.Option("--documents", help="Directory of bench documents.")]
OutOpt = Annotated[Optional[Path], typer.Option("--out", help="Run directory (the scenarios' traces).")]
InjectOpt = Annotated[list[str], typer.Option("--inject", help="Only these inject modes (repeatable).")]
FromOpt = Annotated[Optional[Path], typer.Option("--from", help="Recompute the metrics of this run directory.")]


# ``ora bench`` (no subcommand) runs the reliability bench; ``ora bench pipeline`` is the same command by
# name. The other ``ora bench`` subcommands are untouched.
@group.callback(invoke_without_command=True, no_args_is_help=False, help=PIPELINE_HELP)
def bench_root(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    save: SaveOpt = None,
    compare_with: CompareOpt = None,
    config: ConfigOpt = None,
    documents: DocumentsOpt = None,
    out: OutOpt = None,
    injects: InjectOpt = [],  # noqa: B006 - typer reads the default; never mutated
    from_dir: FromOpt = None,
) -> None:
    options = {"--json": as_json, "--save": save, "--compare": compare_with, "--config": config,
               "--documents": documents, "--out": out, "--inject": injects, "--from": from_dir}
    if ctx.invoked_subcommand is not None:
        given = [name for name, value in options.items() if value]
        if given:
            from ora_core.cli.state import EXIT_USAGE, fail

            raise fail(f"{', '.join(given)} belong(s) to the reliability bench (`ora bench`), not to "
                       f"`ora bench {ctx.invoked_subcommand}`: give them after the subcommand's name",
                       EXIT_USAGE)
        return
    run_pipeline_bench(as_json=as_json, save=save, compare_with=compare_with, config=config,
                       documents=documents, out=out, injects=injects, from_dir=from_dir)


@group.command("pipeline", help=PIPELINE_HELP.split("\n", 1)[1].strip())
def bench_pipeline(
    as_json: JsonOpt = False,
    save: SaveOpt = None,
    compare_with: CompareOpt = None,
    config: ConfigOpt = None,
    documents: DocumentsOpt = None,
    out: OutOpt = None,
    injects: InjectOpt = [],  # noqa: B006 - typer reads the default; never mutated
    from_dir: FromOpt = None,
) -> None:
    run_pipeline_bench(as_json=as_json, save=save, compare_with=compare_with, config=config,
                       documents=documents, out=out, injects=injects, from_dir=from_dir)


def run_pipeline_bench(*, as_json: bool, save: Path | None, compare_with: Path | None, config: str | None,
                       documents: Path | None, out: Path | None, injects: list[str], from_dir: Path | None) -> None:
    import json

    from ora_core import __version__
    from ora_core.cli.probe import StepProgress
    from ora_core.cli.state import EXIT_ERROR, EXIT_USAGE, fail, get_host, state
    from ora_core.engine.measure import bench as b
    from ora_core.engine.measure.bench_metrics import compute_metrics, read_manifest
    from ora_core.engine.measure.tracefiles import TraceFileError
    from ora_core.kernel.errors import OraError

    config_path = config or state.config_path
    try:
        previous = b.load_results(compare_with.expanduser()) if compare_with is not None else None
        if from_dir is not None:
            run_dir = from_dir.expanduser()
            run = b.BenchRun.model_validate(read_manifest(run_dir))
        else:
            host = get_host()
            dirs = b.document_dirs(host, [documents] if documents is not None else [])
            if not dirs:
                raise b.BenchError("no bench documents: no registered probe pack has a bench/ directory and "
                                   "--documents was not given")
            docs = [d for directory in dirs for d in b.load_documents(directory)]
            names = [d.name for d in docs]
            if len(set(names)) != len(names):
                raise b.BenchError(f"two bench documents share a name: {', '.join(sorted(names))}")
            kind: b.Kind = "configured" if config_path else "scripted"
            run_dir = out.expanduser() if out is not None else b.default_out_dir()
            wanted = injects or list(b.INJECTS)
            typer.echo(f"ora bench: {kind}{' (deterministic, offline)' if kind == 'scripted' else ''}: "
                       f"{len(docs)} document(s) × {len(wanted)} inject mode(s); traces under {run_dir}", err=True)
            with StepProgress(len(docs) * len(wanted), "scenarios") as progress:
                run = b.run_bench(host, docs, run_dir, kind=kind, config_path=config_path, injects=wanted,
                                  version=__version__,
                                  on_start=lambda d, i, n, _total: progress.start(f"{d} × {i}", n),
                                  on_event=progress.event,
                                  on_done=lambda r: progress.done(
                                      f"{r.document} × {r.inject}: {'ERROR ' + r.error if r.error else 'ran'} "
                                      f"({r.duration_s:.1f} s)"))
        metrics = compute_metrics(run_dir)
    except b.BenchError as exc:
        raise fail(str(exc), EXIT_USAGE if "unknown inject" in str(exc) else EXIT_ERROR) from None
    except (OraError, TraceFileError) as exc:
        raise fail(str(exc)) from None
    results = b.results_of(run, metrics, run_dir)
    deltas = b.compare(results, previous) if previous is not None else None
    if save is not None:
        try:
            save.expanduser().write_text(results.model_dump_json(indent=2), encoding="utf-8")
        except OSError as exc:
            raise fail(f"--save {str(save)!r} cannot be written: {exc}") from None
    if as_json:
        typer.echo(json.dumps({"run": run.model_dump(mode="json"), "run_dir": str(run_dir),
                               "figures": metrics.figures(), "seed_003": b.SEED_003,
                               "metrics": metrics.model_dump(mode="json"),
                               "compare": {"file": str(compare_with), "bench_hash_before": previous.bench_hash,
                                           "rows": deltas} if previous is not None else None}, indent=2))
    else:
        _print_bench(run, metrics, run_dir, b.SEED_003)
        if previous is not None and deltas is not None:
            _print_deltas(previous, results, deltas, compare_with)
    if save is not None:
        typer.echo(f"ora bench: figures saved to {save}", err=True)
    if metrics.problems or metrics.broken_never_pass.passed:
        raise typer.Exit(EXIT_ERROR)


def _ratio(ora: float | None, seed: Any) -> str:
    if isinstance(ora, bool) or isinstance(seed, bool):
        return "same" if ora == seed else "differs"
    if ora is None or not seed:
        return "-"
    return f"{ora / seed:.2f}"


def _print_bench(run: Any, metrics: Any, run_dir: Path, seed: dict[str, Any]) -> None:
    kind = ("scripted backend, offline, deterministic: these figures reproduce run to run"
            if run.deterministic else
            "your configuration's models: NOT deterministic, figures vary run to run")
    typer.echo(f"Ora reliability bench — {kind}")
    typer.echo(f"  {len(run.documents)} document(s) × {len(run.injects)} inject mode(s) = {metrics.scenarios} "
               f"scenario(s); bench hash {run.bench_hash}; configuration {run.base_config_hash}; "
               f"ora {run.ora_version}; {run.duration_s:.1f} s")
    typer.echo(f"  traces: {run_dir}")
    typer.echo("")
    f = metrics.figures()
    zero = metrics.deterministic_zero_overhead
    bnp = metrics.broken_never_pass
    rows = [
        ("judge catch rate (caught / planted)", metrics.judge_catch.text(), seed["judge_catch_rate"]["text"],
         _ratio(f["judge_catch_rate"], seed["judge_catch_rate"]["value"])),
        ("  (planted where the judge never scored)", str(metrics.judge_unjudged), "-", "-"),
        ("retry recovery rate", metrics.retry_recovery.text(), seed["retry_recovery_rate"]["text"],
         _ratio(f["retry_recovery_rate"], seed["retry_recovery_rate"]["value"])),
        ("avg attempts at the probabilistic boundary", metrics.attempts_at_boundary.text(),
         seed["avg_attempts_at_boundary"]["text"],
         _ratio(f["avg_attempts_at_boundary"], seed["avg_attempts_at_boundary"]["value"])),
        ("  (over every probabilistic step)", metrics.attempts_all_probabilistic.text(), "-", "-"),
        ("deterministic steps never retried/judged",
         f"{'n/a' if zero.holds is None else str(zero.holds).lower()} ({zero.steps} step(s))",
         seed["deterministic_zero_overhead"]["text"],
         _ratio(zero.holds, seed["deterministic_zero_overhead"]["value"])),
        ("scenario success rate", metrics.scenario_success.text(), seed["scenario_success_rate"]["text"],
         _ratio(f["scenario_success_rate"], seed["scenario_success_rate"]["value"])),
        ("BROKEN never PASS (faulted verifications)",
         f"{bnp.broken}/{bnp.faulted} BROKEN, {bnp.passed} PASS" + (f", {bnp.other} other" if bnp.other else ""),
         "-", "-"),
    ]
    typer.echo(f"  {'metric':<44} {'Ora':<24} {'seed 003':<14} Ora/seed")
    for name, ora, anchor, ratio in rows:
        typer.echo(f"  {name:<44} {ora:<24} {anchor:<14} {ratio}")
    typer.echo("")
    typer.echo(f"  {'inject mode':<20} {'runs':>4} {'ok':>3} {'degr':>4} {'halt':>4} {'designed':>8} "
               f"{'attempts':>8} {'caught':>7}  designed path")
    for o in metrics.per_inject:
        s = o.statuses
        attempts = f"{sum(o.boundary_attempts) / len(o.boundary_attempts):.2f}" if o.boundary_attempts else "-"
        caught = f"{o.caught}/{o.planted}" if o.planted else "-"
        typer.echo(f"  {o.inject:<20} {o.scenarios:>4} {s.get('ok', 0):>3} {s.get('degraded', 0):>4} "
                   f"{s.get('halted', 0):>4} {o.designed_held:>4}/{o.scenarios:<3} {attempts:>8} {caught:>7}  "
                   f"{o.designed}")
    deviations = [(o.inject, d) for o in metrics.per_inject for d in o.deviations]
    if deviations:
        typer.echo("\n  off the designed path:")
        for inject, d in deviations:
            typer.echo(f"    {inject}: {d}")
    if zero.violations:
        typer.echo("\n  deterministic steps with overhead:")
        for v in zero.violations:
            typer.echo(f"    {v}")
    if metrics.problems:
        typer.echo("\n  PROBLEMS (scenarios whose figures are missing):")
        for p in metrics.problems:
            typer.echo(f"    {p}")
    typer.echo("\n  Like seed 003's, the recovery and success rates include the designed-to-fail scenarios "
               "(persistent, coverage), so they are lower bounds. Counted per planted quotation, per "
               "retried step and per scenario as docs/probes.md says; seed 003's matrix is smaller.")


def _print_deltas(previous: Any, current: Any, rows: list[dict[str, Any]], path: Path | None) -> None:
    typer.echo(f"\nCompared with {path} (saved {previous.saved_at}, ora {previous.ora_version}, bench hash "
               f"{previous.bench_hash}{'' if previous.bench_hash == current.bench_hash else ' — DIFFERENT plan'}):")
    for row in rows:
        delta = row["delta"]
        shown = "=" if delta in (0, None) and row["before"] == row["now"] else str(delta)
        typer.echo(f"  {row['figure']:<44} {str(row['before']):<10} -> {str(row['now']):<10} {shown}")
