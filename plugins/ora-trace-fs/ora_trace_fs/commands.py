"""``ora trace ls``, ``ora trace show [TURN]``, ``ora trace view [TURN]``, ``ora trace calls [TURN]``,
``ora trace replay [TURN] --step S --call N`` and ``ora health [--html]``.

The commands are defined here, at module level: the ``trace`` ones on ``trace_commands``, merged by
``register`` into the ``ora trace`` group the trace plugins share (``ora.group("trace")``), and
``health`` on ``root_commands``, merged into ``ora`` itself. They run on the ``CommandContext``
``register`` was given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

if TYPE_CHECKING:
    from ora_core.api import CommandContext

ROOT_HELP = "Trace root (default: trace.root of the configuration)."
TRACE_HELP = "The forensic trace: turns and their model calls."

#: ``ora trace ls|show|view|calls|replay`` (merged into the shared ``trace`` group by ``register``).
trace_commands = typer.Typer()
#: ``ora health`` (merged into the root app by ``register``).
root_commands = typer.Typer()

#: The ``CommandContext`` the commands run on (``ora_register_commands(cli, ora)``).
_ora: CommandContext | None = None


def register(cli: typer.Typer, ora: CommandContext) -> None:
    """Put the ``trace`` commands in ``ora trace`` (``ora.group``) and ``health`` on ``cli``, run on ``ora``."""
    global _ora
    _ora = ora
    ora.group("trace", help=TRACE_HELP).add_typer(trace_commands)
    cli.add_typer(root_commands)


def _context() -> CommandContext:
    if _ora is None:
        raise _fail("the trace commands were registered without a command context")
    return _ora


def _root(root: Optional[str]) -> Path:
    if root:
        return Path(root).expanduser()
    return Path(_context().config().config.trace.resolved_root())


def _fail(message: str) -> typer.Exit:
    typer.echo(f"ora: {message}", err=True)
    return typer.Exit(1)


def _console() -> Any:
    from rich.console import Console

    return Console(width=max(120, Console().width))


@trace_commands.command("ls")
def trace_ls(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="At most this many turns, newest first."),
    conversation: Optional[str] = typer.Option(None, "--conversation", help="Only this conversation."),
    since: Optional[str] = typer.Option(None, "--since", help="Only turns since 7d, 12h, or an ISO date."),
    root: Optional[str] = typer.Option(None, "--root", help=ROOT_HELP),
) -> None:
    """List traced turns, newest first."""
    from .reading import TraceReadError, list_turns, parse_since

    base = _root(root)
    try:
        turns = list_turns(base, conversation=conversation, since=parse_since(since))[:limit]
    except TraceReadError as exc:
        raise _fail(str(exc)) from None
    rows = [t.as_row() for t in turns]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        typer.echo(f"no traced turns under {base}")
        return
    from rich.table import Table

    table = Table(title=f"Traced turns under {base}")
    for col in ("turn", "conversation", "status", "mode", "gear", "contingencies", "prompt"):
        table.add_column(col, overflow="fold")
    for r in rows:
        prompt = r["prompt"] if len(r["prompt"]) <= 50 else r["prompt"][:47] + "..."
        table.add_row(r["turn_id"], r["conversation_id"], str(r["status"]), str(r["mode"] or "-"),
                      str(r["gear"] or "-"), str(r["contingencies"]), prompt)
    _console().print(table)


@trace_commands.command("show")
def trace_show(
    turn: Optional[str] = typer.Argument(None, help="Turn id, unique prefix, or directory (default: latest)."),
    as_json: bool = typer.Option(False, "--json", help="Print the turn's files as JSON."),
    brief: bool = typer.Option(False, "--brief", help="Only the summary and the step table."),
    root: Optional[str] = typer.Option(None, "--root", help=ROOT_HELP),
) -> None:
    """Render one traced turn in the terminal (the latest by default)."""
    from .reading import TraceReadError, find_turn, load_turn

    try:
        data = load_turn(find_turn(_root(root), turn))
    except TraceReadError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(data, indent=2, default=str))
        return
    _render_turn(data, brief=brief)


@trace_commands.command("view")
def trace_view(
    turn: Optional[str] = typer.Argument(None, help="Turn id, unique prefix, or directory (default: latest)."),
    output: Optional[str] = typer.Option(None, "--output", "-o",
                                         help="Where to write the page (default: view.html in the turn's "
                                              "directory)."),
    open_page: bool = typer.Option(False, "--open", help="Open the page in the browser."),
    root: Optional[str] = typer.Option(None, "--root", help=ROOT_HELP),
) -> None:
    """Write one traced turn as a self-contained HTML page (failure first) and print its path."""
    from .reading import TraceReadError, find_turn
    from .views import write_page
    from .views.dashboard import VIEW_NAME
    from .views.turn import render_turn_view

    try:
        path = find_turn(_root(root), turn)
        html = render_turn_view(path)
    except TraceReadError as exc:
        raise _fail(str(exc)) from None
    target = Path(output).expanduser() if output else path / VIEW_NAME
    try:
        write_page(target, html)
    except OSError as exc:
        raise _fail(f"cannot write {target}: {type(exc).__name__}: {exc}") from None
    typer.echo(str(target))
    if open_page:
        _open_in_browser(target)


@trace_commands.command("calls")
def trace_calls(
    turn: Optional[str] = typer.Argument(None, help="Turn id, unique prefix, or directory (default: latest)."),
    step: Optional[str] = typer.Option(None, "--step", "-s", help="Only this step's calls."),
    as_json: bool = typer.Option(False, "--json", help="Print every call whole (messages and output) as JSON."),
    root: Optional[str] = typer.Option(None, "--root", help=ROOT_HELP),
) -> None:
    """List a turn's model calls: step, number, role, backend, why, finish reason, tokens, latency."""
    from .calls import CallLookupError, turn_calls

    try:
        path, calls = turn_calls(_root(root), turn, step)
    except CallLookupError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(calls, indent=2, ensure_ascii=False))
        return
    if not calls:
        typer.echo(f"no model calls in {path}" + (f" step {step!r}" if step else ""))
        return
    _print_calls(path, calls)


