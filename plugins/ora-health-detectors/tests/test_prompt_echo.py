"""The prompt-echo detector (moved here from the engine): an output that parrots the
orchestrator's own instructions is unhealthy; the same words in the material are not an echo."""

from types import SimpleNamespace

from ora_health_detectors import PromptEchoDetector

from ora_core.api import Signal, StepMaterial
from ora_core.testing import RETRY_PHRASES, control_texts

PROTOCOL = control_texts(2)[2]  # the Supplemental RAG protocol text


def echo(text: str, given: str = "") -> list[Signal]:
    material = StepMaterial(given=given, instructions=list(control_texts(2)), retry_phrases=list(RETRY_PHRASES))
    return PromptEchoDetector().detect(text, SimpleNamespace(data={"material": material}))


def test_prompt_echo_flags_protocol_text_but_not_when_the_package_quotes_it():
    parroted = "My analysis.\n" + PROTOCOL.split("\n", 1)[1]
    [signal] = echo(parroted, given="## EVIDENCE\nnothing relevant")
    assert (signal.kind, signal.name, signal.strength) == ("unhealthy", "prompt-echo", "strong")
    assert echo(parroted, given="## EVIDENCE\n" + PROTOCOL) == []  # a vault note quoting it
    assert echo("A plain analysis of who benefits; COVERAGE GAP: no figures.") == []
    assert echo("Your previous attempt failed: I try again.")[0].matched == "your previous attempt failed"
    # an analysis under review that contains the phrase is material the model was given
    assert echo("It says 'your previous attempt failed'.", given="... your previous attempt failed ...") == []


def test_prompt_echo_is_silent_without_the_engines_material():
    parroted = "My analysis.\n" + PROTOCOL.split("\n", 1)[1]
    assert PromptEchoDetector().detect(parroted, SimpleNamespace(data={})) == []
