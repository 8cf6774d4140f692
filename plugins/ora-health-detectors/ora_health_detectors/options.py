"""``[plugins.health-detectors]``: the detectors' settings, declared to the kernel
(``ora_register_options``) so an unknown key or a wrong type is refused before a turn runs."""

from __future__ import annotations

from pydantic import Field

from ora_core.api import PluginOptions

TABLE = "health-detectors"
DEFAULT_MIN_WORDS = 40
DEFAULT_CLARIFICATION_BODY_WORDS = 60


class HealthDetectorsOptions(PluginOptions):
    """``[plugins.health-detectors]``."""

    #: ``brief-stub``: fewer words than this is a stub (a step may ask for its own minimum through
    #: ``ctx.data["expected_min_words"]``).
    min_words: int = Field(default=DEFAULT_MIN_WORDS, ge=0)
    #: ``clarification-loop``: questions to the user with fewer words of other text than this.
    clarification_body_words: int = Field(default=DEFAULT_CLARIFICATION_BODY_WORDS, ge=0)
