"""The HTML views in a real headless browser: Debian's Chromium through Playwright, as the browser
backend tests use it. Each page is loaded from ``file://``; the visible text of key elements is
checked (the failing step open, its verdict and contingency shown, the role mismatch marked),
every request the page makes is recorded (none may leave it), and the ``<script>`` planted in a
retrieved chunk must not run. A screenshot of each view is saved (``$ORA_TEST_ARTIFACTS`` or the
test's temporary directory; the path is printed)."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trace_turns
from ora_trace_fs.liveness import LOCK_NAME
from ora_trace_fs.views.turn import render_turn_view
from trace_turns import look_at

pytestmark = pytest.mark.slow
ORA = str(Path(sys.executable).with_name("ora"))
STEP = 'details.step[data-step="{}"]'


def _ora(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    run_env = dict(env or os.environ)
    run_env.pop("ORA_CONFIG", None)
    run_env.setdefault("ORA_PLUGINS", "trace-fs")
    proc = subprocess.run([ORA, *args], capture_output=True, text=True, env=run_env, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trace_turns.artifacts_dir(tmp_path_factory.mktemp("artifacts"))


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A trace root with the Gear-4 turn (poisoned chunk, FAIL verdicts, role mismatch), two
    simple turns, and one turn whose process died; and the Gear-4 turn's directory."""
    root = tmp_path_factory.mktemp("chromium") / "traces"
    turn = Path(trace_turns.gear4_turn(root).trace_path)
    rt = trace_turns.simple_runtime(root)
    from ora_core.testing import run_turn

    run_turn(rt, "Hello, what time is it?")
    run_turn(rt, "Hello!")
    dead = root / "default" / "20261101T000000.000000Z-dead01"
    dead.mkdir(parents=True)
    (dead / "turn.json").write_text(json.dumps({
        "turn_id": dead.name, "conversation_id": "default", "prompt": "<script>window.__pwned = 9</script> died",
        "started_at": "2026-11-01T00:00:00+00:00", "status": "running", "lock_file": LOCK_NAME}))
    (dead / LOCK_NAME).write_text(json.dumps({"pid": 1, "start_ticks": 1, "flock": True}))  # nobody holds it
    return root, turn


