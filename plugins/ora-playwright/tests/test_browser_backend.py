"""The browser backend on Debian's Chromium against a local chat page that answers, expires
the session, shows a rate-limit banner, hangs, replies empty or prints an error as the reply.
Each of those ends in a typed error, never in text taken for an answer (seed 000, failure #9)."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ora_playwright
import ora_scripted
import pytest
from chat_site import MIMICS, ChatSite
from ora_playwright.profiles import BUILTIN_PROFILES

from ora_core.api import (
    BackendAuthError,
    BackendBadResponse,
    BackendRateLimited,
    BackendSessionExpired,
    BackendTimeout,
    BackendUnavailable,
    CompletionParams,
)
from ora_core.testing import BackendPool, TurnContext, build_messages, call_role, make_config, make_host

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("chromium") is None and not Path("/usr/bin/chromium").exists(),
                                 reason="Debian's chromium is not installed (scripts/install.sh installs it)")]
MESSAGES = build_messages("Answer briefly.", "What is the capital of France?")


@pytest.fixture(scope="module")
def site() -> Iterator[ChatSite]:
    with ChatSite() as s:
        yield s


@pytest.fixture(scope="module")
def profile_file(site: ChatSite, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("profile") / "local-chat.toml"
    path.write_text(site.profile_toml())
    return path


@pytest.fixture(scope="module")
def user_dir(site: ChatSite, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user-data dir in which the user has logged in once (the site's cookie is stored)."""
    directory = tmp_path_factory.mktemp("browser-profile")

    async def log_in() -> None:
        from playwright.async_api import async_playwright

        async with async_playwright() as pw:
            context = await pw.chromium.launch_persistent_context(
                str(directory), executable_path="/usr/bin/chromium", headless=True,
                args=ora_playwright.backend.CHROMIUM_ARGS)
            page = context.pages[0] if context.pages else await context.new_page()
            await page.goto(f"http://127.0.0.1:{site.port}/login?user=me")
            await context.close()

    asyncio.run(log_in())
    return directory


def settings(profile_file: Path, user_dir: Path, **over: Any) -> Any:
    table = {"type": "playwright", "model": "local-chat-web", "family": "test-web", "timeout_s": 5.0,
             "options": {"profile": "generic", "profile_file": str(profile_file), "user_data_dir": str(user_dir)}}
    table.update(over)
    return make_config({"backends": {"local": table}}, base_default=False)


@pytest.fixture(scope="module")
def browser(profile_file: Path, user_dir: Path) -> Iterator[Any]:
    """One backend (one Chromium) for the module, on one event loop, like one long-lived process."""
    backend = make_host(ora_playwright).get("backend", "playwright").create(
        settings(profile_file, user_dir).config.backends["local"])
    loop = asyncio.new_event_loop()

    def call(**params: Any) -> Any:
        return loop.run_until_complete(backend.complete(MESSAGES, CompletionParams(**{"timeout_s": 5.0, **params})))

    call.backend = backend  # type: ignore[attr-defined]
    call.loop = loop  # type: ignore[attr-defined]
    yield call
    loop.run_until_complete(backend.aclose())
    loop.close()


@pytest.fixture(autouse=True)
def _answering(site: ChatSite) -> Iterator[None]:
    site.mode, site.reply, site.require_login = "answer", "Paris is the capital of France.", True
    yield
    site.mode, site.require_login = "answer", True


def test_it_answers_through_the_page_and_types_the_whole_package(browser: Any, site: ChatSite) -> None:
    site.reply = "Paris is the capital of France, on the Seine."
    completion = browser()
    assert completion.text == "Paris is the capital of France, on the Seine."
    assert (completion.provider, completion.model, completion.family) == ("playwright", "local-chat-web", "test-web")
    typed = site.prompts[-1]
    assert typed.startswith("## UNIVERSAL ANTI-CONFABULATION DIRECTIVE") and typed.endswith(
        "What is the capital of France?")


def test_an_expired_session_banner_is_a_session_expired_error(browser: Any, site: ChatSite) -> None:
    site.mode = "expire"
    with pytest.raises(BackendSessionExpired, match="session expired"):
        browser()


def test_a_rate_limit_banner_is_a_rate_limit_error(browser: Any, site: ChatSite) -> None:
    site.mode = "ratelimit"
    with pytest.raises(BackendRateLimited, match="reached the message limit"):
        browser()


def test_a_hang_is_a_timeout_not_a_partial_answer(browser: Any, site: ChatSite) -> None:
    site.mode = "hang"
    start = time.monotonic()
    with pytest.raises(BackendTimeout, match="no reply appeared"):
        browser(timeout_s=1.5)
    assert time.monotonic() - start < 5


def test_an_empty_reply_is_a_bad_response(browser: Any, site: ChatSite) -> None:
    site.mode = "empty"
    with pytest.raises(BackendBadResponse, match="empty reply"):
        browser()


def test_error_text_in_the_reply_bubble_is_never_an_answer(browser: Any, site: ChatSite) -> None:
    site.mode = "errortext"
    with pytest.raises(BackendSessionExpired, match="reply bubble holds an error"):
        browser()


