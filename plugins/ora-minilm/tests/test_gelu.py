"""The vectorised erf/GELU against math.erf."""

from __future__ import annotations

import math

import pytest
from ora_minilm import gelu


def test_erf_approximation_is_within_1e_8_of_math_erf_on_the_whole_line():
    import numpy as np

    z = np.concatenate([np.linspace(-9.0, 9.0, 180_001), [0.0, 1e-30, -1e-30, 30.0, -30.0, 1e6]])
    reference = np.array([math.erf(v) for v in z])
    assert np.abs(gelu.erf(z) - reference).max() <= 1e-8  # the approximation itself, in float64


def test_float32_gelu_is_exact_gelu_up_to_float32_rounding():
    import numpy as np

    x32 = np.concatenate([np.linspace(-12.0, 12.0, 240_001), [0.0, -0.0, 1e-6, -1e-6, 40.0, -40.0]]).astype(np.float32)
    x = x32.astype(np.float64)
    exact = np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])
    got = gelu.gelu_(x32.copy()).astype(np.float64)
    # float32 holds GELU to half an ulp of the value; allow a few ulps plus 1e-7 * |x| for the
    # float32 rounding of the intermediate steps (the tail is exact to 6e-9, see the test above)
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert (np.abs(got - exact) <= 4 * ulp + 1e-7 * np.abs(x)).all()
    assert np.abs(got - exact).max() <= 1e-6


def test_gelu_works_in_place_on_float32_blocks_of_any_size(monkeypatch: pytest.MonkeyPatch):
    import numpy as np

    x = np.random.default_rng(3).normal(scale=3.0, size=(37, 101)).astype(np.float32)
    whole = gelu.gelu_(x.copy())
    monkeypatch.setattr(gelu, "BLOCK", 64)  # many blocks and a ragged last one
    target = x.copy()
    assert gelu.gelu_(target) is target
    assert np.array_equal(target, whole)
    assert gelu.gelu_(np.zeros((0, 5), dtype=np.float32)).shape == (0, 5)
    with pytest.raises(TypeError, match="float32"):
        gelu.gelu_(x.astype(np.float64))
    with pytest.raises(TypeError, match="C-contiguous"):
        gelu.gelu_(x.T)


def test_the_shipped_coefficients_are_what_the_fit_produces():
    import numpy as np

    refit = gelu.fit_tail_coefficients()
    assert np.allclose(refit, gelu.TAIL_COEFFS, rtol=0, atol=1e-6)