def test_the_turn_view_opens_the_failing_step_shows_verdict_contingency_and_mismatch_and_runs_nothing_injected(
        traced, artifacts):
    root, turn = traced
    page = Path(_ora("trace", "view", turn.name, "--root", str(root)).stdout.strip())
    shot = artifacts / "turn-view.png"
    final = STEP.format("step8-final-verify")
    seen = look_at(page, screenshot=shot, texts={
        "summary": "#what-went-wrong + ul",
        "final_summary": f"{final} > summary",
        "final_verdict": f"{final} .verdict-side h3",
        "final_reasons": f"{final} .reasons",
        "final_claim": f"{final} .claim",
        "final_evidence": f"{final} .evidence-side",
        "final_contingency": f"{final} tr.contingency",
        "ledger_heading": "#ledger",
        "mismatch_row": "tr.ledger-row.mismatch",
        "poisoned_chunk": f"{final} .chunk.poisoned",
        "answer_warning": ".warning-header",
    }, values={
        "final_open": f"document.querySelector('{final}').open",
        "bypass_open": f"document.querySelector('{STEP.format('stage0-bypass')}').open",
        "open_steps": "[...document.querySelectorAll('details.step[open]')].map(d => d.dataset.step)",
        "failing_steps": "[...document.querySelectorAll('details.step')].filter(d => d.dataset.verdict === 'FAIL'"
                         " || d.dataset.verdict === 'BROKEN' || d.dataset.verdict === 'DEGRADED'"
                         " || d.classList.contains('s-degraded')).map(d => d.dataset.step)",
        "pwned": "typeof window.__pwned",
        "title": "document.title",
        "injected_element": "document.getElementById('injected') === null",
        "images": "document.images.length",
        "our_script": "document.documentElement.getAttribute('data-ora-script')",
        "final_visible": f"document.querySelector('{final} .verdict-side').getBoundingClientRect().height > 0",
    })
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000
    # the failing step is open, every failing step is, and a passing one is not
    assert seen.values["final_open"] is True and seen.values["final_visible"] is True
    assert seen.values["bypass_open"] is False
    assert sorted(seen.values["open_steps"]) == sorted(seen.values["failing_steps"])
    assert "step8-final-verify" in seen.texts["summary"] and "FAIL" in seen.texts["summary"]
    # its verdict, reasons, the unsupported claim beside its closest evidence, the evidence with provenance
    assert "FAIL" in seen.texts["final_summary"]
    assert "FAIL" in seen.texts["final_verdict"] and "view-checker" in seen.texts["final_verdict"]
    assert trace_turns.UNSUPPORTED in seen.texts["final_reasons"]
    assert trace_turns.UNSUPPORTED in seen.texts["final_claim"]
    assert trace_turns.CLEAN_SOURCE in seen.texts["final_claim"]
    assert trace_turns.CLEAN_SOURCE in seen.texts["final_evidence"]
    assert trace_turns.POISON_SOURCE in seen.texts["final_evidence"]  # the tags in the source name, as text
    # the contingencies: the failing step's own, and the poisoned chunk named where it was retrieved
    assert "step8-final-verify" in seen.texts["final_contingency"]
    # a closed step opens when a link (a timeline bar, a summary entry) leads to it
    [context_file] = turn.glob("*-context-assembly.json")
    anchor = f"#step-{context_file.name[:2]}"
    linked = look_at(page, fragment=anchor, texts={"contingencies": f"{anchor} tr.contingency"},
                     values={"open": f"document.querySelector('{anchor}').open"})
    assert linked.values["open"] is True
    assert "context-instruction-in-chunk" in linked.texts["contingencies"]
    # the mismatch is marked in the ledger
    assert "mismatch" in seen.texts["ledger_heading"]
    assert "MISMATCH" in seen.texts["mismatch_row"] and "scripted/spare-1" in seen.texts["mismatch_row"]
    assert seen.texts["answer_warning"].startswith("[warning")
    # the planted markup is shown as text and did nothing
    assert "<script>window.__pwned = 1; document.title = 'PWNED';</script>" in seen.texts["poisoned_chunk"]
    assert "instruction-like" in seen.texts["poisoned_chunk"]
    assert seen.values["pwned"] == "undefined" and "PWNED" not in seen.values["title"]
    assert seen.values["injected_element"] is True and seen.values["images"] == 0
    assert seen.values["our_script"] == "ran"  # the page's own (nonce) script did run
    # no request left the page: the only one is the page itself
    assert seen.requests == [page.resolve().as_uri()]
    assert seen.errors == [] and not [m for m in seen.console if "Content Security Policy" in m]


def test_the_dashboard_shows_the_turns_on_disk_counts_the_interrupted_apart_and_links_each_view(traced, artifacts):
    root, _ = traced
    proc = _ora("health", "--html", "--views", "--root", str(root))
    page = Path(proc.stdout.strip())
    assert page == root / "health.html"
    shot = artifacts / "health-dashboard.png"
    seen = look_at(page, screenshot=shot, texts={
        "header": ".page-head",
        "headlines": "ul.headlines",
        "steps": "table.steps",
        "mismatches": "#mismatches + p",
        "listing": "table.listing",
        "interrupted_row": 'table.listing tr[data-status="interrupted"]',
    }, values={
        "rows": "document.querySelectorAll('table.listing tbody tr').length",
        "links": "[...document.querySelectorAll('table.listing a')].map(a => a.getAttribute('href'))",
        "charts": "document.querySelectorAll('figure.chart svg').length",
        "pwned": "typeof window.__pwned",
    }, click="table.listing tr[data-status='degraded'] a")
    print(f"screenshot: {shot}")
    assert "3 closed turns" in seen.texts["header"] and "1 interrupted" in seen.texts["header"]
    assert "step8-final-verify FAIL on 100 % of multi-stream turns (1 of 1)" in seen.texts["headlines"]
    assert "step8-final-verify" in seen.texts["steps"]
    assert seen.texts["mismatches"].startswith("1 turn (33.3 %)")
    assert "interrupted" in seen.texts["interrupted_row"] and "<script>" in seen.texts["interrupted_row"]
    assert seen.values["pwned"] == "undefined" and seen.values["charts"] >= 3 and seen.values["rows"] == 4
    # every listed turn's view was rendered (--views; the interrupted one's too) and is linked, relatively
    assert len(seen.values["links"]) == 4 and all(h.startswith("default/") and h.endswith("/view.html")
                                                  for h in seen.values["links"])
    assert seen.followed.endswith("/view.html") and seen.texts["followed_h1"].startswith("Turn")
    # the dashboard fetched nothing; the only other request was the view the click opened
    assert seen.requests[0] == page.resolve().as_uri()
    assert seen.requests[1:] == [seen.followed]


