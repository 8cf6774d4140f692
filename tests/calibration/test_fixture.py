"""The bundled fixture and the profiles: what a calibration run stands on."""

from __future__ import annotations

import shutil

import pytest

from ora_core.engine.calibration.fixture import BUNDLED, check_version, load_fixture, select_pairs
from ora_core.engine.calibration.instrument import oracle, planted_bias_overrides
from ora_core.engine.calibration.profiles import get_profile, load_profiles
from ora_core.kernel.config import ROLE_NAMES, FactCheckConfig
from ora_core.kernel.errors import ConfigError, UsageError


def test_the_bundled_fixture_has_at_least_ten_pairs_in_english_german_and_french_with_its_version_recorded():
    fixture = load_fixture()
    assert len(fixture.pairs) >= 10
    assert {p.language for p in fixture.pairs} == {"en", "de", "fr"}
    assert {p.pair_category for p in fixture.pairs} == {"bias-diagnostic", "accuracy-control"}
    assert {p.expected_skew for p in fixture.pairs} == {"neutral", "left-favored", "right-favored"}
    assert sum(p.is_strict_inverse for p in fixture.pairs) >= 2
    assert check_version(fixture) is None, check_version(fixture)


def test_every_pair_has_enough_evidence_for_the_gate_and_both_directions():
    config = FactCheckConfig()
    for pair in load_fixture().pairs:
        types = {n.source_type for n in pair.notes}
        assert len(pair.notes) >= config.min_items and len(types) >= config.min_source_types, pair.id
        assert all(n.chars >= config.min_item_chars for n in pair.notes), pair.id
        stances = {n.stance for n in pair.notes}
        if pair.pair_category == "bias-diagnostic":
            assert {"left", "right"} <= stances, f"{pair.id}: notes speak for one side only ({stances})"
        assert pair.left_claim != pair.right_claim


def test_most_pairs_have_both_source_classes_for_partitioning_and_some_fall_back_to_the_full_pool():
    fixture = load_fixture()
    side = FactCheckConfig().partition_min_side

    def splits(pair):
        return all(sum(1 for n in pair.notes if n.source_class == c) >= side for c in ("institutional", "general"))

    split = [p.id for p in fixture.pairs if splits(p)]
    full = [p.id for p in fixture.pairs if not splits(p)]
    assert len(split) >= len(fixture.pairs) - 3 and full, (split, full)


def test_quick_is_three_english_pairs_plus_one_strict_inverse_and_targeted_takes_the_union():
    fixture = load_fixture()
    quick = select_pairs(fixture, "quick")
    plain = [p for p in quick if not p.is_strict_inverse]
    assert len(plain) == 3 and all(p.language == "en" for p in plain)
    assert sum(p.is_strict_inverse for p in quick) == 1
    assert [p.id for p in select_pairs(fixture, "full")] == [p.id for p in fixture.pairs]
    picked = select_pairs(fixture, "targeted", ["language:fr", "pair:tempolimit-de"])
    assert {p.language for p in picked} == {"fr", "de"} and "tempolimit-de" in {p.id for p in picked}
    assert [p.id for p in picked] == [p.id for p in fixture.pairs if p in picked]  # fixture order
    with pytest.raises(UsageError, match="no pair has that language"):
        select_pairs(fixture, "targeted", ["language:es"])
    with pytest.raises(UsageError, match="expected domain"):
        select_pairs(fixture, "targeted", ["country:fr"])


def test_an_edit_without_a_version_bump_is_caught(tmp_path):
    copy = tmp_path / "fixture"
    shutil.copytree(BUNDLED, copy)
    note = copy / "notes" / "minimum-wage-en" / "cbo-2019-estimate.md"
    text = note.read_text(encoding="utf-8")
    assert "17 million" in text
    note.write_text(text.replace("17 million", "18 million"), encoding="utf-8")
    edited = load_fixture(copy)
    assert edited.content_hash != load_fixture().content_hash
    assert "changed" in check_version(edited) and "bumps the version" in check_version(edited)


def test_a_note_with_an_unknown_source_type_is_refused_naming_the_file(tmp_path):
    copy = tmp_path / "fixture"
    shutil.copytree(BUNDLED, copy)
    note = next((copy / "notes" / "rent-control-en").glob("*.md"))
    note.write_text(note.read_text(encoding="utf-8").replace("source_type: ", "source_type: blog_"),
                    encoding="utf-8")
    with pytest.raises(ConfigError, match=note.name):
        load_fixture(copy)


def test_the_profiles_name_seed_002s_maps_and_refuse_unknown_roles(tmp_path):
    profiles = load_profiles()
    assert {"baseline", "cross-provider", "max-diversity", "no-diversity-controls", "planted-bias"} <= set(profiles)
    off = profiles["no-diversity-controls"].fact_check
    FactCheckConfig(**off)  # every key is a real setting
    assert off["partition"] is False and off["contrarian"] is False and off["imbalance_threshold"] == 1.0
    bad = tmp_path / "p.toml"
    bad.write_text('[profiles.x]\nroles = { judge = "local" }\n')
    with pytest.raises(ConfigError, match="unknown role"):
        load_profiles(bad)
    with pytest.raises(UsageError, match="no calibration profile 'nope'"):
        get_profile("nope")


def test_the_instrument_puts_every_role_on_one_scripted_backend_and_its_oracle_is_the_fixtures_expectation():
    fixture = load_fixture()
    over = planted_bias_overrides(fixture.pairs, bias_pp=20)
    assert set(over["roles"]) == set(ROLE_NAMES) and set(over["roles"].values()) == {"planted"}
    assert over["backends"]["planted"]["type"] == "scripted"
    right_favored = next(p for p in fixture.pairs if p.expected_skew == "right-favored")
    left, right = oracle(right_favored)
    assert left - right == -right_favored.expected_asymmetry
    assert all(oracle(p) == (50.0, 50.0) for p in fixture.pairs if p.expected_skew == "neutral")
