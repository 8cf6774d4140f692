"""``ora vault add | sync | stats | search``. Heavy imports happen inside the commands.

The commands are defined here, at module level, on ``vault`` (the ``ora vault`` group, added to the
root app by ``register``); they run on the ``CommandContext`` ``register`` was given."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Optional

import typer

if TYPE_CHECKING:
    from ora_core.api import CommandContext

STREAMS = ("concept", "relationship", "conversation")

#: ``ora vault``: its commands below.
vault = typer.Typer(help="The knowledge vault: ingest notes into Chroma, search them.", no_args_is_help=True)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"ora: vault: {message}", err=True)
    return typer.Exit(1)


#: The ``CommandContext`` the commands run on (``ora_register_commands(cli, ora)``).
_ora: CommandContext | None = None


def register(cli: typer.Typer, ora: CommandContext) -> None:
    """Add ``ora vault`` to ``cli``, its commands run on ``ora``."""
    global _ora
    _ora = ora
    cli.add_typer(vault, name="vault")


def _command_context() -> CommandContext:
    if _ora is None:
        raise _fail("the vault commands were registered without a command context")
    return _ora


def _config() -> Any:
    return _command_context().config().config


def _context() -> Any:
    """The ``StandaloneContext`` the commands hand components: the configuration and the plugins."""
    return _command_context().context()


def _embedder(ctx: Any) -> Any:
    """The configured embedder (``[embedding] embedder``) from the host; an unknown name fails the
    command with the registered embedders named."""
    from ora_core.api import OraError

    from .embedding import embedder_of

    try:
        return embedder_of(ctx)
    except OraError as exc:
        raise _fail(str(exc)) from None


def _store(config: Any) -> Any:
    from ora_core.api import OraError

    from .retrievers import store_for

    try:
        return store_for(config)
    except OraError as exc:
        raise _fail(str(exc)) from None


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar on stderr, driven by ``(done, total)`` calls."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    with Progress(TextColumn("embedding chunks"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=False, disable=not console.is_terminal) as bar:
        task = bar.add_task("embed", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _print_report(report: Any, verb: str) -> None:
    typer.echo(f"{verb}: {report.files_seen} file(s) seen — {report.files_new} new, "
               f"{report.files_changed} changed, {report.files_unchanged} unchanged, "
               f"{report.files_removed} removed")
    typer.echo(f"chunks: +{report.chunks_added} −{report.chunks_removed}, "
               f"{report.chunks_total} in collection {report.collection!r} at {report.store} "
               f"({report.seconds:.1f}s)")
    if report.skipped:
        typer.echo(f"skipped: {len(report.skipped)} file(s) "
                   f"({report.malformed} with malformed front matter):", err=True)
        for skipped in report.skipped:
            typer.echo(f"  {skipped.kind}: {skipped.reason}", err=True)
    if report.front_matter_not_carried:
        first = report.front_matter_not_carried[0]
        typer.echo(f"front matter: {len(report.front_matter_not_carried)} key(s) not carried to the chunks' "
                   f"provenance (not scalar, or a name Ora sets), e.g. {first}; --json lists them", err=True)
    for source in report.removed:
        typer.echo(f"  removed: {source}")


@vault.command("add")
def add(
    paths: list[str] = typer.Argument(..., help="Markdown/text files or directories of notes."),
    as_json: bool = typer.Option(False, "--json", help="Print the ingest report as JSON."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when any file was skipped."),
) -> None:
    """Ingest notes (idempotent: unchanged chunks are skipped, changed files replaced)."""
    from ora_core.api import OraError

    from .ingest import Ingestor

    ctx = _context()
    store = _store(ctx.config)
    embedder = _embedder(ctx)
    try:
        with _progress(not as_json) as progress:
            report = Ingestor(store, embedder, progress).add(paths)
    except OraError as exc:
        raise _fail(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - Chroma/model failures, named and fatal here
        raise _fail(f"ingest into {store.location.label} failed: {type(exc).__name__}: {exc}") from None
    _emit(report, as_json, "added")
    if strict and report.skipped:
        raise typer.Exit(1)


@vault.command("sync")
def sync(as_json: bool = typer.Option(False, "--json", help="Print the report as JSON.")) -> None:
    """Re-ingest changed files under the ingested roots; remove deleted files' chunks."""
    from ora_core.api import OraError

    from .ingest import Ingestor

    ctx = _context()
    store = _store(ctx.config)
    embedder = _embedder(ctx)
    try:
        with _progress(not as_json) as progress:
            report = Ingestor(store, embedder, progress).sync()
    except OraError as exc:
        raise _fail(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - Chroma/model failures, named and fatal here
        raise _fail(f"sync of {store.location.label} failed: {type(exc).__name__}: {exc}") from None
    _emit(report, as_json, "synced")


@vault.command("stats")
def stats(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Chunks, files, types, links and roots of the vault."""
    from .ingest import vault_stats

    config = _config()
    store = _store(config)
    try:
        data = vault_stats(store)
    except Exception as exc:  # noqa: BLE001 - named and fatal here
        raise _fail(f"cannot read {store.location.label}: {type(exc).__name__}: {exc}") from None
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    typer.echo(f"store:        {data['store']} ({data['mode']})")
    typer.echo(f"collection:   {data['collection']}: {data['chunks']} chunk(s) from {data['files']} file(s), "
               f"{data['approved_chunks']} approved")
    typer.echo("types:        " + (", ".join(f"{k} {v}" for k, v in data["by_type"].items()) or "-"))
    typer.echo("source types: " + (", ".join(f"{k} {v}" for k, v in data["by_source_type"].items()) or "-"))
    typer.echo(f"links:        {data['links']} resolved, {data['dangling_links']} dangling")
    typer.echo("roots:        " + (", ".join(data["roots"]) or "-"))
    typer.echo(f"last ingest:  {data['last_ingest'] or '-'}")
    typer.echo(f"conversation memory: {data['conversation_chunks']} chunk(s)")


@vault.command("search")
def search(
    query: str = typer.Argument(..., help="What to look for."),
    k: Optional[int] = typer.Option(None, "-k", help="How many chunks (default: retrieval.k)."),
    stream: str = typer.Option("concept", "--stream", help="concept | relationship | conversation."),
    types: list[str] = typer.Option([], "--type", help="Only chunks of this type (repeatable)."),
    source_types: list[str] = typer.Option([], "--source-type", help="Only this source type (repeatable)."),
    approved_only: bool = typer.Option(False, "--approved-only", help="Only approved sources."),
    min_score: Optional[float] = typer.Option(None, "--min-score", help="Similarity floor, this search."),
    conversation: Optional[str] = typer.Option(None, "--conversation",
                                               help="Conversation id (stream conversation)."),
    as_json: bool = typer.Option(False, "--json", help="Print the Retrieval as JSON."),
) -> None:
    """Search the vault; print chunks with their provenance and scores."""
    from ora_core.api import OraError, RetrievalFilters

    from .retrievers import ConceptRetriever, ConversationRetriever, RelationshipRetriever

    if stream not in STREAMS:
        raise _fail(f"--stream must be one of {', '.join(STREAMS)}, got {stream!r}")
    ctx = _context()
    config = ctx.config
    _embedder(ctx)  # an unknown embedding.embedder is named here, even when the vault is empty
    ctx.conversation_id = conversation or config.pipeline.conversation_id
    retriever = {"concept": ConceptRetriever, "relationship": RelationshipRetriever,
                 "conversation": ConversationRetriever}[stream]()
    filters = RetrievalFilters(types=types, source_types=source_types, approved_only=approved_only,
                               min_score=min_score)
    try:
        result = retriever.retrieve(query, filters, k or config.retrieval.k, ctx)
    except OraError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    _print_retrieval(result)


def _emit(report: Any, as_json: bool, verb: str) -> None:
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        _print_report(report, verb)


def _print_retrieval(result: Any) -> None:
    if not result.chunks:
        diag = result.empty_diagnosis
        typer.echo(f"no chunks ({result.stream}): {diag.empty_reason.value if diag else 'undiagnosed'}")
        if diag:
            typer.echo(f"  {diag.detail}")
            typer.echo(f"  collection count {diag.collection_total_count}, unfiltered hits "
                       f"{diag.raw_chunks_returned}, filtered hits {diag.filtered_chunks_returned}, "
                       f"filters {json.dumps(diag.filters_applied)}")
        return
    for rank, chunk in enumerate(result.chunks, 1):
        p = chunk.provenance
        title = p.extra.get("title", "")
        typer.echo(f"{rank}. {title}" + (f" — {p.heading}" if p.heading else "")
                   + f"   score {p.score:.3f} × weight {p.weight:g}")
        typer.echo(f"   source: {p.source}")
        path = p.extra.get("path")
        if path:
            typer.echo(f"   path: {' -> '.join(path)} ({', '.join(p.extra.get('link_kinds', []))})")
        ingested = p.ingested_at.isoformat() if p.ingested_at else "-"
        typer.echo(f"   collection: {p.collection} · stream: {p.stream} · type: {p.type} · "
                   f"source_type: {p.source_type} · approved: {'yes' if p.approved else 'no'} · "
                   f"ingested: {ingested}")
        body = chunk.text.split("\n\n", 1)[-1].replace("\n", " ")
        typer.echo(f"   {body[:280]}{'…' if len(body) > 280 else ''}")
    typer.echo(f"({len(result.chunks)} chunk(s), {result.latency_s * 1000:.0f} ms)")
