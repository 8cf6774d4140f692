"""The HTML calibration report, rendered from reports the real runner produced on scripted profiles
(``html_runs`` in conftest.py): a cross-provider-like run (the challenger on an OpenAI-type backend over a
real local HTTP server, its TPM guard falling back gpt-4.1 -> gpt-4.1-mini; one pair made to fail) and a
single-provider reference run. The page's structure, its seed 002 semantics (badges, the note under the
roles table, the mismatch and fallback flags, the operational banner, the significance notice), that it
is self-contained, and that a claim carrying markup is printed as text, never interpreted."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from ora_core.engine.calibration import html as calibration_html
from ora_core.engine.calibration.compare import compare
from ora_core.engine.calibration.report import load_report, renderers, write_compare

SECTIONS = ["significance", "providers", "runtime-roles", "gates", "guide", "aggregates", "by-language", "by-domain",
            "inverse", "asymmetry", "asymmetry-domain", "asymmetry-provider", "asymmetry-stage", "heatmap", "pairs",
            "config"]


class Page(HTMLParser):
    """Every element with its attributes, and the text inside each element that has an id."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.open: list[tuple[str, str | None]] = []
        self.texts: dict[str, list[str]] = {}
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.elements.append((tag, found))
        if tag not in ("meta", "link", "br", "img", "input", "hr", "wbr"):  # void elements have no end tag
            self.open.append((tag, found.get("id")))
            if found.get("id"):
                self.texts.setdefault(found["id"], [])

    def handle_endtag(self, tag: str) -> None:
        if tag not in (t for t, _ in self.open):
            return
        while self.open:
            open_tag, _ = self.open.pop()
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        for _, element_id in self.open:
            if element_id:
                self.texts[element_id].append(data)

    def text(self, element_id: str) -> str:
        return " ".join(" ".join(self.texts.get(element_id, [])).split())

    def ids(self) -> list[str]:
        return [a["id"] for _, a in self.elements if a.get("id")]

    def rows(self, attribute: str) -> dict[str, str]:
        """The table rows carrying ``attribute`` (``data-usage``, ``data-pair``...): its value -> the row's class."""
        return {a[attribute]: a.get("class", "") for t, a in self.elements if t == "tr" and attribute in a}


def page_of(run) -> tuple[str, Page]:
    text = run.written.files["html"].read_text(encoding="utf-8")
    return text, Page(text)


def test_the_run_writes_an_html_page_beside_its_json_through_the_renderer_module(html_runs):
    written = html_runs.cross.written
    assert written.problems == {}
    assert written.files["html"] == written.files["json"].with_suffix(".html")
    available, missing = renderers()
    assert "html" in available and missing == {} and available["html"][0] == calibration_html.SUFFIX
    # the page is rendered from the report model alone: the JSON on disk renders the same sections
    again = Page(calibration_html.render(load_report(written.files["json"])))
    assert again.ids() == Page(written.files["html"].read_text()).ids()


def test_the_page_has_every_section_in_seed_002s_order_and_a_card_per_pair(html_runs):
    _, page = page_of(html_runs.cross)
    ids = page.ids()
    assert [i for i in ids if i in SECTIONS] == SECTIONS
    cards = [i for i in ids if i.startswith("pair-")]
    assert cards == [f"pair-{p}" for p in html_runs.pairs]
    assert list(page.rows("data-pair")) == html_runs.pairs  # the heatmap's rows


def test_the_roles_that_decide_the_provider_mode_are_the_runners():
    from ora_core.engine.calibration.runner import FACT_CHECK_ROLES

    assert calibration_html.FACT_CHECK_ROLES == FACT_CHECK_ROLES


def test_mixed_providers_show_in_both_badges_and_the_note_under_the_roles_table(html_runs):
    _, page = page_of(html_runs.cross)
    assert page.text("global-provider-badge") == "Global Provider: mixed"
    assert page.text("role-provider-mode-badge") == "Role Provider Mode: mixed"
    note = page.text("role-note")
    assert note.startswith("Mixed provider usage.")
    assert "openai (challenger)" in note and "scripted (phase_a, evidence, advocate" in note
    assert "no single provider ran this pipeline" in note
    report = html_runs.cross.report
    mismatches = sum(u.mismatches for u in report.runtime_role_usage)
    assert mismatches > 0 and f"{mismatches} call(s) ran on another model than planned" in note