@trace_commands.command("replay")
def trace_replay(
    turn: Optional[str] = typer.Argument(None, help="Turn id, unique prefix, or directory (default: latest)."),
    step: str = typer.Option(..., "--step", "-s", help="The step whose call to re-send."),
    call: int = typer.Option(..., "--call", "-n", min=1, help="The call's number within the step "
                                                              "(`ora trace calls` lists them)."),
    backend: Optional[str] = typer.Option(None, "--backend", help="A configured backend to send it to (default: "
                                                                  "the one the configuration names for the "
                                                                  "call's role)."),
    as_json: bool = typer.Option(False, "--json", help="Print the recorded and the new call as JSON."),
    root: Optional[str] = typer.Option(None, "--root", help=ROOT_HELP),
) -> None:
    """Re-send one recorded model call and print the new output beside the recorded one."""
    from ora_core.api import Ora, OraError

    from .calls import CallLookupError, find_call

    try:
        _, record = find_call(_root(root), turn, step, call)
    except CallLookupError as exc:
        raise _fail(str(exc)) from None
    ora = _context()
    try:
        result = Ora(host=ora.host, config=ora.config()).replay_call(record, backend=backend)
    except OraError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        _print_replay(result)
    if result.error:
        raise typer.Exit(1)


@root_commands.command("health")
def health(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    since: Optional[str] = typer.Option(None, "--since", help="Only turns since 7d, 12h, or an ISO date."),
    html: bool = typer.Option(False, "--html", help="Write the dashboard (one HTML file) and print its path."),
    output: Optional[str] = typer.Option(None, "--output", "-o",
                                         help="Where --html writes (default: health.html in the trace root)."),
    limit: int = typer.Option(500, "--limit", "-n", min=1, help="--html: turns in the listing, newest first."),
    views: bool = typer.Option(False, "--views", help="--html: also render the view of each listed turn that "
                                                     "has none."),
    rebuild_index: bool = typer.Option(False, "--rebuild-index",
                                       help="Read every turn from its files and rewrite the index."),
    open_page: bool = typer.Option(False, "--open", help="--html: open the dashboard in the browser."),
    root: Optional[str] = typer.Option(None, "--root", help=ROOT_HELP),
) -> None:
    """Step health over many turns: runs, pass, fail, broken, degraded %, latency, top contingencies;
    turns still open counted apart (running, interrupted). --html: the dashboard."""
    from .reading import TraceReadError, aggregate_health, parse_since

    base = _root(root)
    try:
        since_at = parse_since(since)
    except TraceReadError as exc:
        raise _fail(str(exc)) from None
    if html:
        _write_dashboard(base, since_at, output, limit=limit, views=views, rebuild=rebuild_index,
                         open_page=open_page)
        return
    report = aggregate_health(base, since=since_at, rebuild_index=rebuild_index)
    for note in (report.get("index") or {}).get("notes", []):
        typer.echo(f"ora: index: {note}", err=True)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    _render_health(report)