class Counting(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        Counting.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"window.__pwned = 8;")

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the http.server API
        return


@pytest.fixture
def server() -> Iterator[int]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    Counting.hits = []
    yield httpd.server_address[1]
    httpd.shutdown()
    thread.join(timeout=10)


def test_markup_injected_past_the_escaping_can_neither_fetch_nor_run_under_the_pages_policy(traced, server, tmp_path):
    """Defence in depth: should a rendering bug ever let markup through, the page's policy stops it.
    The control (the same page without its policy) shows the test can fail."""
    _, turn = traced
    html = render_turn_view(turn)
    attack = (f'<img src="http://127.0.0.1:{server}/leak.png">'
              f'<script src="http://127.0.0.1:{server}/evil.js"></script>'
              f'<link rel="stylesheet" href="http://127.0.0.1:{server}/evil.css">'
              '<script>window.__pwned = 7;</script>')
    guarded = tmp_path / "guarded.html"
    guarded.write_text(html.replace("<main>", "<main>" + attack, 1))
    seen = look_at(guarded, values={"pwned": "typeof window.__pwned"})
    assert Counting.hits == [] and seen.values["pwned"] == "undefined"  # nothing reached the server
    assert any("Content Security Policy" in m for m in seen.console)  # Chromium refused, and said why
    # the control: the same injection without the policy fetches and runs
    start = html.index('<meta http-equiv="Content-Security-Policy"')
    bare = tmp_path / "bare.html"
    bare.write_text((html[:start] + html[html.index(">", start) + 1:]).replace("<main>", "<main>" + attack, 1))
    seen = look_at(bare, values={"pwned": "String(window.__pwned)"})
    assert Counting.hits and seen.values["pwned"] in ("7", "8")


def test_after_a_default_ora_run_the_view_opens_its_failing_step_and_the_dashboard_renders(tmp_path, artifacts):
    """The acceptance of issue 16: the bundled default configuration (the local SmolLM2 model, the
    grounding verifier, an empty vault), then ``ora trace view`` and ``ora health --html``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    env.update({"ORA__TRACE__ROOT": str(tmp_path / "traces"), "ORA__RETRIEVAL__PATH": str(tmp_path / "chroma"),
                "HF_HUB_OFFLINE": "1", "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
                "XDG_DATA_HOME": str(tmp_path / "xdg-data"), "ORA__BACKENDS__LOCAL__OPTIONS__THREADS": "1"})
    run = subprocess.run([ORA, "run", "--mode", "standard", "--json", "What was Apple's Q3 2024 revenue?"],
                         capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    turn = Path(result["trace_path"])
    health = json.loads((turn / "step-health.json").read_text())
    failing = sorted(h["step"] for h in health["steps"]
                     if h["verdict"] in ("FAIL", "BROKEN", "DEGRADED") or h["degraded"])
    assert failing, f"a run on an empty vault verified everything: {health['steps']}"
    page = Path(_ora("trace", "view", env=env).stdout.strip())
    assert page == turn / "view.html"
    shot = artifacts / "default-run-view.png"
    seen = look_at(page, screenshot=shot, values={
        "open_steps": "[...document.querySelectorAll('details.step[open]')].map(d => d.dataset.step)"},
        texts={"first_open": "details.step[open] > summary", "summary": "#what-went-wrong + ul"})
    print(f"screenshot: {shot}")
    assert sorted(seen.values["open_steps"]) == failing
    assert seen.texts["first_open"] and all(step in seen.texts["summary"] for step in failing)
    assert seen.requests == [page.resolve().as_uri()]
    dashboard = Path(_ora("health", "--html", env=env).stdout.strip())
    shot = artifacts / "default-run-dashboard.png"
    seen = look_at(dashboard, screenshot=shot, texts={"header": ".page-head", "listing": "table.listing"})
    print(f"screenshot: {shot}")
    assert "1 closed turn" in seen.texts["header"] and result["turn_id"] in seen.texts["listing"]
    assert seen.requests == [dashboard.resolve().as_uri()]
