"""Ora plugin: the non-LLM grounding verifier and the unsupported-specifics detector.

- verifier ``grounding`` (``GroundingVerifier``): PASS when every claim of the subject rests on
  the evidence package (MiniLM similarity, lexical overlap, specifics checks), FAIL otherwise,
  listing the unsupported claims; empty evidence is a FAIL ("no evidence"). The default
  ``[verification]`` uses it: it is a different lineage from the models it checks.
- detector ``unsupported-specifics`` (layer ``model_output``, assumes ``evidence_available``):
  numbers, dates, names and quotations of a model output that the evidence lacks.

The similarity comes from the embedder the host registers under the configured name
(``ctx.embedder()``, ``[embedding] embedder``: ``minilm`` from ora-minilm by default); this
plugin imports no model and no other plugin. This module stays light: the embedder loads its
model on the first ``verify`` that needs it, once per process however many components use it.

Options: ``[plugins.grounding]`` (``ora_grounding.options.GroundingOptions``: ``exclude_streams``).
"""

from __future__ import annotations

from collections.abc import Callable

from ora_core import hookimpl
from ora_core.api import lazy_exports

# Imported on first use (``ora --help`` loads this plugin without its components).
__getattr__ = lazy_exports(__name__, {"UnsupportedSpecificsDetector": "detector", "DEFAULT_THRESHOLD": "verifier",
                                      "GroundingVerifier": "verifier"})

__all__ = ["DEFAULT_THRESHOLD", "GroundingVerifier", "UnsupportedSpecificsDetector"]
__version__ = "0.3.0"


@hookimpl
def ora_register_verifiers(register: Callable[..., None]) -> None:
    from .verifier import GroundingVerifier

    register(GroundingVerifier())


@hookimpl
def ora_register_detectors(register: Callable[..., None]) -> None:
    from .detector import UnsupportedSpecificsDetector

    register(UnsupportedSpecificsDetector())


@hookimpl
def ora_register_options(register: Callable[..., None]) -> None:
    from .options import TABLE, GroundingOptions

    register(GroundingOptions, table=TABLE)
