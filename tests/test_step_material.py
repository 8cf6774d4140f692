"""The material each detection reads is built without a validation pass from parts already
typed (``reliability.step_material``): it equals the validated ``StepMaterial``."""

from __future__ import annotations

import pytest

from ora_core.engine.reliability import RETRY_PHRASES, StepSpec, control_texts, step_material
from ora_core.kernel.models import StepMaterial


@pytest.mark.parametrize("quoted", [[], ["the subject", "a chunk"]])
def test_step_material_equals_the_validated_material(quoted: list[str]) -> None:
    spec = StepSpec(name="analyst", role="analyst", purpose="analyst", prompt_key="k", task="t", package="p",
                    quoted=quoted)
    built = step_material(spec, "what was sent", control_texts(2), 40)
    validated = StepMaterial(step="analyst", purpose="analyst", given="what was sent",
                             instructions=list(control_texts(2)), retry_phrases=list(RETRY_PHRASES),
                             expected_min_words=40, quoted=quoted)
    assert built == validated
    assert built.model_dump() == validated.model_dump() and built.model_fields_set == validated.model_fields_set
    assert list(built.__dict__) == list(validated.__dict__)
    assert built.quoted is not spec.quoted  # a copy, as validation makes


def test_step_material_of_parts_of_other_types_is_validated() -> None:
    spec = StepSpec(name="analyst", role="analyst", purpose="analyst", prompt_key="k", task="t", package="p")
    with pytest.raises(ValueError, match="expected_min_words"):
        step_material(spec, "sent", control_texts(2), "forty")  # type: ignore[arg-type]
