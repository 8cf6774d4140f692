"""The HTML calibration report in a real headless browser: Debian's Chromium through Playwright (as the
trace views' tests drive it). The cross-provider-like run's page (conftest ``html_runs``) is loaded from
``file://``; the visible text of the Global Provider and Role Provider Mode badges, the note under the roles
table, the mismatch flag in the Runtime Role Usage table, the operational banner and the significance notice
is checked; every request the page makes is recorded (the page itself is the only one); the ``<script>``
planted in a claim must not run. Screenshots go to ``$ORA_TEST_ARTIFACTS/calibration-report`` (else the
test's temporary directory; the paths are printed)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@dataclass
class Seen:
    requests: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    visible: dict[str, bool] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)


def look_at(page_file: Path, texts: dict[str, str], values: dict[str, str],
            shots: dict[Path, str | None]) -> Seen:
    """Open ``page_file`` in Chromium: ``texts`` name -> selector (its visible text, and whether it is
    visible); ``values`` name -> a JavaScript expression; ``shots`` path -> a selector to photograph
    (None: the viewport)."""
    return asyncio.run(_look(page_file, texts, values, shots))


async def _look(page_file: Path, texts: dict[str, str], values: dict[str, str],
                shots: dict[Path, str | None]) -> Seen:
    from playwright.async_api import async_playwright

    seen = Seen()
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await (await browser.new_context(viewport={"width": 1280, "height": 1000})).new_page()
            page.on("request", lambda request: seen.requests.append(request.url))
            page.on("console", lambda message: seen.console.append(f"{message.type}: {message.text}"))
            page.on("pageerror", lambda error: seen.errors.append(str(error)))
            await page.goto(page_file.resolve().as_uri())
            await page.wait_for_load_state("load")
            await page.wait_for_timeout(300)  # anything injected that could run, has run
            for name, selector in texts.items():
                found = page.locator(selector)
                present = await found.count() > 0
                seen.texts[name] = await found.first.inner_text() if present else ""
                seen.visible[name] = present and await found.first.is_visible()
            for name, expression in values.items():
                seen.values[name] = await page.evaluate(expression)
            for path, selector in shots.items():
                if selector is None:
                    await page.screenshot(path=str(path))
                else:
                    await page.locator(selector).first.screenshot(path=str(path))
        finally:
            await browser.close()
    return seen


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = os.environ.get("ORA_TEST_ARTIFACTS")
    path = Path(base) / "calibration-report" if base else tmp_path_factory.mktemp("calibration-report")
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_the_report_shows_badges_mismatch_banner_and_notice_fetches_nothing_and_runs_nothing_injected(
        html_runs, artifacts):
    page = html_runs.cross.written.files["html"]
    challenger = next(u for u in html_runs.cross.report.runtime_role_usage if u.role == "challenger")
    top, roles, usage = (artifacts / n for n in ("calibration-report-top.png", "calibration-report-providers.png",
                                                 "calibration-report-runtime-roles.png"))
    seen = look_at(page, texts={
        "global": "#global-provider-badge",
        "mode": "#role-provider-mode-badge",
        "note": "#role-note",
        "mismatch_row": 'table.runtime-roles tr[data-usage="challenger"]',
        "mismatch_flag": 'table.runtime-roles tr[data-usage="challenger"] .badge.mismatch',
        "advocate_row": 'table.runtime-roles tr[data-usage="advocate"]',
        "banner": "#operational-banner",
        "notice": "#significance",
    }, values={
        "markup_claim": f"document.querySelector('#pair-{html_runs.markup_pair} .side[data-side=\"left\"] "
                        ".claim-text').textContent",
        "pwned": "typeof window.__pwned",
        "title": "document.title",
        "injected": "document.getElementById('injected') === null",
        "images": "document.images.length",
        "scripts": "document.scripts.length",
        "our_script": "document.documentElement.getAttribute('data-ora-script')",
        "banner_color": "getComputedStyle(document.getElementById('operational-banner')).color",
        "mismatch_bg": "getComputedStyle(document.querySelector("
                       "'table.runtime-roles tr[data-usage=\"challenger\"] td')).backgroundColor",
        "advocate_bg": "getComputedStyle(document.querySelector("
                       "'table.runtime-roles tr[data-usage=\"advocate\"] td')).backgroundColor",
    }, shots={top: None, roles: "#providers", usage: "#runtime-roles"})
    for shot in (top, roles, usage):
        print(f"screenshot: {shot}")
        assert shot.stat().st_size > 10_000, shot
    # the badges and the note under the roles table: mixed, in words a reader sees
    assert seen.visible["global"] and seen.texts["global"] == "Global Provider: mixed"
    assert seen.visible["mode"] and seen.texts["mode"] == "Role Provider Mode: mixed"
    assert seen.visible["note"] and seen.texts["note"].startswith("Mixed provider usage.")
    assert "openai (challenger)" in seen.texts["note"]
    # the mismatch flag on the challenger's row (the TPM fallback gpt-4.1 -> gpt-4.1-mini), and only there
    assert seen.visible["mismatch_flag"] and seen.texts["mismatch_flag"] == f"MISMATCH ×{challenger.mismatches}"
    assert "openai/gpt-4.1\t" in seen.texts["mismatch_row"] + "\t" and "openai/gpt-4.1-mini ×" in seen.texts[
        "mismatch_row"]
    assert "FALLBACK ×" in seen.texts["mismatch_row"] and "tpm:cross->cross-mini" in seen.texts["mismatch_row"]
    assert "MISMATCH" not in seen.texts["advocate_row"]
    assert seen.values["mismatch_bg"] != seen.values["advocate_bg"]  # the row is marked, not just labelled
    # the operational banner and the significance notice
    assert seen.visible["banner"] and seen.texts["banner"].startswith("OPERATIONAL FAIL")
    assert seen.values["banner_color"] == "rgb(207, 34, 46)"  # the page's --fail red
    assert seen.visible["notice"] and seen.texts["notice"].startswith("Not decision-grade")
    assert "BackendUnavailable" in seen.texts["notice"]
    # the claim's markup is shown as text and did nothing
    assert html_runs.markup in seen.values["markup_claim"]  # in a closed card: its text, not its rendering
    assert seen.values["pwned"] == "undefined" and "PWNED" not in seen.values["title"]
    assert seen.values["injected"] is True and seen.values["images"] == 0 and seen.values["scripts"] == 1
    assert seen.values["our_script"] == "ran"  # the page's own (nonce) script did run
    # no request left the page: the only one is the page itself
    assert seen.requests == [page.resolve().as_uri()]
    assert seen.errors == [] and not [m for m in seen.console if "Content Security Policy" in m]


def test_the_decision_sheet_page_shows_its_verdict_and_fetches_nothing(html_runs, artifacts, tmp_path):
    from ora_core.engine.calibration.compare import compare
    from ora_core.engine.calibration.report import write_compare

    sheet = compare(html_runs.reference().written.files["json"], html_runs.cross.written.files["json"],
                    approved_by="Captain", resamples=300)
    page = write_compare(sheet, tmp_path, "compare-chromium").files["html"]
    shot = artifacts / "calibration-compare-top.png"
    seen = look_at(page, texts={"banner": "#verdict-banner", "why": "#not-decision-grade",
                                "gates": "#gate-observability"},
                   values={"pwned": "typeof window.__pwned",
                           "rows": "document.querySelectorAll('tr[data-pair]').length"},
                   shots={shot: None})
    print(f"screenshot: {shot}")
    assert seen.visible["banner"] and seen.texts["banner"].startswith("NOT DECISION-GRADE")
    assert "run B" in seen.texts["why"] and "not decision-grade" in seen.texts["why"]
    assert seen.texts["gates"].startswith("observability") and "FAIL" in seen.texts["gates"]  # B's mismatches
    assert seen.values["rows"] == len(html_runs.pairs) and seen.values["pwned"] == "undefined"
    assert seen.requests == [page.resolve().as_uri()] and seen.errors == []