def _write_dashboard(root: Path, since: Any, output: Optional[str], *, limit: int, views: bool, rebuild: bool,
                     open_page: bool) -> None:
    from .views import write_page
    from .views.dashboard import render_dashboard

    if not root.is_dir():
        raise _fail(f"no trace root at {root}: no turn has been traced there (see trace.root in `ora config show`)")
    target = Path(output).expanduser() if output else root / "health.html"
    page, context = render_dashboard(root, since=since, limit=limit, rebuild=rebuild, page_dir=target.parent,
                                     views=views)
    for note in context["notes"]:
        typer.echo(f"ora: index: {note}", err=True)
    for problem in context["view_errors"]:
        typer.echo(f"ora: view: {problem}", err=True)
    try:
        write_page(target, page)
    except OSError as exc:
        raise _fail(f"cannot write {target}: {type(exc).__name__}: {exc}") from None
    report = context["report"]
    typer.echo(str(target))
    opened = report["open_turns"]
    typer.echo(f"{report['turns']} closed turn(s), {opened['running']} running, {opened['interrupted']} interrupted, "
               f"{opened['incomplete']} incomplete; {context['index'].get('from_index', 0)} from the index, "
               f"{context['index'].get('rebuilt', 0)} read from their files; {context['seconds']:.2f} s", err=True)
    if open_page:
        _open_in_browser(target)


def _open_in_browser(path: Path) -> None:
    """``webbrowser.open`` of the file's URL. Without a configured browser (or a display) nothing
    opens: that is said, and the command still succeeds (the file is written)."""
    import os
    import webbrowser

    url = path.resolve().as_uri()
    try:
        opened = webbrowser.open(url)
        why = "no browser is configured"
    except webbrowser.Error as exc:
        opened, why = False, f"{type(exc).__name__}: {exc}"
    if not opened:
        display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        typer.echo(f"ora: could not open a browser ({why}{'' if display else '; there is no display'}); "
                   f"the page is at {url} (set $BROWSER to choose one)", err=True)


def _render_turn(data: dict[str, Any], *, brief: bool) -> None:
    from rich.markdown import Markdown
    from rich.panel import Panel
    from rich.table import Table

    console = _console()
    turn = data["turn"]
    head = [
        f"prompt: {turn.get('prompt')}",
        f"status: {data.get('status', turn.get('status'))}   mode: {turn.get('mode') or '-'}   "
        f"gear: {turn.get('gear') or '-'}",
        f"conversation: {turn.get('conversation_id')}   config: {turn.get('config_hash')}",
        f"started: {turn.get('started_at')}   total: {(turn.get('timings') or {}).get('total_s', '?')} s",
        f"path: {data['path']}",
    ]
    if data.get("status_why"):
        head.append(f"{data['status']}: {data['status_why']}")
    if turn.get("question"):
        head.append(f"clarification needed: {turn['question']}")
    if turn.get("trace_write_errors"):
        head.append(f"trace write errors: {len(turn['trace_write_errors'])}")
    console.print(Panel("\n".join(head), title=f"turn {turn.get('turn_id')}"))
    table = Table(title="Steps")
    for col in ("#", "step", "verdict", "latency s", "contingencies"):
        table.add_column(col, overflow="fold")
    for step in data["steps"]:
        doc = step["doc"]
        h = doc.get("health") or {}
        table.add_row(f"{doc.get('index', 0):02d}", str(doc.get("step")),
                      str(h.get("verdict", doc.get("status"))) + (" (degraded)" if h.get("degraded") else ""),
                      f"{h.get('latency_s', 0):.4f}", ", ".join(h.get("contingencies") or []) or "-")
    console.print(table)
    ledger = turn.get("runtimeRoleModels") or []
    if ledger:
        calls = Table(title="Model calls" + ("  ⚠️ mismatch" if turn.get("runtimeRoleModelsMismatch") else ""))
        for col in ("role", "prompt key", "planned", "effective", "fallbacks", "latency s"):
            calls.add_column(col, overflow="fold")
        for c in ledger:
            calls.add_row(c.get("role", ""), c.get("promptKey", ""),
                          f"{c.get('plannedProvider')}/{c.get('plannedModel')}",
                          f"{c.get('effectiveProvider')}/{c.get('effectiveModel')}",
                          ", ".join(c.get("fallbackFlags") or []) or "-", f"{c.get('latencyS', 0):.3f}")
        console.print(calls)
    if turn.get("answer"):
        console.print(Panel(turn["answer"], title="answer"))
    if not brief:
        for step in data["steps"]:
            if step["markdown"]:
                console.rule(step["file"])
                console.print(Markdown(step["markdown"]))


