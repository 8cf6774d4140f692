"""Pre-routing (issue 14): vocabulary + semantic scores per mode, Stage 2's rules, the audit in the
trace, the example cache, and the semantic signal degrading by name.

Stage 2's rules are tested on readings built by hand (their numbers say exactly what each rule
sees); whole turns run on the scripted backend with a crude word embedder, and the tests marked
``slow`` route real prompts with the real MiniLM embedder."""

from __future__ import annotations

import pytest

import ora_modes
from ora_core.engine import run_turn
from ora_core.engine.routing import (
    PARAMS,
    SemanticReading,
    dispatch,
    guess_language,
    index_entries,
    read_semantic,
    request_form,
)
from ora_core.kernel.modes import load_modes
from ora_core.kernel.trace import StandaloneContext
from ora_core.testing import make_config, make_host

LIBRARY = load_modes(make_host(ora_modes), None)
ISSUE_EIGHT = {
    "What is the capital of France?": {"standard"},
    "Why did the Roman Empire fall?": {"standard"},
    "Is coffee bad for your health?": {"standard"},
    "How does a transformer neural network work?": {"standard"},
    "Summarize the main risks of nuclear energy.": {"standard"},
    "Compare PostgreSQL and MySQL for a small web app.": {"standard", "decision-analysis"},
    "Write a haiku about autumn.": {"direct"},
    "Should I rent or buy a house in Berlin?": {"decision-analysis"},
}


def reading(**scores: float) -> SemanticReading:
    return SemanticReading(status="ok", embedder="test", scores={k.replace("_", "-"): v for k, v in scores.items()})


def route(prompt: str, semantic: SemanticReading | None, *, signals=(), best_guess: bool = False):
    return dispatch(list(signals), [], LIBRARY, forced_mode=None, best_guess=best_guess,
                    fallback_mode="deep-clarification", general_mode="standard", semantic=semantic, prompt=prompt)


# --- Stage 2's rules -----------------------------------------------------------------------------


def test_a_clear_specific_leader_runs_with_high_confidence():
    d = route("Which firms come out ahead from the tariff?", reading(cui_bono=0.55, standard=0.30, steelman=0.28))
    assert (d.mode, d.classification_confidence, d.audit.rule) == ("cui-bono", "high", "clear-leader")
    assert d.audit.margin == pytest.approx(0.25)


def test_a_clear_question_no_specific_mode_claims_goes_to_the_general_mode_not_a_question():
    d = route("Why do cats purr?", reading(standard=0.24, steelman=0.19, direct=0.16))
    assert (d.mode, d.classification_confidence) == ("standard", "default")
    assert d.pending_clarification is None and d.pending_clarification_swallowed is None


def test_a_specific_mode_only_just_ahead_of_the_general_mode_has_not_claimed_the_request():
    d = route("How do tariffs change prices?", reading(cui_bono=0.41, standard=0.40))
    assert (d.mode, d.classification_confidence, d.audit.rule) == ("standard", "default", "specific-not-clear")


def test_two_close_analytical_modes_ask_with_two_real_options_and_just_answer():
    d = route("Nuclear power: who wins, and should my town build a plant?",
              reading(cui_bono=0.45, decision_analysis=0.44, standard=0.30))
    assert d.mode is None and d.classification_confidence == "pending"
    question = d.pending_clarification
    assert "(cui-bono)" in question and "(decision-analysis)" in question and "just answer" in question
    assert d.audit.rule == "close-competitors" and set(d.audit.competing) >= {"cui-bono", "decision-analysis"}


def test_a_text_that_is_not_a_request_asks_and_still_offers_two_real_options():
    d = route("bananas", reading(standard=0.12, direct=0.10, simple=0.09))
    assert d.classification_confidence == "pending" and d.audit.rule == "not-a-request"
    offered = [m.name for m in LIBRARY if f"({m.name})" in d.pending_clarification]
    assert len(offered) >= 2 and "just answer" in d.pending_clarification


def test_best_guess_keeps_the_question_beside_the_guess():
    close = route("Nuclear power: who wins, and should my town build a plant?",
                  reading(cui_bono=0.45, decision_analysis=0.44), best_guess=True)
    assert (close.mode, close.classification_confidence) == ("cui-bono", "best-guess")
    assert close.pending_clarification_swallowed and close.pending_clarification is None
    nothing = route("bananas", reading(standard=0.1), best_guess=True)
    assert (nothing.mode, nothing.classification_confidence) == ("deep-clarification", "fallback")
    assert nothing.pending_clarification_swallowed


def test_a_direct_mode_leading_runs_gear_1():
    d = route("Write a limerick about Mondays.", reading(direct=0.52, standard=0.31))
    assert (d.mode, d.requested_gear, d.classification_confidence) == ("direct", 1, "high")


def test_a_mode_without_a_phrase_or_a_recognising_similarity_does_not_claim():
    d = route("Who wrote Middlemarch?", reading(direct=0.28, standard=0.17))
    assert (d.mode, d.audit.rule) == ("standard", "no-claim")


