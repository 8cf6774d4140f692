"""``[plugins.grounding]``: the grounding verifier's own options, declared to the kernel
(``ora_register_options``) so an unknown key or a wrong type is refused before a turn runs."""

from __future__ import annotations

from pydantic import Field

from ora_core.api import PluginOptions

TABLE = "grounding"
#: Retrieval streams whose chunks are not evidence: conversation memory holds earlier model
#: answers, and grounding an answer in the model's own past output is circular.
DEFAULT_EXCLUDED_STREAMS = ("conversation",)


class GroundingOptions(PluginOptions):
    """``[plugins.grounding]``. (The verdict threshold is the kernel's ``[verification] threshold``.)"""

    exclude_streams: list[str] = Field(default_factory=lambda: list(DEFAULT_EXCLUDED_STREAMS))