def test_a_logout_mid_conversation_is_a_session_expiry(browser: Any, site: ChatSite) -> None:
    site.mode = "logout"
    with pytest.raises(BackendSessionExpired, match="login wall"):
        browser()
    site.mode = "answer"
    assert browser().text, "the next call opens the page afresh"


def test_without_a_login_the_wall_is_an_auth_error(profile_file: Path, tmp_path: Path) -> None:
    backend = make_host(ora_playwright).get("backend", "playwright").create(
        settings(profile_file, tmp_path / "fresh").config.backends["local"])

    async def go() -> Any:
        try:
            return await backend.complete(MESSAGES, CompletionParams(timeout_s=5))
        finally:
            await backend.aclose()

    with pytest.raises(BackendAuthError, match="login wall") as caught:
        asyncio.run(go())
    assert "--user-data-dir=" in str(caught.value)


def test_a_user_data_dir_held_by_another_browser_is_unavailable(browser: Any, profile_file: Path,
                                                                user_dir: Path) -> None:
    browser()  # the module's browser holds user_dir now
    second = make_host(ora_playwright).get("backend", "playwright").create(
        settings(profile_file, user_dir).config.backends["local"])
    with pytest.raises(BackendUnavailable, match="another browser"):
        asyncio.run(second.complete(MESSAGES, CompletionParams(timeout_s=5)))


def test_the_role_ledger_records_the_browser_failure_and_the_fallback(profile_file: Path, site: ChatSite,
                                                                     tmp_path: Path) -> None:
    site.mode, site.require_login = "ratelimit", False
    base = settings(profile_file, tmp_path / "no-login-needed").config.model_dump(mode="json")
    backends = {"local": {**base["backends"]["local"], "fallbacks": ["offline"]},
                "offline": {"type": "scripted", "model": "scripted-1", "options": {"default": "offline answer"}}}
    resolved = make_config({"backends": backends}, base_default=False)
    pool = BackendPool(resolved.config, make_host(ora_playwright, ora_scripted))
    turn = TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash)

    async def go() -> Any:
        try:
            return await call_role(turn, pool, "analyst", MESSAGES, prompt_key="k", step="analyst")
        finally:
            await pool.aclose()

    assert asyncio.run(go()).text == "offline answer"
    failed, ran = turn.calls
    assert (failed.effective_provider, failed.error["kind"]) == ("playwright", "rate_limited"), failed.error
    assert ran.effective_provider == "scripted" and ran.fallback_flags == ["fallback:local->offline:rate_limited"]


def test_check_opens_the_page_and_reports_the_login(browser: Any) -> None:
    info = browser.loop.run_until_complete(browser.backend.check())
    assert info["logged_in"] is True and info["profile"] == "local-chat"


def test_a_missing_browser_is_unavailable(profile_file: Path, tmp_path: Path) -> None:
    resolved = settings(profile_file, tmp_path / "d")
    table = resolved.config.backends["local"].model_dump()
    table["options"]["executable_path"] = str(tmp_path / "no-chromium")
    backend = make_host(ora_playwright).get("backend", "playwright").create(
        make_config({"backends": {"local": table}}, base_default=False).config.backends["local"])
    with pytest.raises(BackendUnavailable, match="no browser at"):
        asyncio.run(backend.complete(MESSAGES, CompletionParams()))


@pytest.mark.parametrize("name", sorted(MIMICS))
def test_each_builtin_profile_drives_a_page_in_its_markup(site: ChatSite, name: str, tmp_path: Path) -> None:
    """The chatgpt, claude and gemini profiles against pages with their selectors: an answer, and
    a rate-limit banner, an expired session, an empty reply and a login wall as typed errors."""
    assert set(MIMICS) == set(BUILTIN_PROFILES)
    table = {"type": "playwright", "model": f"{name}-web", "family": name, "timeout_s": 5.0,
             "options": {"profile": name, "user_data_dir": str(tmp_path / "profile"),
                         "selectors": {"url": site.mimic_url(name), "stable_ms": 250, "ready_timeout_s": 5.0,
                                       "poll_ms": 50}}}
    backend = make_host(ora_playwright).get("backend", "playwright").create(
        make_config({"backends": {"local": table}}, base_default=False).config.backends["local"])
    loop = asyncio.new_event_loop()

    def call() -> Any:
        return loop.run_until_complete(backend.complete(MESSAGES, CompletionParams(timeout_s=5.0)))

    try:
        site.require_login = False
        completion = call()
        assert (completion.text, completion.provider, completion.model) == (site.reply, "playwright", f"{name}-web")
        assert "What is the capital of France?" in site.prompts[-1]
        for mode, error in (("ratelimit", BackendRateLimited), ("expire", BackendSessionExpired),
                            ("empty", BackendBadResponse)):
            site.mode = mode
            with pytest.raises(error):
                call()
        site.mode, site.require_login = "answer", True  # this user-data dir never logged in
        with pytest.raises(BackendAuthError, match="login wall"):
            call()
    finally:
        loop.run_until_complete(backend.aclose())
        loop.close()
