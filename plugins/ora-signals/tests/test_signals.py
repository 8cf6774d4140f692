"""Stage 1 mode signals: vocabulary from the modes' front matter, word boundaries, one matcher."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import ora_signals

import ora_modes
from ora_core.testing import load_modes, parse_mode_text


def _ctx(*dirs: Path):
    return SimpleNamespace(data={"modes": load_modes(None, None, dirs)})


def test_vocabulary_comes_from_the_mode_files(ora_host, register_plugin):
    register_plugin(ora_signals)
    detector = ora_host.get("detector", "mode-signals")
    signals = detector.detect("Cui bono, and who benefits? Also the incentives.", _ctx(ora_modes.modes_dir()))
    found = {(s.mode, s.name, s.strength) for s in signals}
    assert ("cui-bono", "cui bono", "strong") in found
    assert ("cui-bono", "who benefits", "strong") in found
    assert ("cui-bono", "incentives", "weak") in found
    assert detector.layer == "cleaned_prompt"


def test_word_boundaries_hold_for_mode_vocabulary():
    detector = ora_signals.ModeSignalDetector()
    ctx = _ctx(ora_modes.modes_dir())
    assert not [s for s in detector.detect("the decisionmaker and the optionsless", ctx)]
    assert [s.mode for s in detector.detect("Should we hire?", ctx)] == ["decision-analysis"]


def test_a_new_mode_changes_the_vocabulary(tmp_path):
    text = (Path(ora_modes.modes_dir()) / "steelman.md").read_text()
    text = text.replace("name: steelman", "name: red-team").replace("[steelman,", "[red team this,")
    (tmp_path / "red-team.md").write_text(text)
    mode, problems = parse_mode_text(text, str(tmp_path / "red-team.md"))
    assert not problems
    detector = ora_signals.ModeSignalDetector()
    assert not detector.detect("Please red team this plan", _ctx(ora_modes.modes_dir()))
    hits = detector.detect("Please red team this plan", _ctx(ora_modes.modes_dir(), tmp_path))
    assert [s.mode for s in hits] == ["red-team"]


def test_german_and_french_vocabulary_matches_on_word_boundaries():
    detector = ora_signals.ModeSignalDetector()
    ctx = _ctx(ora_modes.modes_dir())

    def modes(text):
        return {(s.mode, s.strength) for s in detector.detect(text, ctx)}

    assert ("decision-analysis", "strong") in modes("Dois-je louer ou acheter ?")
    assert ("decision-analysis", "strong") in modes("Soll ich kündigen?")
    assert ("cui-bono", "strong") in modes("Wem nützen hohe Mieten?")
    assert ("cui-bono", "strong") in modes("À qui profite la réforme ?")
    assert ("steelman", "strong") in modes("Quel est le meilleur argument pour le train ?")
    assert not modes("Les grands-dois-jeux")  # no phrase inside a hyphenated word
    assert ("decision-analysis", "strong") not in modes("Sollichwerk ist ein Name")
