"""The Starlette application ``ora serve`` runs (``create_app``, a factory: uvicorn's workers each call
it, their settings in ``ORA_SERVE_SETTINGS``). ``docs/serve.md`` is the reference: the routes, the
failure semantics table, the operations.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ora_core.api import (
    BackendError,
    ConfigError,
    Ora,
    OraError,
    PluginError,
    Redactor,
    UsageError,
    answer_clarification,
    redact_text,
)

from .settings import TABLE, ServeSettings
from .shapes import (
    AUTO_MODEL,
    MODEL_PREFIX,
    ChatRequest,
    Conversation,
    RequestError,
    chunk,
    completion,
    content_of,
    error_body,
    ora_object,
    read_chat,
    read_conversation,
    sse_data,
    usage_of,
)
from .turns import JOURNAL_DIR, TurnBoard, TurnRun, follow_journal, valid_turn_id

log = logging.getLogger("ora.serve")
access = logging.getLogger("ora.serve.access")
KEEPALIVE_S = 15.0
#: The roles each gear's steps may call (``phase_a`` unless Phase A is skipped; the verifier roles
#: only with a model verifier, ``[verification] verifier = "model"``).
GEAR_ROLES: dict[int, tuple[str, ...]] = {
    1: ("phase_a", "direct"),
    2: ("phase_a", "analyst", "reviser", "verifier", "final_verifier", "evidence"),
    3: ("phase_a", "depth", "breadth", "reviser", "verifier", "final_verifier", "evidence"),
    4: ("phase_a", "depth", "breadth", "evaluator", "reviser", "verifier", "consolidator", "final_verifier",
        "evidence"),
    5: ("phase_a", "evidence", "advocate", "self_consistency", "challenger", "reconciler", "validation"),
}


class Server:
    """What the routes share: the ``Ora`` application, the settings, the turn board, the redactor."""

    def __init__(self, ora: Ora, settings: ServeSettings) -> None:
        self.ora = ora
        self.settings = settings
        self.api_key = settings.api_key()
        root = Path(ora.config.config.trace.resolved_root())
        self.board = TurnBoard(ora, max_turns=settings.max_turns, shutdown_grace_s=settings.shutdown_grace_s,
                               journal_root=root / JOURNAL_DIR)
        self.trace_root = root
        self.redactor = Redactor.for_config(ora.config)

    # --- common checks ---------------------------------------------------------------------------

    def authorize(self, request: Request) -> None:
        if not self.api_key:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise RequestError(401, "no API key: send the header 'Authorization: Bearer <key>'",
                               code="invalid_api_key")
        if not hmac.compare_digest(token.strip().encode(), self.api_key.encode()):
            raise RequestError(401, "incorrect API key provided", code="invalid_api_key")

    async def body(self, request: Request) -> bytes:
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise RequestError(413, f"the request body is {declared} bytes, over this server's limit of {limit} "
                                    "(max_body_bytes)", code="body_too_large")
        size = 0
        parts = []
        async for part in request.stream():
            size += len(part)
            if size > limit:
                raise RequestError(413, f"the request body is over this server's limit of {limit} bytes "
                                        "(max_body_bytes)", code="body_too_large")
            parts.append(part)
        return b"".join(parts)

    def mode_of(self, model: str) -> str | None:
        if model == AUTO_MODEL:
            return None
        name = model.removeprefix(MODEL_PREFIX)
        if not model.startswith(MODEL_PREFIX) or name not in self.ora.modes.modes:
            known = ", ".join([AUTO_MODEL, *(MODEL_PREFIX + m for m in sorted(self.ora.modes.modes))])
            raise RequestError(404, f"the model {model!r} does not exist here; the models are: {known}",
                               param="model", code="model_not_found")
        return name

    # --- /v1/models ------------------------------------------------------------------------------

    def models(self) -> dict[str, Any]:
        config = self.ora.config.config
        rows = {row["backend"]: row for row in self.ora.backends()}

        def used(gear: int | None) -> list[dict[str, Any]]:
            roles = GEAR_ROLES.get(gear, ()) if gear is not None else tuple(dict.fromkeys(
                r for g in GEAR_ROLES.values() for r in g))
            found: dict[str, dict[str, Any]] = {}
            for role in roles:
                name = str(getattr(config.roles, role, "") or "")
                row = rows.get(name)
                if row is None:
                    continue
                entry = found.setdefault(name, {"backend": name, "type": row["type"], "model": row["model"],
                                                "family": row["family"], "roles": []})
                entry["roles"].append(role)
            return list(found.values())

        verification = {"verifier": config.verification.verifier,
                        "final_verifier": config.verification.final_verifier}
        data = [{"id": AUTO_MODEL, "object": "model", "created": 0, "owned_by": "ora",
                 "ora": {"mode": None, "gear": None, "routing": "pre-routing picks the mode of each prompt",
                         "verification": verification, "backends": used(None)}}]
        for name, mode in sorted(self.ora.modes.modes.items()):
            data.append({"id": MODEL_PREFIX + name, "object": "model", "created": 0, "owned_by": "ora",
                         "ora": {"mode": name, "gear": mode.gear, "title": mode.title,
                                 "verification": verification, "backends": used(mode.gear)}})
        return {"object": "list", "data": data}


def _error_response(exc: RequestError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


def failure_of(run: TurnRun) -> tuple[int, dict[str, Any]]:
    """The HTTP status and OpenAI-shaped error of a turn that did not answer (``docs/serve.md``)."""
    result, error = run.result, run.error
    if result is not None:  # a halted turn: its diagnostic, its trace
        diagnostic = result.diagnostic or {}
        message = str(diagnostic.get("message") or diagnostic.get("final_failure") or "no diagnostic message")
        error = diagnostic.get("error") if isinstance(diagnostic.get("error"), dict) else {}
        failed_class = str(diagnostic.get("error_class") or error.get("error_class") or "")
        interruption = result.interruption
        if interruption is not None and interruption.reason == "shutdown":
            status, kind, code = 503, "server_error", "shutting_down"
        elif interruption is not None:
            status, kind, code = 499, "cancelled", f"interrupted_{interruption.reason}"
        elif failed_class.startswith("Backend"):  # every backend of a role failed: the upstream's fault
            status, kind, code = 502, "backend_error", "turn_halted"
            message = f"{message} ({failed_class}: {error.get('message') or diagnostic.get('message', '')})"
        else:
            status, kind, code = 500, "turn_halted", "turn_halted"
        return status, error_body(f"the turn halted: {message}", type=kind, code=code,
                                   ora=ora_object(result, journal_error=run.journal_error))
    if isinstance(error, UsageError):
        return 400, error_body(str(error), type="invalid_request_error", code="usage_error")
    if isinstance(error, (ConfigError, PluginError)):
        return 500, error_body(f"configuration error: {error}", type="configuration_error",
                               code=type(error).__name__, trace_id=run.turn_id)
    if isinstance(error, BackendError):
        return 502, error_body(f"backend failure: {error}", type="backend_error", code=type(error).__name__,
                               trace_id=run.turn_id)
    if isinstance(error, OraError):
        return 500, error_body(str(error), type="server_error", code=type(error).__name__, trace_id=run.turn_id)
    if isinstance(error, asyncio.CancelledError):
        return 503, error_body("the turn was cancelled before it started", type="server_error", code="cancelled",
                               trace_id=run.turn_id)
    name = type(error).__name__ if error is not None else "no result"
    return 500, error_body(f"the server failed: {name}: {error}", type="server_error", code="server_fault",
                           trace_id=run.turn_id)


def _answered(run: TurnRun) -> bool:
    return run.result is not None and run.result.status in ("ok", "degraded", "needs_clarification")


def _ora_headers(run: TurnRun) -> dict[str, str]:
    headers = {"x-ora-trace-id": run.turn_id, "x-ora-worker": str(os.getpid())}
    if run.result is not None:
        headers["x-ora-status"] = run.result.status
    return headers


async def chat_completions(request: Request) -> Response:
    server: Server = request.app.state.server
    scope_info = request.scope.setdefault("ora", {})
    try:
        server.authorize(request)
        raw = await server.body(request)
        chat = read_chat(raw)
        conversation = read_conversation(chat, max_prompt_chars=server.settings.max_prompt_chars)
        mode = server.mode_of(chat.model)
        options = _turn_options(request, chat, conversation, mode)
        server.board.admit()
    except RequestError as exc:
        return _error_response(exc)
    turn_id = Ora.new_turn_id()
    scope_info["trace_id"] = turn_id
    if server.settings.log_prompts:
        scope_info["prompt"] = server.redactor.text(conversation.prompt)[:200]
    prompt = options.pop("prompt")
    run = server.board.start(turn_id, prompt, **options)
    if chat.stream:
        include_usage = bool(chat.stream_options and chat.stream_options.include_usage)
        return StreamingResponse(_stream(run, chat.model, include_usage, scope_info), media_type="text/event-stream",
                                 headers={"x-ora-trace-id": turn_id, "x-ora-worker": str(os.getpid()),
                                          "cache-control": "no-cache"})
    watcher = asyncio.ensure_future(_watch_disconnect(request, run))
    try:
        await run.done.wait()
    finally:
        watcher.cancel()
    scope_info["ora_status"] = run.result.status if run.result is not None else "error"
    if _answered(run):
        return JSONResponse(completion(run.result, chat.model, journal_error=run.journal_error),
                            headers=_ora_headers(run))
    status, body = failure_of(run)
    return JSONResponse(body, status_code=status, headers=_ora_headers(run))


def _turn_options(request: Request, chat: ChatRequest, conversation: Conversation, mode: str | None) -> dict[str, Any]:
    """The ``Ora.stream`` arguments of a chat request: the prompt, the mode, the conversation id (header
    ``x-ora-conversation``, else the ``user`` field), the messages before the prompt as the turn's
    ``history`` (its conversation stream), and the answer to this server's question when the message
    before the prompt asked one (then the history is what came before the question's own prompt)."""
    conversation_id = request.headers.get("x-ora-conversation") or chat.user or None
    options: dict[str, Any] = {"prompt": conversation.prompt, "mode": mode, "conversation_id": conversation_id,
                               "history": conversation.earlier}
    if conversation.question is not None and conversation.asked_about is not None:
        from ora_core.api import TurnResult

        asked = TurnResult(status="needs_clarification", question=conversation.question,
                           options=conversation.options, turn_id=conversation.asked_in_turn)
        try:
            answer = answer_clarification(asked, conversation.prompt)
        except UsageError as exc:
            raise RequestError(400, f"messages.{conversation.prompt_index}.content: the answer to the question "
                                    f"{conversation.question!r}: {exc}", param="messages",
                               code="clarification_not_understood") from None
        options.update(prompt=conversation.asked_about, clarification=answer, mode=None,
                       history=conversation.earlier[:conversation.asked_about_index])
    return options


async def _watch_disconnect(request: Request, run: TurnRun) -> None:
    """Cancel ``run`` (reason ``client-disconnected``) when its client goes away before the answer."""
    while not run.done.is_set():
        message = await request.receive()
        if message["type"] == "http.disconnect":
            if run.cancel("client-disconnected"):
                log.info("ora serve: client gone; cancelling turn %s in step %s", run.turn_id, run.step or "-")
            return


async def _stream(run: TurnRun, model: str, include_usage: bool, scope_info: dict[str, Any]) -> AsyncIterator[bytes]:
    """The chat stream: a first chunk at once (its ``id`` the trace id), the answer, a final chunk
    carrying the ``ora`` object, the usage chunk when asked, ``[DONE]``; or, when the turn did not answer,
    ``data: {"error": ...}`` as the last event and no ``[DONE]``. Cancelled (the client left): the turn
    is cancelled with reason ``client-disconnected``."""
    created = int(time.time())
    try:
        yield sse_data(chunk(run.turn_id, model, created, {"role": "assistant", "content": ""}))
        while not run.done.is_set():
            try:
                await asyncio.wait_for(run.done.wait(), KEEPALIVE_S)
            except TimeoutError:
                yield b": keep-alive\n\n"
    finally:
        # cancelled while waiting (Starlette saw the disconnect), or closed at a yield: the client is gone.
        # The turn runs as a task of its own: it closes its trace there, nothing here waits for it.
        if not run.done.is_set():
            scope_info["ora_status"] = "interrupted"
            if run.cancel("client-disconnected"):
                log.info("ora serve: client gone; cancelling turn %s in step %s", run.turn_id, run.step or "-")
    result = run.result
    scope_info["ora_status"] = result.status if result is not None else "error"
    if not _answered(run):
        _, body = failure_of(run)
        yield sse_data(body)
        return
    yield sse_data(chunk(run.turn_id, model, created, {"content": content_of(result)}))
    final = ora_object(result, journal_error=run.journal_error)
    yield sse_data(chunk(run.turn_id, model, created, {}, "stop", ora=final))
    if include_usage:
        yield sse_data({"id": run.turn_id, "object": "chat.completion.chunk", "created": created, "model": model,
                        "choices": [], "usage": usage_of(result)})
    yield sse_data("[DONE]")


async def list_models(request: Request) -> Response:
    server: Server = request.app.state.server
    try:
        server.authorize(request)
    except RequestError as exc:
        return _error_response(exc)
    return JSONResponse(server.models())


async def turn_events(request: Request) -> Response:
    """``GET /v1/ora/turns/{trace_id}/events``: the turn's typed events as SSE (``id:``, ``event:``,
    ``data:``), from ``Last-Event-ID`` on; ends with ``turn_finished`` (or ``error``)."""
    from sse_starlette import EventSourceResponse, ServerSentEvent

    server: Server = request.app.state.server
    turn_id = request.path_params["trace_id"]
    try:
        server.authorize(request)
        last = request.headers.get("last-event-id", "0").strip() or "0"
        if not last.isdigit():
            raise RequestError(400, f"Last-Event-ID: {last!r} is not an event id (a whole number)",
                               param="Last-Event-ID")
        after = int(last)
        run = server.board.in_flight.get(turn_id) if valid_turn_id(turn_id) else None
        journal = server.board.journal_for(turn_id) if valid_turn_id(turn_id) else None
        if run is None and (journal is None or not journal.exists()):
            raise RequestError(404, f"no turn {turn_id!r}: no worker of this server runs it and its event journal "
                                    f"is not under {server.trace_root / JOURNAL_DIR}", param="trace_id",
                               code="turn_not_found")
    except RequestError as exc:
        return _error_response(exc)
    source = run.follow(after) if run is not None else follow_journal(journal, after,  # type: ignore[arg-type]
                                                                        server.settings.events_idle_timeout_s)
    request.scope.setdefault("ora", {})["trace_id"] = turn_id

    async def events() -> AsyncIterator[Any]:
        async for entry in source:
            yield ServerSentEvent(data=json.dumps(entry["data"], ensure_ascii=False, separators=(",", ":")),
                                  id=str(entry["id"]), event=entry["event"], sep="\n")

    return EventSourceResponse(events(), sep="\n", ping=KEEPALIVE_S,
                               headers={"x-ora-worker": str(os.getpid()),
                                        "x-ora-events-source": "memory" if run is not None else "journal"},
                               ping_message_factory=lambda: ServerSentEvent(comment="keep-alive", sep="\n"),
                               shutdown_grace_period=server.settings.shutdown_grace_s + 2)


async def healthz(request: Request) -> Response:
    """Plugins loaded (and failed), the turns in flight; ``?deep=1`` probes every backend as
    ``ora models list --check`` does. 200 when serving, 503 when shutting down or a probed backend is
    unreachable."""
    server: Server = request.app.state.server
    host = server.ora.host
    failed = [{"plugin": r.name, "distribution": r.distribution, "status": r.status, "errors": list(r.errors)}
              for r in host.records.values() if r.status != "ok"]
    body: dict[str, Any] = {
        "status": "ok",
        "worker": os.getpid(),
        "plugins": {"loaded": sorted(n for n, r in host.records.items() if r.status == "ok"), "failed": failed},
        "turns": {"in_flight": len(server.board.in_flight), "max": server.board.max_turns,
                  "served": server.board.served, "refused_busy": server.board.refused_busy},
        "event_journal_failures": server.board.journal_failures,
        "config_hash": server.ora.config.hash,
    }
    if failed or server.board.journal_failures:
        body["status"] = "degraded"
    code = 200
    if request.query_params.get("deep") in ("1", "true", "yes"):
        try:
            server.authorize(request)
        except RequestError as exc:
            return _error_response(exc)
        checks = await server.ora.check_backends()
        body["backends"] = checks
        if any(c.get("reachable") is False for c in checks.values()):
            body["status"], code = "unhealthy", 503
    if server.board.shutting_down:
        body["status"], code = "shutting_down", 503
    return JSONResponse(body, status_code=code)


class AccessLog:
    """One line per request: client, method, path, HTTP status, time, trace id and turn status; the
    prompt only with ``log_prompts`` (redacted). Never a body, never a header."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 0}

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            info = scope.get("ora", {})
            client = scope.get("client") or ("-", 0)
            extra = f' prompt={json.dumps(info["prompt"])}' if "prompt" in info else ""
            access.info('%s "%s %s" %d %.1fms trace=%s ora_status=%s%s', client[0], scope["method"], scope["path"],
                        status["code"], (time.perf_counter() - start) * 1000, info.get("trace_id", "-"),
                        info.get("ora_status", "-"), extra)


def _uvicorn_server() -> Any:
    """The uvicorn ``Server`` running this process, found through its SIGTERM handler (a bound
    ``handle_exit``), or None."""
    handler = signal.getsignal(signal.SIGTERM)
    owner = getattr(handler, "__self__", None)
    return owner if owner is not None and hasattr(owner, "should_exit") else None


async def _watch_shutdown(board: TurnBoard) -> None:
    """Tell the board when uvicorn starts to shut down (SIGTERM/SIGINT), while it still waits for the
    requests in flight: the board names them and cancels the ones still running after the grace."""
    while True:
        server = _uvicorn_server()
        if server is not None and server.should_exit:
            board.begin_shutdown()
            return
        await asyncio.sleep(0.1)


def _setup_logging() -> None:
    for logger in (log, access):
        if not logger.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)
            logger.propagate = False


def build_app(ora: Ora, settings: ServeSettings) -> Starlette:
    """The application over an ``Ora`` already opened (tests embed it this way)."""
    server = Server(ora, settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        watcher = asyncio.ensure_future(_watch_shutdown(server.board))
        log.info("ora serve: worker %d ready (config %s, max %d turns, trace root %s)", os.getpid(),
                 ora.config.hash, settings.max_turns, server.trace_root)
        try:
            yield
        finally:
            watcher.cancel()
            await server.board.close()

    app = Starlette(routes=[
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/ora/turns/{trace_id}/events", turn_events, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
    ], lifespan=lifespan)
    app.state.server = server
    app.add_middleware(AccessLog)
    return app


def open_ora(settings: ServeSettings) -> Ora:
    """``Ora.open`` on the settings' configuration, with ``[plugins.serve] api_key_env`` set so the
    redaction layer knows the bearer key as a secret of the configuration."""
    return Ora.open(settings.config, plugins={TABLE: {"api_key_env": settings.api_key_env}})


def create_app() -> Starlette:
    """The factory uvicorn's workers call (``ora_serve.app:create_app``)."""
    _setup_logging()
    settings = ServeSettings.from_env()
    try:
        ora = open_ora(settings)
    except OraError as exc:
        log.error("ora serve: %s", redact_text(str(exc)))
        raise
    return build_app(ora, settings)