def test_a_strong_phrase_adds_its_weight_and_the_scores_say_so():
    from ora_core.kernel.models import Signal

    should = Signal(detector="mode-signals", kind="mode_signal", name="should i", strength="strong",
                    mode="decision-analysis")
    d = route("Should I rent or buy?", reading(decision_analysis=0.30, standard=0.33), signals=[should])
    top = d.candidates[0]
    assert (top.mode, top.vocabulary, top.semantic) == ("decision-analysis", 1.0, 0.30)
    assert top.score == pytest.approx(0.30 + PARAMS.vocab_weight)
    assert d.mode == "decision-analysis"


def test_without_the_semantic_signal_an_unmatched_request_goes_to_the_general_mode():
    missing = SemanticReading(status="missing", detail="no embedder")
    d = route("Tell me about the harness shift in AI.", missing)
    assert (d.mode, d.classification_confidence, d.audit.method) == ("standard", "default", "vocabulary-only")
    assert route("The quarterly numbers.", missing).classification_confidence == "pending"


@pytest.mark.parametrize("text, form", [
    ("Why do cats purr?", "opens with 'why'"), ("Tariffs on steel: who comes out ahead?", "question mark"),
    ("Tell me about Rome.", "opens with 'tell'"),
    ("Quick, write a poem.", "opens with 'write'"), ("Schreib ein Gedicht.", "opens with 'schreib'"),
    ("Interest rates.", None), ("bananas", None), ("My neighbour's dog.", None), ("zzqx vlorp?", None),
])
def test_request_form_reads_questions_and_requests_not_noun_phrases(text, form):
    assert request_form(text) == form


@pytest.mark.parametrize("text, lang", [
    ("What is the capital of France?", "en"), ("Wie funktioniert eine Wärmepumpe?", "de"),
    ("Pourquoi l'Empire romain est-il tombé ?", "fr"), ("bananas", "en"),
])
def test_guess_language(text, lang):
    assert guess_language(text) == lang


# --- the bundled mode pack ---------------------------------------------------------------------------


def test_every_bundled_mode_declares_ten_or_more_examples_that_do_not_repeat_its_strong_vocabulary():
    from ora_core.api.text import PhraseMatcher

    for mode in LIBRARY:
        assert len(mode.examples) >= 10, mode.name
        strong = PhraseMatcher(mode.signals.strong)
        assert not [e for e in mode.examples if strong.search(e)], mode.name
        assert len(set(mode.examples)) == len(mode.examples), mode.name


def test_examples_are_indexed_with_each_modes_description():
    entries = index_entries(LIBRARY)
    assert {m for m, source, _ in entries if source == "description"} == {m.name for m in LIBRARY}
    assert sum(source == "example" for _, source, _ in entries) == sum(len(m.examples) for m in LIBRARY)


# --- whole turns: the audit in the trace, degradation by name, the cache -----------------------------


def test_a_routed_turn_keeps_per_mode_scores_margin_and_nearest_examples_in_its_trace(front):
    prompt = "Who makes money when a city hosts the Olympics and who pays?"
    embedder = front.WordEmbedder()
    rt = front.runtime(front.Embedders(embedder), rules=[front.phase_a_rule(prompt)])
    result = run_turn(rt, prompt)
    out = front.step_doc(result.trace_path, "pre-routing")["output"]
    assert out["audit"]["method"] == "combined" and out["audit"]["semantic_status"] == "ok"
    scores = {c["mode"]: c for c in out["candidates"]}
    assert set(scores) == {m.name for m in LIBRARY}
    assert all(c["semantic"] is not None for c in scores.values())
    assert scores["cui-bono"]["nearest"][0]["text"] and out["audit"]["margin"] is not None
    assert out["audit"]["rule"] and out["audit"]["weights"]["vocab_weight"] == PARAMS.vocab_weight
    assert "cui-bono" in out["routing_scores"] and "routing_total_ms" in out["audit"]["timings_ms"]


def test_no_embedder_routes_by_vocabulary_under_a_named_contingency(front):
    prompt = "Tell me about the harness shift in AI."
    rt = front.runtime(rules=[front.phase_a_rule(prompt)])
    result = run_turn(rt, prompt)
    assert result.status != "needs_clarification" and result.mode == "standard"
    assert "routing-semantic-unavailable-vocabulary-only" in result.contingencies
    audit = front.step_doc(result.trace_path, "pre-routing")["output"]["audit"]
    assert audit["semantic_status"] == "missing" and "minilm" in audit["semantic_detail"]