def test_a_single_provider_run_says_single_and_names_its_provider(html_runs):
    reference = html_runs.reference()
    assert reference.report.config.role_provider_mode == "single"
    _, page = page_of(reference)
    assert page.text("global-provider-badge") == "Global Provider: scripted"
    assert page.text("role-provider-mode-badge") == "Role Provider Mode: single"
    assert page.text("role-note").startswith("Single provider. Every fact-check role is planned on scripted")
    assert "another model than planned" not in page.text("role-note")


def test_the_runtime_role_usage_flags_the_fallback_mismatch_on_its_role_only(html_runs):
    text, page = page_of(html_runs.cross)
    usage = {u.role: u for u in html_runs.cross.report.runtime_role_usage}
    challenger = usage["challenger"]
    assert challenger.planned == ["openai/gpt-4.1"] and set(challenger.effective) == {"openai/gpt-4.1-mini"}
    assert challenger.mismatches == challenger.fallbacks == challenger.calls > 0
    rows = page.rows("data-usage")
    assert set(rows) == set(usage) and rows["challenger"] == "mismatch"
    assert all(rows[r] == "" for r in usage if r != "challenger")  # the other roles ran as planned
    row = re.search(r'<tr data-usage="challenger" class="mismatch">.*?</tr>', text, re.S).group(0)
    assert f"MISMATCH ×{challenger.mismatches}" in row and f"FALLBACK ×{challenger.fallbacks}" in row
    assert f"tpm:cross-&gt;cross-mini ×{challenger.fallbacks}" in row
    assert "openai/gpt-4.1-mini ×" in row
    advocate = re.search(r'<tr data-usage="advocate"[^>]*>.*?</tr>', text, re.S).group(0)
    assert "MISMATCH" not in advocate and "ERROR ×1" in advocate  # the failed pair's advocate call


def test_the_significance_notice_and_the_operational_banner_say_why_the_run_cannot_decide(html_runs):
    text, page = page_of(html_runs.cross)
    assert re.search(r'id="significance" class="notice bad" data-decision-grade="no"', text)
    notice = page.text("significance")
    assert notice.startswith("Not decision-grade NOT DECISION-GRADE: 1 of 4 pair(s) failed (BackendUnavailable")
    assert "every model call has an effective provider and model" in notice
    assert re.search(r'id="operational-banner" class="banner s-fail" data-gate="operational" data-passed="no"', text)
    assert page.text("operational-banner").startswith("OPERATIONAL FAIL failed: failedPairs")
    assert "the content of version 1.0.0 changed" in page.text("fixture-check")  # the edited fixture copy


def test_the_failed_pair_card_is_open_with_its_diagnostics_and_completed_cards_carry_a_skew_bar(html_runs):
    text, _ = page_of(html_runs.cross)
    failed = re.search(rf'<details id="pair-{html_runs.failing_pair}" class="pair s-broken"[^>]*open>(.*?)</details>\n'
                       r'(?=<details|\n<h2)', text, re.S)
    assert failed, "the failed pair's card is open"
    body = failed.group(1)
    assert "BackendUnavailable" in body and "factcheck-claim1-advocate" in body and "scripted/planted-bias-20pp" in body
    for pair in html_runs.cross.report.pairs:
        card = re.search(rf'<details id="pair-{pair.id}".*?</details>', text, re.S).group(0)
        if pair.status == "completed":
            assert f"skew D = {pair.metrics.skew:+g} pp" in card, pair.id  # the skew bar's accessible name
            assert "<svg" in card
        else:
            assert "<svg" not in card


