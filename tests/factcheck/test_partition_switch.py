"""``[fact_check] partition = false`` switches source-type partitioning off, cleanly: every role sees the
full pool and the trace says why (the switch, not a side too small), on a pool that partitioning would
otherwise split. The calibration profiles that disable the D5 controls use it."""

from __future__ import annotations

import pytest

from ora_core.engine.calibration.profiles import get_profile
from ora_core.engine.factcheck.evidence import partition
from ora_core.kernel.config import load_config
from ora_core.kernel.errors import ConfigError
from ora_core.kernel.models import EvidenceItem
from ora_core.testing import make_config


def items(institutional: int, general: int) -> list[EvidenceItem]:
    kinds = [("government_report", "institutional")] * institutional + [("news_primary", "general")] * general
    return [EvidenceItem(id=f"E{n}", text=f"item {n} " * 8, source=f"n{n}.md", source_type=t, source_class=c,
                         direction="neutral", direction_source="unlabelled", search_strategy="research",
                         stream="concept", chunk_id=f"c{n}") for n, (t, c) in enumerate(kinds, 1)]


def test_partitioning_off_gives_every_role_the_full_pool_of_a_pool_it_would_split_and_says_so():
    pool = items(3, 3)
    assert partition(pool, 2).mode == "partitioned"  # the control: on, this pool is split
    off = partition(pool, 2, enabled=False)
    every = [i.id for i in pool]
    assert off.mode == "full-pool"
    assert off.advocate == off.challenger == off.reconciler == off.validation == every
    assert "fact_check.partition = false" in off.reason and "fewer than" not in off.reason


def test_the_switch_is_a_boolean_of_the_fact_check_section_on_by_default(tmp_path):
    assert make_config().config.fact_check.partition is True
    off = tmp_path / "off.toml"
    off.write_text("[fact_check]\npartition = false\n")
    assert load_config(off).config.fact_check.partition is False
    bad = tmp_path / "bad.toml"
    bad.write_text('[fact_check]\npartition = "sometimes"\n')
    with pytest.raises(ConfigError, match="partition"):
        load_config(bad)


def test_a_fact_check_turn_with_partitioning_off_shows_the_advocate_every_item_and_traces_the_switch(fc):
    _, on, *_ = fc.run()
    assert on.step("factcheck-claim1-advocate")["input"]["evidence_ids"] == ["E1", "E2", "E3"]  # the control
    _, trace, *_ = fc.run(fact_check={"direction": "provenance", "partition": False})
    every = ["E1", "E2", "E3", "E4", "E5", "E6"]
    for step in ("advocate", "self-consistency-1", "challenger", "reconciler", "validation"):
        assert trace.step(f"factcheck-claim1-{step}")["input"]["evidence_ids"] == every, step
    record = trace.step("factcheck-claim1-partition")
    assert record["input"]["enabled"] is False and record["output"]["mode"] == "full-pool"
    assert "fact_check.partition = false" in record["output"]["reason"]


def test_the_profiles_that_disable_the_controls_use_the_switch_not_an_unreachable_minimum():
    for name in ("no-diversity-controls", "planted-bias-no-controls"):
        fact_check = get_profile(name).fact_check
        assert fact_check["partition"] is False and "partition_min_side" not in fact_check, name
