"""``ora run``: one turn, as a client of the application API (``Ora.stream``).

The typed events of the turn drive the progress lines on stderr; the last one carries the result,
printed on stdout (or as JSON); every line passes the redactor (``state.echo``/``echo_err``): no
secret of the configuration, and on stderr no credential shape, is printed. The prompt comes from
the argument, from standard input (``ora run -``, nothing over the argument-length limit) or from a
file (``--prompt-file PATH``). A pending clarification is asked on a terminal (numbered options and
"just answer"; ``--ask`` forces it, ``--no-ask`` never asks) and the turn runs again on the chosen
mode, the question and the answer recorded in its trace; with ``--json`` or without a terminal the
turn returns ``needs_clarification`` (exit 3) unless ``--best-guess`` (or ``[pipeline] best_guess``)
continues on the best candidate. Exit codes: 0 ok or degraded, 1 configuration or plugin error,
2 usage error (an empty prompt, a missing or non-UTF-8 prompt file, empty standard input, an unknown
fault-injection mode), 3 needs_clarification, 4 halted (the diagnostic is printed), 130 interrupted
(Ctrl-C: the turn is cancelled with reason ``user-interrupt``, every call it awaited cancelled, its
trace closed as ``halted`` with the interruption and the step it was in, and its path printed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from ora_core.cli.state import (
    EXIT_HALTED,
    EXIT_INTERRUPTED,
    EXIT_NEEDS_CLARIFICATION,
    EXIT_USAGE,
    echo,
    echo_err,
    fail,
    get_config,
    get_host,
    redact_error,
)
from ora_core.kernel.errors import OraError, UsageError

MARKS = {"OK": "✓", "PASS": "✓", "FAIL": "✗", "BROKEN": "✗", "DEGRADED": "!", "SKIPPED": "-"}


def progress_line(event: Any) -> str | None:
    """One stderr line for a typed turn event, or None for events progress does not show."""
    if event.type == "step_started":
        return f"  → {event.step}"
    if event.type == "step_finished":
        return (f"  {MARKS.get(event.verdict, '?')} {event.step:<40} {event.verdict:<8} {event.latency_s:7.2f}s"
                + (f"  attempts={event.attempts}" if event.attempts > 1 else ""))
    if event.type == "retry":
        return f"    ↻ {event.step}: {'regenerate, ' if event.regenerate else ''}{event.reason}"
    if event.type == "fault_injected":
        return f"    ⚡ injected ({event.mode}) at {event.site}: {event.effect}"
    if event.type == "contingency" and event.severity in ("degraded", "error"):
        return f"    ! {event.name}"
    return None


def read_prompt(prompt: str | None, prompt_file: str | None, stdin: Any = None) -> str:
    """The prompt from the argument, ``-`` (standard input) or ``--prompt-file``; a usage error
    naming what was wrong (both given, neither, a missing or non-UTF-8 file, empty input)."""
    if prompt is not None and prompt_file is not None:
        raise UsageError("give the prompt either as an argument or with --prompt-file, not both")
    if prompt_file is not None:
        path = Path(prompt_file).expanduser()
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise UsageError(f"--prompt-file {str(path)!r} does not exist") from None
        except OSError as exc:
            raise UsageError(f"--prompt-file {str(path)!r} cannot be read: {exc.strerror or exc}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"--prompt-file {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start})") \
                from None
        if not text.strip():
            raise UsageError(f"--prompt-file {str(path)!r} is empty: there is nothing to answer")
        return text
    if prompt is None:
        raise UsageError("no prompt: give it as an argument, as '-' to read standard input, or with --prompt-file")
    if prompt == "-":
        stream = stdin if stdin is not None else sys.stdin
        data = stream.buffer.read() if hasattr(stream, "buffer") else stream.read()
        if isinstance(data, bytes):
            try:
                data = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UsageError(f"standard input is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        if not data.strip():
            raise UsageError("standard input is empty: there is nothing to answer")
        return data
    return prompt


#: ``ora run`` (a group without a name of its own: the root app merges its command).
commands = typer.Typer()


@commands.command("run")
def run(
    prompt: Optional[str] = typer.Argument(
        None, help="The prompt to answer; '-' reads it from standard input."),
    prompt_file: Optional[str] = typer.Option(None, "--prompt-file", help="Read the prompt from this file "
                                              "(UTF-8)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result object as JSON."),
    conversation: Optional[str] = typer.Option(None, "--conversation", help="Conversation id."),
    mode: Optional[str] = typer.Option(None, "--mode", help="Force a mode (skips pre-routing)."),
    best_guess: bool = typer.Option(
        False, "--best-guess", help="Continue on the best candidate mode instead of asking."
    ),
    inject: Optional[str] = typer.Option(None, "--inject", help="Fault-injection mode (tests, benches)."),
    progress: bool = typer.Option(True, "--progress/--no-progress",
                                  help="Print each step on stderr as it runs."),
    ask: Optional[bool] = typer.Option(
        None, "--ask/--no-ask", help="Ask a pending clarification here and continue with the answer "
        "(default: when standard input and output are a terminal and --json is off)."),
) -> None:
    """Run one turn on the configured pipeline; print the answer, its status and its trace."""
    from ora_core.engine.app import Ora, check_prompt
    from ora_core.engine.faults import resolve_injector

    try:
        prompt = check_prompt(read_prompt(prompt, prompt_file))
    except UsageError as exc:
        raise fail(str(exc), code=EXIT_USAGE) from None
    try:
        ora = Ora(host=get_host(), config=get_config())  # plugin and backend options checked here
    except OraError as exc:
        raise fail(str(exc)) from None
    if inject:
        try:
            resolve_injector(ora.host, inject)
        except OraError as exc:
            raise fail(str(exc), code=EXIT_USAGE) from None
    options = {"conversation_id": conversation, "mode": mode, "best_guess": best_guess, "inject": inject}
    try:
        import asyncio  # here, not at import: `ora --help` does not need it

        result = asyncio.run(_consume(ora, prompt, progress, **options))
        interactive = ask if ask is not None else (not as_json and sys.stdin.isatty() and sys.stdout.isatty())
        if result.status == "needs_clarification" and interactive and result.options:
            answer = ask_clarification(result)
            if answer is not None:
                result = asyncio.run(_consume(ora, prompt, progress, **{**options, "mode": None},
                                              clarification=answer))
    except UsageError as exc:
        raise fail(str(exc), code=EXIT_USAGE) from None
    except OraError as exc:
        raise fail(str(exc)) from None
    if as_json:
        echo(result.model_dump_json(indent=2))
    else:
        print_result(result)
    if result.status == "needs_clarification":
        raise typer.Exit(EXIT_NEEDS_CLARIFICATION)
    if result.interruption is not None:
        raise typer.Exit(EXIT_INTERRUPTED)
    if result.status == "halted":
        raise typer.Exit(EXIT_HALTED)


def ask_clarification(result: Any) -> Any:
    """Ask ``result``'s pending question on the terminal (numbered options and "just answer"); the
    ``ClarificationAnswer``, or None when the user gave no answer (end of input): then the turn
    stays ``needs_clarification``. An answer that is not an option is asked again, up to three times."""
    from ora_core.engine.app import JUST_ANSWER, answer_clarification

    echo_err(result.question)
    for i, mode in enumerate(result.options, 1):
        echo_err(f"  {i}. {mode}")
    echo_err(f"  {len(result.options) + 1}. {JUST_ANSWER}")
    for _ in range(3):
        try:
            reply = input("Your choice: ")
        except EOFError:
            return None
        try:
            return answer_clarification(result, reply)
        except UsageError as exc:
            echo_err(f"ora: {exc}")
    return None


#: The reason ``ora run`` gives a turn it cancels on Ctrl-C (``TurnResult.interruption.reason``).
USER_INTERRUPT = "user-interrupt"


async def _consume(ora: Any, prompt: str, progress: bool, **options: Any) -> Any:
    """The turn's events to the progress lines; its result. Ctrl-C (SIGINT) cancels the turn with
    reason ``user-interrupt``: its result is then the interrupted one, its trace closed."""
    import asyncio
    import signal

    from ora_core.engine.runner import TurnInterrupted

    loop = asyncio.get_running_loop()
    me = asyncio.current_task()
    try:
        loop.add_signal_handler(signal.SIGINT, me.cancel, USER_INTERRUPT)  # type: ignore[union-attr]
        handled = True
    except (NotImplementedError, RuntimeError, ValueError):
        # not the main thread, or no signal support here: Ctrl-C is asyncio.run's own (it cancels this
        # task without a message, so the turn is still closed, with the reason "cancelled")
        handled = False
    result = None
    try:
        async for event in ora.stream(prompt, **options):
            if event.type == "turn_finished":
                result = event.result
                continue
            if progress:
                line = progress_line(event)
                if line is not None:
                    print(redact_error(line), file=sys.stderr, flush=True)
    except TurnInterrupted as exc:
        echo_err(f"ora: interrupted ({exc.reason}); the turn was cancelled and its trace closed")
        return exc.result
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGINT)
    assert result is not None
    return result


def print_result(result: Any) -> None:
    if result.status == "needs_clarification":
        echo(f"Clarification needed: {result.question}")
    elif result.answer:
        echo(result.answer)
    if result.diagnostic:
        echo_err("Diagnostic:\n" + json.dumps(result.diagnostic, indent=2))
    echo("")
    echo(f"status: {result.status}   mode: {result.mode or '-'}   gear: {result.gear or '-'}")
    if result.verdicts:
        echo("verification: " + ", ".join(f"{step} {v}" for step, v in result.verdicts.items()))
    if result.contingencies:
        echo("contingencies: " + ", ".join(dict.fromkeys(result.contingencies)))
    if result.signals:
        counts: dict[str, int] = {}
        for signal in result.signals:
            key = f"{signal.detector}:{signal.name}"
            counts[key] = counts.get(key, 0) + 1
        echo("signals: " + ", ".join(f"{k} x{n}" if n > 1 else k for k, n in counts.items()))
    if result.interruption is not None:
        where = f" in step {result.interruption.step}" if result.interruption.step else ""
        echo(f"interrupted: {result.interruption.reason}{where}")
    if result.tracing_degraded:
        echo("tracing: degraded (see stderr)")
    echo(f"trace: {result.trace_path or '(none written)'}")