def test_inverse_asymmetry_and_heatmap_panels_hold_the_reports_figures(html_runs):
    report = html_runs.cross.report
    text, page = page_of(html_runs.cross)
    inverse = next(p for p in report.pairs if p.is_strict_inverse)
    panel = page.text("inverse")
    assert inverse.id in panel and f"max CE {report.aggregates.max_inverse_error:g} (≤ 20)" in panel
    assert {"openai", "scripted"} <= {r.key for r in report.asymmetry.by_provider}
    for by in ("domain", "provider", "stage"):
        table = re.search(rf'<table class="asymmetry" data-by="{by}">.*?</table>', text, re.S).group(0)
        for row in getattr(report.asymmetry, f"by_{by}"):
            assert f'<td class="mono">{row.key}</td>' in table, (by, row.key)
    biased = [p for p in report.pairs if p.metrics is not None and p.metrics.stage_flags.verdict_bias]
    assert biased, "the full-pool pair keeps the planted bias"
    for pair in biased:
        row = re.search(rf'<tr data-pair="{pair.id}">.*?</tr>', text, re.S).group(0)
        assert f'class="cell h2" title="|adj| (verdict): {pair.metrics.abs_adjusted_skew:g}' in row
    for by, groups in (("language", report.aggregates.by_language), ("domain", report.aggregates.by_domain)):
        table = re.search(rf'<table class="groups" data-by="{by}">.*?</table>', text, re.S).group(0)
        for key, group in groups.items():
            assert re.search(rf"<tr><td>{key}</td><td class=\"num\">{group.pairs}</td>", table), (by, key)
    assert report.aggregates.by_language["fr"].mean_absolute_adjusted_skew == 20.0  # retraites-fr: full pool
    assert "Mean |D| and mean |adj| by language" in page.text("aggregates")  # its chart


def test_a_claim_with_markup_is_text_on_the_page_and_nothing_of_it_is_an_element(html_runs):
    text, page = page_of(html_runs.cross)
    assert html_runs.markup_pair in text
    assert "&lt;script&gt;window.__pwned = 1;" in text  # shown, escaped
    assert html_runs.markup not in text and "<script>window.__pwned" not in text
    scripts = [a for t, a in page.elements if t == "script"]
    assert len(scripts) == 1 and scripts[0].get("nonce")  # the base's own script, nothing else
    assert not [a for t, a in page.elements if t == "img" or a.get("id") == "injected" or "onerror" in a]
    styles = [a for t, a in page.elements if t == "style"]
    assert len(styles) == 1 and styles[0]["nonce"] == scripts[0]["nonce"]
    [csp] = [a["content"] for t, a in page.elements if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp.startswith("default-src 'none';") and f"'nonce-{scripts[0]['nonce']}'" in csp


def test_the_page_is_self_contained_every_link_an_anchor_of_the_page(html_runs):
    for run in (html_runs.cross, html_runs.reference()):
        _, page = page_of(run)
        refs = [a.get(k) for _, a in page.elements for k in ("src", "href", "action", "data") if a.get(k)]
        assert refs and all(r.startswith("#") for r in refs), [r for r in refs if not r.startswith("#")]
        assert {r[1:] for r in refs} <= set(page.ids())  # every anchor lands


def test_the_decision_sheet_renders_as_html_too_beside_its_json(html_runs, tmp_path):
    a, b = html_runs.reference(), html_runs.cross
    sheet = compare(a.written.files["json"], b.written.files["json"], approved_by="<b>Captain</b>", resamples=300)
    written = write_compare(sheet, tmp_path, "compare-test")
    assert written.problems == {} and set(written.files) == {"json", "html"}
    text = written.files["html"].read_text(encoding="utf-8")
    page = Page(text)
    assert page.text("verdict-banner").startswith("NOT DECISION-GRADE")  # B has a failed pair
    assert "run B" in page.text("not-decision-grade")
    sections = ("runs", "gates", "bootstrap", "pairs", "languages", "completion", "warnings", "config-diff", "memo")
    for section in sections:
        assert section in page.ids(), section
    assert "roles.challenger" in text and "fact_check.partition" in text  # the config diff: what B changed
    assert list(page.rows("data-pair")) == html_runs.pairs
    for gate in ("stability", "observability", "correction", "decision-memo"):
        assert f'id="gate-{gate}"' in text
    assert "&lt;b&gt;Captain&lt;/b&gt;" in text and "<b>Captain</b>" not in text
    assert Path(written.files["json"]).read_text().startswith("{")