def _print_calls(path: Path, calls: list[dict[str, Any]]) -> None:
    """One plain line per call (every field whole, as ``ora plugins list`` prints)."""
    typer.echo(f"model calls of {path}")
    for c in calls:
        tokens = f"{c.get('prompt_tokens', 0)}->{c.get('completion_tokens', 0)} tok"
        family = f"/{c['family']}" if c.get("family") else ""
        state = f"ERROR {c['error'].get('kind', '')}" if c.get("error") else (c.get("finish_reason") or "-")
        typer.echo(f"  {c.get('step')} #{c.get('step_call')} (turn call {c.get('call')})  {c.get('role')} on "
                   f"{c.get('backend') or c.get('effective_provider')}{family} {c.get('effective_model') or '-'}  "
                   f"{state}  {tokens}  {c.get('latency_s', 0):.2f}s  why: {c.get('why') or '-'}")


def _print_replay(result: Any) -> None:
    typer.echo(f"step {result.step} call {result.step_call} (turn call {result.call}); why: {result.why}")
    typer.echo(f"--- recorded: {result.recorded_backend} {result.recorded_model} "
               f"({result.recorded_error['kind'] if result.recorded_error else result.recorded_finish_reason})")
    typer.echo(result.recorded_output if result.recorded_output is not None else "(no output recorded)")
    state = f"ERROR {result.error.get('kind')}: {result.error.get('message')}" if result.error \
        else f"{result.finish_reason}, {result.prompt_tokens}->{result.completion_tokens} tok, {result.latency_s:.2f}s"
    typer.echo(f"--- now: {result.backend} {result.model} ({state})")
    typer.echo(result.output if result.output is not None else "(no output)")
    typer.echo(f"--- {'changed' if result.changed else 'unchanged'}")


def _render_health(report: dict[str, Any]) -> None:
    from rich.table import Table

    console = _console()
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(report["statuses"].items())) or "none"
    console.print(f"{report['turns']} turn(s) under {report['root']}"
                  + (f" since {report['since']}" if report["since"] else "") + f" — {statuses}")
    opened = report.get("open_turns") or {}
    if any(opened.values()):
        console.print(f"not closed, counted apart: {opened.get('running', 0)} running, "
                      f"{opened.get('interrupted', 0)} interrupted (their process died before closing them), "
                      f"{opened.get('incomplete', 0)} incomplete (no lock file: cannot be told)")
    for line in report.get("headlines") or []:
        console.print(f"  {line['text']}")
    table = Table(title="Step health")
    for col in ("step", "runs", "pass", "fail", "broken", "degraded %", "median s", "p95 s",
                "most frequent contingencies"):
        table.add_column(col, overflow="fold")
    for name, s in report["steps"].items():
        top = ", ".join(f"{c['name']} ×{c['count']}" for c in s["top_contingencies"][:3]) or "-"
        table.add_row(name, str(s["runs"]), str(s["pass"]), str(s["fail"]), str(s["broken"]),
                      f"{s['degraded_pct']:.1f}", f"{s['latency_median_s']:.3g}", f"{s['latency_p95_s']:.3g}", top)
    console.print(table)
    for problem in report["unreadable"]:
        typer.echo(f"unreadable: {problem}", err=True)
