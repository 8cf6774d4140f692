"""Ora's public API: everything a plugin or an application may use, and nothing else.

Plugins import from ``ora_core`` (``hookimpl``) or from here; the rest of ``ora_core`` is free to
move. Names are loaded on first use, so ``from ora_core.api import hookimpl`` costs only pluggy:
a plugin's import stays off ``ora --help``'s path until it touches a model or the engine.

- **Hooks**: ``hookimpl`` (the hookspecs are in ``docs/hooks.md``).
- **Data models** (pydantic, validated at the boundary): messages and completions, chunks and
  retrievals, signals, verdicts, contingencies, trace events, turn results, the front of the
  pipeline's packages, fault points, a fact-check turn's claim verdicts.
- **Errors**: ``OraError`` and its family (``BackendError`` subclasses say how a backend failed).
- **Redaction**: ``redact_text`` (credential shapes and given secrets out of a server's body),
  ``mask_url``, ``Redactor`` (every secret of a configuration) and ``Secret``.
- **Layers and signal kinds**: ``LAYER_ORDER``, ``LAYER_PROVIDES``, ``PROPERTY_MEANINGS``,
  ``SignalKind`` and ``SIGNAL_EFFECTS`` (the only kinds that change a turn's path).
- **Component shapes**: ``Detector``, ``BackendFactory``, ``ModelBackend``, ``Retriever``,
  ``Verifier``, ``TraceSink``, ``FaultInjector``, ``Embedder`` (``typing.Protocol``: nothing to
  subclass; the kernel checks the shape at registration).
- **Kits for plugin authors**: ``LazyBackendFactory`` and ``lazy_exports`` (register without
  importing heavy modules), ``lazy_compile`` (a regex compiled on first use, with a literal
  prefilter), ``StandaloneContext`` (a ``ctx`` outside a turn), ``CommandContext`` (what a plugin's
  CLI commands get), ``user_data_dir``/``user_config_dir``, ``PluginOptions`` (a plugin's
  ``[plugins.<name>]`` table as a pydantic model), ``assembled`` (a pydantic shape from fields
  already typed, without a validation pass, for shapes built on every call), ``load_modes``;
  ``ora_core.api.http`` (the HTTP transport, deadlines, Retry-After; needs the ``http`` extra)
  and ``ora_core.api.text`` (phrase matching).
- **The application**: ``Ora`` (``Ora.open()``, ``run``, ``arun``, ``stream``, ``replay_call``), the
  typed turn events it streams (``TurnEvent`` and its kinds), ``answer_clarification`` (the answer to
  a turn's question), ``ReplayResult``, and ``PluginHost`` (to embed Ora with plugins of your own).
- **Sub-doors**: ``ora_core.api.http`` (the HTTP kit), ``ora_core.api.text`` (phrase matching) and
  ``ora_core.api.html`` (report pages: a Jinja2 environment over the shared templates, SVG charts).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_KERNEL_MODELS = (
    "Message", "StopUnless", "CompletionParams", "Completion", "ModelCallRecord",
    "Provenance", "Chunk", "EmptyReason", "EmptyDiagnosis", "Retrieval", "RetrievalFilters",
    "Signal", "VerdictStatus", "Verdict", "Contingency", "StepHealth", "TurnStatus", "EventKind",
    "TraceEvent", "TurnInfo", "TurnResult", "Interruption", "ConversationMessage", "PhaseAResult",
    "ModeCandidate", "SignalStrengthSummary",
    "RoutingDecision", "BudgetSignal", "BudgetReport", "BUDGET_SIGNAL_NAMES", "RagFailure",
    "ContextPackage", "EvidencePackage", "FaultPoint", "FaultSite", "ModelRequest", "ModelReply",
    "VerificationCall", "StepMaterial", "RoutingAudit", "NearestExample", "ClarificationAnswer",
    "FactCheckResult", "ClaimVerdict", "EvidenceItem", "EvidenceCounts", "FactCheckWarning", "RoleReading",
    "SelfConsistency", "ChallengePoint", "PointResponse", "Reconciliation", "ValidationReport", "EvidencePartition",
    "ContrarianReport", "VerdictBand", "EvidenceDirection", "SourceClass", "FACT_CHECK_DEGRADATION_TYPES",
)
_ERRORS = (
    "OraError", "ConfigError", "UsageError", "PluginError", "RegistrationError", "ModeError", "BackendError",
    "BackendTimeout", "BackendRateLimited", "BackendAuthError", "BackendSessionExpired",
    "BackendUnavailable", "BackendBadResponse", "BackendContextExceeded", "RetrievalError", "RetrievalTimeout",
    "VerifierError", "VerifierTimeout",
)
_COMPONENTS = ("Detector", "ModelBackend", "BackendFactory", "Retriever", "Verifier", "TraceSink",
               "FaultInjector", "Embedder")

#: name -> module that defines it (imported on first use).
_EXPORTS: dict[str, str] = {
    "hookimpl": "ora_core.kernel.hookspecs",
    **{name: "ora_core.kernel.models" for name in _KERNEL_MODELS},
    **{name: "ora_core.kernel.errors" for name in _ERRORS},
    **{name: "ora_core.kernel.components" for name in _COMPONENTS},
    "INSTRUCTION_MARK_KEY": "ora_core.kernel.models",
    "LAYER_ORDER": "ora_core.kernel.layers",
    "LAYER_PROVIDES": "ora_core.kernel.layers",
    "PROPERTY_MEANINGS": "ora_core.kernel.layers",
    "SignalKind": "ora_core.kernel.signals",
    "SIGNAL_EFFECTS": "ora_core.kernel.signals",
    "StandaloneContext": "ora_core.kernel.trace",
    "TextAnalysis": "ora_core.kernel.detection",
    "Redactor": "ora_core.kernel.redaction",
    "Secret": "ora_core.kernel.redaction",
    "redact_text": "ora_core.kernel.redaction",
    "mask_url": "ora_core.kernel.redaction",
    "user_data_dir": "ora_core.kernel.config",
    "user_config_dir": "ora_core.kernel.config",
    "PluginOptions": "ora_core.kernel.config",
    "ResolvedConfig": "ora_core.kernel.config",
    "Mode": "ora_core.kernel.modes",
    "ModeLibrary": "ora_core.kernel.modes",
    "load_modes": "ora_core.kernel.modes",
    "assembled": "ora_core.kernel.models",
    "CommandContext": "ora_core.kernel.commands",
    "LazyBackendFactory": "ora_core.kits.lazy",
    "lazy_exports": "ora_core.kits.lazy",
    "lazy_compile": "ora_core.kits.lazy",
    "LazyPattern": "ora_core.kits.lazy",
    "Ora": "ora_core.engine.app",
    "answer_clarification": "ora_core.engine.app",
    "PluginHost": "ora_core.kernel.plugins",
    "ReplayResult": "ora_core.engine.replay",
    "TurnInterrupted": "ora_core.engine.runner",
    "TurnEvent": "ora_core.engine.events",
    "StepStarted": "ora_core.engine.events",
    "StepFinished": "ora_core.engine.events",
    "ContingencyRaised": "ora_core.engine.events",
    "SupplementFetched": "ora_core.engine.events",
    "RetryStarted": "ora_core.engine.events",
    "FaultInjected": "ora_core.engine.events",
    "VerdictReached": "ora_core.engine.events",
    "TurnFinished": "ora_core.engine.events",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ora_core.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain module attribute
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors only
    from ora_core.engine.app import Ora, answer_clarification
    from ora_core.engine.events import (
        ContingencyRaised,
        FaultInjected,
        RetryStarted,
        StepFinished,
        StepStarted,
        SupplementFetched,
        TurnEvent,
        TurnFinished,
        VerdictReached,
    )
    from ora_core.engine.replay import ReplayResult
    from ora_core.engine.runner import TurnInterrupted
    from ora_core.kernel.commands import CommandContext
    from ora_core.kernel.components import (
        BackendFactory,
        Detector,
        Embedder,
        FaultInjector,
        ModelBackend,
        Retriever,
        TraceSink,
        Verifier,
    )
    from ora_core.kernel.config import PluginOptions, ResolvedConfig, user_config_dir, user_data_dir
    from ora_core.kernel.detection import TextAnalysis
    from ora_core.kernel.errors import (
        BackendAuthError,
        BackendBadResponse,
        BackendContextExceeded,
        BackendError,
        BackendRateLimited,
        BackendSessionExpired,
        BackendTimeout,
        BackendUnavailable,
        ConfigError,
        ModeError,
        OraError,
        PluginError,
        RegistrationError,
        RetrievalError,
        RetrievalTimeout,
        UsageError,
        VerifierError,
        VerifierTimeout,
    )
    from ora_core.kernel.hookspecs import hookimpl
    from ora_core.kernel.layers import LAYER_ORDER, LAYER_PROVIDES, PROPERTY_MEANINGS
    from ora_core.kernel.models import *  # noqa: F403
    from ora_core.kernel.models import assembled
    from ora_core.kernel.modes import Mode, ModeLibrary, load_modes
    from ora_core.kernel.plugins import PluginHost
    from ora_core.kernel.redaction import Redactor, Secret, mask_url, redact_text
    from ora_core.kernel.signals import SIGNAL_EFFECTS, SignalKind
    from ora_core.kernel.trace import StandaloneContext
    from ora_core.kits.lazy import LazyBackendFactory, LazyPattern, lazy_compile, lazy_exports
