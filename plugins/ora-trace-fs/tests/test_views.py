"""The HTML pages as text: self-contained (no URL to fetch, CSS and script inline), a policy that
forbids fetching and foreign scripts, every untrusted text escaped, failing steps open, and
``ora trace view`` / ``ora health --html`` on the command line (``--open`` without a browser
says so and still succeeds). What Chromium makes of the pages: ``test_views_in_chromium.py``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import trace_turns
from ora_trace_fs.views import TEMPLATES
from ora_trace_fs.views.dashboard import view_href, view_link
from ora_trace_fs.views.turn import build_turn_view, marked_segments, render_turn_view, split_answer

from ora_core.api.html import TEMPLATES as BASE_TEMPLATES
from ora_core.api.html import svg

ORA = str(Path(sys.executable).with_name("ora"))
VIEWS = Path(__file__).resolve().parents[1] / "ora_trace_fs" / "views"


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text inside <script> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False if tag == "script" else self._in_script

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


def parse(html: str) -> Elements:
    elements = Elements()
    elements.feed(html)
    return elements


@pytest.fixture(scope="module")
def gear4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("views") / "traces"
    return Path(trace_turns.gear4_turn(root).trace_path)


def test_the_turn_page_is_self_contained_and_fetches_nothing(gear4):
    html = render_turn_view(gear4)
    page = parse(html)
    csp = [a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and csp[0].startswith("default-src 'none';")
    nonce = re.search(r"script-src 'nonce-([^']+)'", csp[0]).group(1)
    for tag, attrs in page.tags:
        assert "src" not in attrs, (tag, attrs)  # no image, script or frame from anywhere
        assert tag != "link", attrs  # no stylesheet, font or icon
        href = attrs.get("href") or ""
        assert href == "" or href.startswith("#"), (tag, href)  # only links within the page
    scripts = [a for t, a in page.tags if t == "script"]
    styles = [a for t, a in page.tags if t == "style"]
    assert len(scripts) == 1 and scripts[0]["nonce"] == nonce  # ours, the only one
    assert len(styles) == 1 and styles[0]["nonce"] == nonce
    assert "http://" not in "".join(page.scripts) and "https://" not in html.split("<main>")[0]


def test_every_untrusted_text_is_escaped_never_markup(gear4):
    html = render_turn_view(gear4)
    page = parse(html)
    assert "<script>window.__pwned" not in html and "&lt;script&gt;window.__pwned = 1" in html
    assert '<b id="injected">' not in html and "&lt;b id=&#34;injected&#34;&gt;INJECTED&lt;/b&gt;" in html
    assert not [a for t, a in page.tags if t == "img" or a.get("id") == "injected"]  # the chunk's markup
    assert not [a for t, a in page.tags if "onerror" in a]
    assert not [a for _, a in page.tags if any((v or "").startswith("javascript:") for v in a.values())]
    assert "notes/&lt;b&gt;harness&lt;/b&gt;-poisoned.md" in html
    assert "&lt;script&gt;window.__pwned = 5&lt;/script&gt;" in html  # the verifier's raw output, too


def test_no_template_marks_anything_safe_or_turns_autoescape_off():
    for path in [*TEMPLATES.glob("*"), *BASE_TEMPLATES.glob("*")]:
        text = path.read_text()
        assert "|safe" not in text.replace(" ", "") and "autoescape false" not in text, path.name
    for path in VIEWS.rglob("*.py"):
        text = path.read_text()
        assert "Markup(" not in text and "autoescape=False" not in text, path.name


def test_failing_steps_are_open_and_first_the_rest_closed(gear4):
    view = build_turn_view(gear4)
    failing = {s["name"] for s in view["steps"] if s["failing"]}
    health = json.loads((gear4 / "step-health.json").read_text())
    assert failing == {h["step"] for h in health["steps"]
                       if h["verdict"] in ("FAIL", "BROKEN", "DEGRADED") or h["degraded"]}
    assert "step8-final-verify" in failing and "stage0-bypass" not in failing
    html = render_turn_view(gear4)
    opened = set(re.findall(r'<details id="step-\d+" class="step [^"]*" data-step="([^"]+)" data-verdict="[^"]*" open>',
                            html))
    assert opened == failing
    assert html.index('id="what-went-wrong"') < html.index('id="path"') < html.index('id="steps"')


def test_the_verdict_stands_beside_the_evidence_it_was_checked_against(gear4):
    view = build_turn_view(gear4)
    [final] = [s for s in view["steps"] if s["name"] == "step8-final-verify"]
    verdict = final["verdict_view"]
    assert verdict["status"] == "FAIL" and verdict["verifier"] == "view-checker"
    assert verdict["unsupported"][0]["claim"] == trace_turns.UNSUPPORTED
    assert verdict["unsupported"][0]["best_source"] == trace_turns.CLEAN_SOURCE
    assert {c["source"] for c in verdict["evidence"]} == {trace_turns.CLEAN_SOURCE, trace_turns.POISON_SOURCE}
    [poisoned] = [c for c in verdict["evidence"] if c["source"] == trace_turns.POISON_SOURCE]
    assert poisoned["instruction_like"] and poisoned["score"] == 0.64
    assert any(marked for _, marked in verdict["subject"])  # the claim is marked where it stands in the text


def test_marked_segments_cut_the_text_without_losing_a_character():
    text = "A <b>. Harness vendors keep 90 % of the margin. Then more; again the margin."
    pieces = marked_segments(text, ["Harness vendors keep 90 % of the margin.", "the margin", "absent claim"])
    assert "".join(p for p, _ in pieces) == text
    assert [p for p, marked in pieces if marked] == ["Harness vendors keep 90 % of the margin.", "the margin"]


def test_the_answers_warning_header_is_split_from_its_body():
    warnings, body = split_answer("[degraded — unhealthy]\n[warning: not verified — FAIL]\nThe answer.\n"
                                  "[warning: kept]")
    assert warnings == ["[degraded — unhealthy]", "[warning: not verified — FAIL]"]
    assert body == "The answer.\n[warning: kept]"


def test_a_dashboard_link_can_never_become_a_script_url(tmp_path):
    assert view_href('c/javascript:alert(1)"<x>') == "c/javascript%3Aalert%281%29%22%3Cx%3E/view.html"
    assert view_link(tmp_path, tmp_path, "c/t1") == "c/t1/view.html"
    assert view_link(tmp_path, tmp_path / "sub", "c/t1") == "../c/t1/view.html"
    assert view_link(tmp_path / "traces", tmp_path / "elsewhere", "c/t 1").startswith("file:///")


def test_the_timeline_draws_parallel_streams_in_lanes_of_their_own_to_scale(gear4):
    view = build_turn_view(gear4)
    assert view["lanes"][0] == "pipeline" and {"depth", "breadth"} <= set(view["lanes"])
    by_name = {s["name"]: s for s in view["steps"]}
    assert by_name["step3-depth-analyst"]["lane"] == "depth" and by_name["step3-breadth-analyst"]["lane"] == "breadth"
    chart = view["timeline"]
    bars = {r.href: r for r in chart.rects}
    a, b = (bars["#" + by_name[n]["anchor"]] for n in ("phase-a", "final-output"))
    assert a.x < b.x  # later steps further right
    longest = max(view["steps"], key=lambda s: s["duration"])
    assert bars["#" + longest["anchor"]].w == max(r.w for r in chart.rects)  # widths follow durations


def test_chart_helpers_scale_to_the_data():
    chart = svg.hbars([("a", [(10.0, "s-fail", "")]), ("b", [(25.0, "s-fail", "")])], title="t")
    widths = [r.w for r in chart.rects]
    assert widths[1] == pytest.approx(widths[0] * 2.5)
    stacked = svg.columns([("d1", [(2.0, "s-ok", ""), (3.0, "s-fail", "")])], title="t", series=[])
    ok, fail = stacked.rects
    assert fail.h == pytest.approx(ok.h * 1.5) and fail.y + fail.h == pytest.approx(ok.y)
    assert svg.nice_max(0.3) == 0.5 and svg.nice_max(31) == 50 and svg.nice_max(0) == 1.0
    assert svg.axis(3) == (3, 1) and svg.axis(31) == (40, 10) and svg.axis(0.0) == (1.0, 1.0)
    assert svg.axis(1) == (1, 0.25) and svg.axis(1, whole=True) == (1, 1)


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ORA_CONFIG", None)
    env["ORA_PLUGINS"] = "trace-fs"
    return env


def test_trace_view_writes_the_page_beside_the_trace_and_open_without_a_browser_says_so(tmp_path, gear4):
    root = gear4.parent.parent
    env = {k: v for k, v in _env(tmp_path).items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["BROWSER"] = str(tmp_path / "no-such-browser")
    proc = subprocess.run([ORA, "trace", "view", gear4.name[:22], "--root", str(root), "--open"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(gear4 / "view.html") and (gear4 / "view.html").is_file()
    assert "could not open a browser" in proc.stderr and "there is no display" in proc.stderr


def test_trace_view_open_hands_the_file_url_to_the_configured_browser(tmp_path, gear4):
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(0o755)
    out = tmp_path / "page.html"
    env = {**_env(tmp_path), "BROWSER": f"{browser} %s"}
    proc = subprocess.run([ORA, "trace", "view", str(gear4), "-o", str(out), "--open"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for _ in range(100):
        if opened.exists():
            break
        subprocess.run(["sleep", "0.05"], check=True)
    assert opened.read_text().strip() == out.resolve().as_uri()


def test_trace_view_of_an_unknown_turn_fails_naming_it(tmp_path, gear4):
    proc = subprocess.run([ORA, "trace", "view", "nope-nope", "--root", str(gear4.parent.parent)],
                          capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert proc.returncode == 1 and "no turn 'nope-nope'" in proc.stderr


def test_every_model_call_is_on_the_page_collapsed_with_what_was_sent_and_what_came_back(gear4):
    view = build_turn_view(gear4)
    [analyst] = [s for s in view["steps"] if s["name"] == "step3-depth-analyst"]
    failed, answered = analyst["model_calls"][:2]
    assert failed["backend"] == "local" and failed["error"]["kind"] == "timeout" and failed["output"] is None
    assert answered["backend"] == "spare" and answered["output"] and answered["why"] == "first attempt"
    assert answered["messages"][0]["role"] == "system" and trace_turns.CLEAN_TEXT in answered["messages"][0]["content"]
    html = render_turn_view(gear4)
    calls = re.findall(r'<details class="raw call" data-call="(\d+)"( open)?>', html)
    numbers = [int(n) for s in view["steps"] for n in (c["call"] for c in s["model_calls"])]
    assert sorted(int(n) for n, _ in calls) == sorted(numbers) and not any(opened for _, opened in calls)
    assert "Partial output (before the failure)" in html and "<h4>system</h4>" in html
