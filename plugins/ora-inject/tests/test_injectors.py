"""Each injector is stateless and fires only at its own fault point; everywhere else it hands the
value back untouched (the end-to-end paths are pinned in tests/gears/test_fault_injection.py)."""

from __future__ import annotations

import ora_inject
import pytest

from ora_core.api import BackendRateLimited, BackendTimeout, ContextPackage, FaultPoint, Retrieval, RetrievalError
from ora_core.testing import make_host

INJECTORS = {i.name: i for i in ora_inject.INJECTORS}
TEXT = "An analysis of who benefits.\nCONFIDENCE: 0.90"


def point(site: str, **kw) -> FaultPoint:
    return FaultPoint(site=site, step=kw.pop("step", "s"), **kw)


ANALYST = {"purpose": "analyst", "primary": True, "attempt": 1, "gear": 4}


def test_the_plugin_registers_all_nine_modes_through_the_hook():
    host = make_host(ora_inject)
    assert sorted(host.components("fault_injector")) == sorted(INJECTORS) == [
        "backend-timeout", "coverage", "hallucination", "lowconf", "persistent", "rag-down", "rate-limit",
        "verifier-exception", "verifier-garbage"]


def test_lowconf_rewrites_only_the_primary_analysts_first_attempt():
    lowconf = INJECTORS["lowconf"]
    assert lowconf.inject(point("model_output", **ANALYST), TEXT).endswith("\nCONFIDENCE: 0.60")
    assert lowconf.inject(point("model_output", **ANALYST), TEXT).count("CONFIDENCE") == 1
    assert lowconf.inject(point("model_output", **{**ANALYST, "attempt": 2}), TEXT) is TEXT
    assert lowconf.inject(point("model_output", **{**ANALYST, "primary": False}), TEXT) is TEXT
    assert lowconf.inject(point("model_call", **ANALYST), None) is None


@pytest.mark.parametrize(("mode", "attempts"), [("hallucination", [1]), ("persistent", [1, 2, 3])])
def test_hallucination_quotes_a_fabricated_source_before_the_confidence_line(mode, attempts):
    injector = INJECTORS[mode]
    for attempt in (1, 2, 3):
        out = injector.inject(point("model_output", **{**ANALYST, "attempt": attempt}), TEXT)
        if attempt in attempts:
            assert ora_inject.modes.FABRICATED_QUOTE in out and out.endswith("CONFIDENCE: 0.90")
        else:
            assert out is TEXT


def test_coverage_drops_a_stream_without_naming_it_anywhere():
    package = ContextPackage.model_construct(mode="cui-bono", cleaned_prompt="p", rag_failures=[],
                                             retrievals={"concept": Retrieval(stream="concept", query="q")},
                                             missing_streams=["conversation"])
    out = INJECTORS["coverage"].inject(point("package"), package)
    assert out.retrievals == {} and out.missing_streams == ["conversation"]
    assert package.retrievals  # the original is not mutated
    assert INJECTORS["coverage"].inject(point("model_output"), "text") == "text"


def test_the_raising_modes_raise_typed_errors_at_their_points_only():
    with pytest.raises(RuntimeError, match="injected fault"):
        INJECTORS["verifier-exception"].inject(point("verify"), None)
    assert INJECTORS["verifier-exception"].inject(point("verifier_output"), "x") == "x"
    with pytest.raises(BackendTimeout):
        INJECTORS["backend-timeout"].inject(point("model_call", **ANALYST), None)
    assert INJECTORS["backend-timeout"].inject(point("model_call", purpose="verifier"), None) is None
    with pytest.raises(BackendRateLimited):
        INJECTORS["rate-limit"].inject(point("model_call", purpose="consolidator", gear=4), None)
    assert INJECTORS["rate-limit"].inject(point("model_call", **ANALYST), None) is None  # gear 4: consolidator
    with pytest.raises(BackendRateLimited):
        INJECTORS["rate-limit"].inject(point("model_call", **{**ANALYST, "gear": 2}), None)
    with pytest.raises(RetrievalError, match="concept"):
        INJECTORS["rag-down"].inject(point("retrieve", stream="concept"), None)


def test_verifier_garbage_replaces_only_verifier_output():
    assert INJECTORS["verifier-garbage"].inject(point("verifier_output"), "VERDICT: PASS") == "ok!! ✓✓ lgtm"
    assert INJECTORS["verifier-garbage"].inject(point("model_output"), TEXT) is TEXT