@pytest.mark.parametrize("broken, words", [
    ({"fail": True}, "embedding model file is truncated"),
    ({"wrong_dimension": True}, "63-dimensional vector"),
])
def test_a_failing_embedder_degrades_routing_by_name_and_never_crashes(front, broken, words):
    prompt = "Cui bono: the new stadium?"
    rt = front.runtime(front.Embedders(front.WordEmbedder(**broken)), rules=[front.phase_a_rule(prompt)])
    result = run_turn(rt, prompt)
    assert result.mode == "cui-bono"
    [record] = [c for c in front.jsonl(result.trace_path, "contingencies.jsonl")
                if c["name"] == "routing-semantic-unavailable-vocabulary-only"]
    assert words in record["detail"]
    assert front.step_doc(result.trace_path, "pre-routing")["output"]["audit"]["semantic_status"] == "failed"


def test_the_examples_are_embedded_once_per_process_per_mode_set(front, tmp_path):
    import shutil

    embedder = front.WordEmbedder(name="counting")
    host = make_host(ora_modes, front.Embedders(embedder))
    config = make_config({"embedding": {"embedder": "counting"}}).config
    ctx = StandaloneContext(config, host=host)
    texts = len(index_entries(LIBRARY))
    read_semantic(ctx, LIBRARY, "first prompt")
    read_semantic(ctx, load_modes(host, None), "second prompt")  # a fresh library, the same examples
    assert len(embedder.embedded) == texts + 2
    changed = tmp_path / "modes"
    shutil.copytree(ora_modes.modes_dir(), changed)
    path = changed / "steelman.md"
    path.write_text(path.read_text().replace("examples:\n", 'examples:\n  - "Defend the four-day week."\n', 1))
    other = load_modes(None, None, [changed])
    read_semantic(ctx, other, "third prompt")
    assert len(embedder.embedded) == texts + 2 + texts + 1 + 1  # a new mode set: indexed again


def test_a_pack_without_examples_still_routes_by_vocabulary(front, tmp_path):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(ora_modes.modes_dir(), bare)
    for path in bare.glob("*.md"):
        text = path.read_text()
        head, rest = text.split("\nexamples:\n", 1)
        path.write_text(head + "\nretrieval:" + rest.split("\nretrieval:", 1)[1])
    prompt = "Steelman the case for night trains."
    rt = front.runtime(front.Embedders(front.WordEmbedder()), rules=[front.phase_a_rule(prompt)],
                       with_modes=False, modes={"dirs": [str(bare)]})
    result = run_turn(rt, prompt)
    assert result.mode == "steelman"
    audit = front.step_doc(result.trace_path, "pre-routing")["output"]["audit"]
    assert set(audit["modes_without_examples"]) == {m.name for m in LIBRARY}


# --- real MiniLM ------------------------------------------------------------------------------------


@pytest.fixture
def minilm_turn(front, monkeypatch):
    """``route(prompt)``: Stage 0 + pre-routing of a real turn context with the real embedder."""
    from ora_core.engine.routing import run_routing
    from ora_core.engine.stage0 import run_stage0
    from ora_core.kernel.trace import TurnContext

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    host = front.host(front.minilm(), with_trace=False)
    config = make_config().config
    library = load_modes(host, config)

    def route_prompt(prompt: str):
        turn = TurnContext(prompt=prompt, config=config, config_hash="test", host=host)
        if run_stage0(turn, prompt).bypass:
            return "simple", None
        decision = run_routing(turn, library, prompt, forced_mode=None, best_guess=False)
        return decision.mode or "ask", decision

    return route_prompt


@pytest.mark.slow
def test_the_eight_everyday_prompts_of_issue_14_all_run_none_asks_back(minilm_turn):
    for prompt, acceptable in ISSUE_EIGHT.items():
        mode, decision = minilm_turn(prompt)
        assert mode in acceptable, (prompt, mode, decision.reasoning if decision else "bypass")
        assert decision.audit.semantic_status == "ok" and decision.candidates[0].semantic is not None


@pytest.mark.slow
@pytest.mark.parametrize("prompt, acceptable", [
    ("Explain in two sentences what a forensic trace is for.", {"standard"}),
    ("Which companies come out ahead when the state subsidises heat pumps?", {"cui-bono"}),
    ("Play devil's advocate and defend a ban on homework.", {"steelman"}),
    ("Rewrite this more politely: send me the file now.", {"direct"}),
    ("Wie funktioniert ein Dieselmotor?", {"standard"}),
    ("Dois-je quitter mon emploi pour créer une entreprise ?", {"decision-analysis"}),
    ("Wem nützen hohe Mieten?", {"cui-bono"}),
    ("Écris un haïku sur l'hiver.", {"direct"}),
])
def test_paraphrases_and_german_and_french_route_sensibly(minilm_turn, prompt, acceptable):
    mode, decision = minilm_turn(prompt)
    assert mode in acceptable, (mode, decision.reasoning if decision else "bypass")


@pytest.mark.slow
def test_routing_adds_little_once_the_embedder_is_warm(minilm_turn):
    minilm_turn("warm up the model and the example index, please?")
    timings = [minilm_turn(p)[1].audit.timings_ms["routing_total_ms"] for p in ISSUE_EIGHT if "?" in p] * 1
    assert sorted(timings)[len(timings) // 2] < 60  # generous for a loaded CI box; the benchmark reports ~15 ms
