"""Request shapes (issue 25): what a prompt asks for by its form, in English, German and French.

The prompts here are written for these tests, apart from the routing evaluation sets under
``tests/data/routing`` (which are never used to build the detector)."""

from __future__ import annotations

import pytest
from ora_signals import shapes
from ora_signals.shapes import RequestShapeDetector, request_shapes


@pytest.mark.parametrize("text, shape", [
    # choice: named options, the user's own or asking for a pick
    ("Our lab could buy a Zeiss or a Leica microscope; which is the better buy?", "choice"),
    ("Train or night bus to Vienna, what would you do?", "choice"),
    ("I am hesitating between a gap year and starting university straight away.", "choice"),
    ("Sollen wir das Büro in Köln behalten oder nach Düsseldorf ziehen? Was meinst du, welche Option?", "choice"),
    ("Je dois choisir entre Rennes et Nantes pour mon stage, lequel conseilles-tu ?", "choice"),
    # case-for: the best case for a position
    ("I think congestion charges are unfair, but present the most convincing argument for them.", "case-for"),
    ("Convince me that nuclear fusion research is money well spent.", "case-for"),
    ("Was ist die stärkste Begründung für eine Zuckersteuer?", "case-for"),
    ("Donne-moi le meilleur argument des défenseurs de la corrida.", "case-for"),
    # definition: what a term means or is for
    ("What does 'degraded' mean on a step of the trace?", "definition"),
    ("Was bedeutet der Begriff 'Konsolidierung' bei euch?", "definition"),
    ("À quoi sert l'étape de consolidation ?", "definition"),
    # creative: a short made-up text, not a question about one
    ("Tell me a joke about chemists.", "creative"),
    ("Slogan for a dog-walking business?", "creative"),
    ("Erzähl einen Witz über Mathematiker.", "creative"),
    ("Raconte une blague sur les girafes.", "creative"),
    # beneficiary: who gains, pays or is behind
    ("Which banks profit when interest rates stay high?", "beneficiary"),
    ("Wer verdient an teuren Medikamenten?", "beneficiary"),
    # context-reference: leans on something the prompt does not carry
    ("Do the usual with the invoices.", "context-reference"),
    ("Write it up like we agreed.", "context-reference"),
    ("Mach es wie immer.", "context-reference"),
    ("Fais comme d'habitude avec les factures.", "context-reference"),
    ("Do the same thing as last time for the Q3 deck.", "context-reference"),
    # claim-check (with assertion): asked outright whether a statement holds, or handed over
    ("Is it true that camels store water in their humps?", "claim-check"),
    ("Verify this: the Eiffel Tower grows in summer.", "claim-check"),
    ("Stimmt es, dass Bananen radioaktiv sind?", "claim-check"),
    ("Est-ce vrai que les poissons rouges ont une mémoire de trois secondes ?", "claim-check"),
])
def test_each_shape_is_read_from_the_form_of_a_request(text, shape):
    found = request_shapes(text)
    assert shape in found, found
    assert found[shape] and found[shape] in text or shape in {"assertion"}


@pytest.mark.parametrize("text, absent", [
    ("Why do people find puns funny?", "creative"),  # a question about jokes asks for no joke
    ("What is the history of the limerick?", "creative"),
    ("Is coffee more or less healthy than tea?", "choice"),  # "more or less" offers no options
    ("True or false: sharks are mammals.", "choice"),
    ("Can you rewrite this like before: The meeting is moved to Thursday at ten in room four.",
     "context-reference"),  # the text to work on is in the prompt
    ("What happened at the central bank meeting yesterday?", "context-reference"),
    ("Who painted the ceiling of the Sistine Chapel?", "beneficiary"),
    ("How does a heat pump work?", "assertion"),
    ("I feel stuck and I am not sure what to ask.", "assertion"),  # about the speaker, not the world
])
def test_forms_that_only_look_like_a_shape_are_not_one(text, absent):
    assert absent not in request_shapes(text)


def test_a_request_for_an_argument_a_definition_or_a_joke_is_not_a_claim_to_check():
    for text in ("I doubt that rent caps work; give me the strongest argument for them.",
                 "What does the verdict band of a fact-check mean?",
                 "Tell me a joke about the claim that the moon is made of cheese."):
        found = request_shapes(text)
        assert "assertion" not in found and "claim-check" not in found, (text, found)
    assert set(request_shapes("Rent caps always reduce the number of flats.")) == {"assertion"}
    assert set(request_shapes("Is it true that rent caps always reduce the number of flats?")) == {
        "assertion", "claim-check"}


def test_the_detector_emits_one_strong_request_shape_signal_per_shape_with_the_words_that_show_it():
    detector = RequestShapeDetector()
    assert (detector.kind, detector.layer) == ("request_shape", "cleaned_prompt")
    text = "Our team: Jira or Linear, which would you pick?"
    [signal] = detector.detect(text)
    assert (signal.name, signal.kind, signal.strength, signal.detector) == (
        "choice", "request_shape", "strong", "request-shapes")
    assert signal.matched and text[signal.start:signal.end] == signal.matched
    assert detector.detect("bananas") == []


def test_the_plugin_registers_the_shape_detector_beside_the_mode_signals(ora_host, register_plugin):
    import ora_signals

    register_plugin(ora_signals)
    assert ora_host.get("detector", "request-shapes").kind == "request_shape"
    assert ora_host.get("detector", "mode-signals").kind == "mode_signal"


def test_every_shape_the_module_doc_names_is_one_the_detector_can_emit():
    emitted = set(shapes.SHAPES) | {"assertion", "claim-check"}
    for name in emitted:
        assert f"``{name}``" in (shapes.__doc__ or ""), name
