"""The ``playwright`` backend: one persistent Chromium context per backend, one call at a time.

Each call opens the profile's page (a fresh conversation), waits for the prompt box, types the
whole package (system text first: chat UIs have no system role), sends it, and watches the page
until the reply has stopped changing. Whatever the page shows instead of an answer is a typed
error: a login wall (``BackendAuthError``), an expired session (``BackendSessionExpired``), a
rate-limit banner (``BackendRateLimited``), an error banner or error text in the reply bubble,
an empty reply (``BackendBadResponse``), a page that never finishes (``BackendTimeout``).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ora_core.api import (
    BackendAuthError,
    BackendBadResponse,
    BackendError,
    BackendRateLimited,
    BackendSessionExpired,
    BackendTimeout,
    BackendUnavailable,
    Completion,
    CompletionParams,
    ConfigError,
    Message,
    redact_text,
)

from .options import CHROMIUM as CHROMIUM  # re-exported: both lived here
from .options import BrowserOptions as BrowserOptions
from .profiles import SelectorProfile, load_profile

BACKEND_TYPE = "playwright"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
]
SNAPSHOT_JS = (Path(__file__).with_name("snapshot.js")).read_text(encoding="utf-8")
ERROR_CLASSES: dict[str, type[BackendError]] = {
    "session_expired": BackendSessionExpired, "rate_limited": BackendRateLimited,
    "auth": BackendAuthError, "unavailable": BackendUnavailable,
}


def default_user_data_dir(profile: str) -> Path:
    from ora_core.api import user_data_dir

    return user_data_dir() / "browser" / profile


def render_prompt(messages: Sequence[Message]) -> str:
    """The package as one message: a chat UI has no system role, so the system text leads."""
    parts = []
    for m in messages:
        if m.role in ("system", "user"):
            parts.append(m.content)
        else:
            parts.append(f"[earlier assistant reply]\n{m.content}")
    return "\n\n---\n\n".join(p for p in parts if p.strip())


class BrowserBackend:
    provider = BACKEND_TYPE

    def __init__(self, settings: Any, options: BrowserOptions, profile: SelectorProfile) -> None:
        self.settings = settings
        self.options = options
        self.profile = profile
        self.model: str = settings.model or f"{profile.name}-web"
        self.family: str = settings.family
        self.user_data_dir = Path(options.user_data_dir).expanduser() if options.user_data_dir else \
            default_user_data_dir(profile.name)
        self._pw: Any = None
        self._context: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None

    # --- errors ---------------------------------------------------------------------------------

    def _error(self, cls: type[BackendError], message: str, detail: str = "") -> BackendError:
        # What the page showed or the browser said passes redact_text: a token on the page never
        # becomes an error's text.
        return cls(redact_text(f"{self.profile.name}: {message}"), provider=self.provider, model=self.model,
                   detail=redact_text(detail))

    def _wall_error(self, state: dict[str, Any], *, sent: bool) -> BackendError | None:
        if state.get("session_expired"):
            return self._error(BackendSessionExpired, f"the session expired ({state['session_expired']!r}); log in "
                               f"again in {self.user_data_dir}", detail=str(state))
        if state.get("login_wall"):
            cls = BackendSessionExpired if sent else BackendAuthError
            return self._error(cls, f"the page shows a login wall ({state['login_wall']!r}): log in once with "
                               f"`{self.options.executable_path} --user-data-dir={self.user_data_dir} "
                               f"{self.profile.url}`", detail=str(state))
        if state.get("rate_limited"):
            return self._error(BackendRateLimited, f"the page shows a rate-limit banner: {state['rate_limited']!r}",
                               detail=str(state))
        if state.get("error_banner"):
            return self._error(BackendUnavailable, f"the page shows an error: {state['error_banner']!r}",
                               detail=str(state))
        return None

    def _reply_error(self, text: str) -> BackendError | None:
        head = text.strip()[:300]
        for kind, patterns in self.profile.reply_error_text.items():
            for pattern in patterns:
                if re.search(pattern, head):
                    return self._error(ERROR_CLASSES[kind], f"the reply bubble holds an error, not an answer "
                                       f"({kind}): {head[:120]!r}", detail=text[:1500])
        return None

    # --- the browser ----------------------------------------------------------------------------

    async def _ensure_context(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._context is not None and self._loop is loop:
            return self._context
        self._context = self._pw = None  # a context of a finished event loop cannot be reused
        self._loop, self._lock = loop, asyncio.Lock()
        if not Path(self.options.executable_path).exists():
            raise self._error(BackendUnavailable, f"no browser at {self.options.executable_path} "
                              "(install Debian's chromium: apt-get install -y chromium)")
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import async_playwright

        self.user_data_dir.mkdir(parents=True, exist_ok=True)
        pw = await async_playwright().start()
        try:
            self._context = await pw.chromium.launch_persistent_context(
                str(self.user_data_dir), executable_path=self.options.executable_path,
                headless=self.options.headless, args=[*CHROMIUM_ARGS, *self.options.extra_args])
        except PlaywrightError as exc:
            await pw.stop()
            raise self._error(BackendUnavailable, f"Chromium did not start with user-data dir {self.user_data_dir} "
                              "(is another browser using it?)", detail=str(exc)[:1500]) from exc
        self._pw = pw
        return self._context

    async def _page(self) -> Any:
        context = await self._ensure_context()
        return context.pages[0] if context.pages else await context.new_page()

    async def _snapshot(self, page: Any) -> dict[str, Any]:
        p = self.profile
        return await page.evaluate(SNAPSHOT_JS, {
            "reply": p.reply, "busy": p.busy, "input": p.input, "login_wall": p.login_wall,
            "session_expired": p.session_expired, "rate_limited": p.rate_limited, "error_banner": p.error_banner})

    async def _open(self, page: Any) -> dict[str, Any]:
        """Open the chat page; return its state once the prompt box (or a wall) shows."""
        from playwright.async_api import Error as PlaywrightError

        try:
            await page.goto(self.profile.url, wait_until="domcontentloaded",
                            timeout=self.options.navigation_timeout_s * 1000)
        except PlaywrightError as exc:
            cls = BackendTimeout if "Timeout" in type(exc).__name__ else BackendUnavailable
            raise self._error(cls, f"cannot open {self.profile.url}", detail=str(exc)[:1500]) from exc
        deadline = time.monotonic() + self.profile.ready_timeout_s
        while True:
            state = await self._snapshot(page)
            wall = self._wall_error(state, sent=False)
            if wall is not None:
                raise wall
            if state["input"]:
                return state
            if time.monotonic() > deadline:
                raise self._error(BackendTimeout, f"no prompt box ({self.profile.input!r}) on {self.profile.url} "
                                  f"within {self.profile.ready_timeout_s:g}s", detail=str(state))
            await asyncio.sleep(self.profile.poll_ms / 1000)

    async def _send(self, page: Any, text: str) -> None:
        box = page.locator(self.profile.input).first
        await box.fill(text)
        if self.profile.send:
            await page.locator(self.profile.send).first.click()
        else:
            await box.press("Enter")

    async def _await_reply(self, page: Any, before: int, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        stable_s = self.profile.stable_ms / 1000
        last_text: str | None = None
        changed_at = time.monotonic()
        while True:
            state = await self._snapshot(page)
            wall = self._wall_error(state, sent=True)
            if wall is not None:
                raise wall
            now = time.monotonic()
            if state["replies"] > before and state["last"] is not None:
                text = state["last"]
                if text != last_text:
                    last_text, changed_at = text, now
                quiet = now - changed_at
                if not state["busy"] and ((text.strip() and quiet >= stable_s) or quiet >= 2 * stable_s):
                    return text
            if now > deadline:
                got = "no reply appeared" if last_text is None else f"the reply was still changing or busy " \
                      f"after {len(last_text)} characters"
                raise self._error(BackendTimeout, f"no finished reply within timeout_s={timeout_s:g}s: {got}",
                                  detail=f"partial text: {(last_text or '')[:1500]}")
            await asyncio.sleep(self.profile.poll_ms / 1000)

    # --- the backend protocol -------------------------------------------------------------------

    async def complete(self, messages: Sequence[Message], params: CompletionParams) -> Completion:
        from playwright.async_api import Error as PlaywrightError

        start = time.perf_counter()
        prompt = render_prompt(messages)
        await self._ensure_context()
        assert self._lock is not None
        async with self._lock:
            page = await self._page()
            try:
                state = await self._open(page)
                await self._send(page, prompt)
                text = await self._await_reply(page, state["replies"], params.timeout_s)
            except PlaywrightError as exc:
                raise self._error(BackendUnavailable, f"the page broke while chatting: {type(exc).__name__}",
                                  detail=str(exc)[:1500]) from exc
        if not text.strip():
            raise self._error(BackendBadResponse, "the site produced an empty reply")
        problem = self._reply_error(text)
        if problem is not None:
            raise problem
        return Completion(text=text.strip(), provider=self.provider, model=self.model, family=self.family,
                          prompt_tokens=len(prompt) // 4, completion_tokens=len(text) // 4,
                          latency_s=time.perf_counter() - start, finish_reason="stop")

    async def check(self) -> dict[str, Any]:
        """Open the chat page: the browser starts, the page loads, no wall stands in the way."""
        from playwright.async_api import Error as PlaywrightError

        start = time.perf_counter()
        await self._ensure_context()
        assert self._lock is not None
        async with self._lock:
            try:
                await self._open(await self._page())
            except PlaywrightError as exc:
                raise self._error(BackendUnavailable, "the page broke", detail=str(exc)[:1500]) from exc
        return {"url": self.profile.url, "profile": self.profile.name, "user_data_dir": str(self.user_data_dir),
                "logged_in": True, "latency_s": round(time.perf_counter() - start, 3)}

    async def aclose(self) -> None:
        context, pw = self._context, self._pw
        self._context = self._pw = None
        if context is not None and self._loop is asyncio.get_running_loop():
            await context.close()
            await pw.stop()


class BrowserFactory:
    name = BACKEND_TYPE

    def create(self, settings: Any) -> BrowserBackend:
        try:
            options = BrowserOptions.model_validate(dict(settings.options))
        except ValidationError as exc:
            problems = "; ".join(f"options.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"invalid options for a 'playwright' backend: {problems}", field="options") from None
        profile = load_profile(options.profile, options.profile_file, options.selectors)
        return BrowserBackend(settings, options, profile)
