"""The names Ora's spans carry: the OpenTelemetry GenAI semantic conventions, and Ora's own ``ora.*``.

The GenAI conventions are still in development; the version followed is the one in the tracer's
schema URL (``SCHEMA_URL``). ``tests/test_conventions.py`` checks every ``gen_ai.*`` name here
against the installed ``opentelemetry-semantic-conventions`` package, so a renamed attribute fails a
test instead of silently vanishing from a backend's GenAI views.
"""

from __future__ import annotations

#: The semantic-conventions release whose GenAI names these are (see ``docs/otel.md``).
SEMCONV_VERSION = "1.44.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
INSTRUMENTATION = "ora"

# --- GenAI (opentelemetry.semconv._incubating.attributes.gen_ai_attributes) ---------------------
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CONVERSATION = "gen_ai.conversation.id"
WORKFLOW = "gen_ai.workflow.name"
DATA_SOURCE = "gen_ai.data_source.id"
RETRIEVAL_QUERY = "gen_ai.retrieval.query.text"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "gen_ai.evaluation.name"
EVALUATION_LABEL = "gen_ai.evaluation.score.label"
EVALUATION_SCORE = "gen_ai.evaluation.score.value"
EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"
# --- general ------------------------------------------------------------------------------------
ERROR_TYPE = "error.type"

#: ``gen_ai.operation.name`` values.
OP_WORKFLOW = "invoke_workflow"
OP_CHAT = "chat"
OP_RETRIEVAL = "retrieval"

#: The workflow name of every turn (``invoke_workflow ora``).
WORKFLOW_NAME = "ora"

# --- Ora's own ----------------------------------------------------------------------------------
TURN_ID = "ora.turn.id"
TURN_STATUS = "ora.turn.status"
MODE = "ora.mode"
GEAR = "ora.gear"
CONFIG_HASH = "ora.config_hash"
CONTINGENCIES = "ora.contingencies"
STEP = "ora.step"
STEP_INDEX = "ora.step.index"
STEP_KIND = "ora.step.kind"
STEP_VERDICT = "ora.step.verdict"
STEP_DEGRADED = "ora.step.degraded"
STEP_ATTEMPTS = "ora.step.attempts"
STEP_REGENERATIONS = "ora.step.regenerations"
STEP_CONFIDENCE = "ora.step.confidence"
STEP_STREAM = "ora.step.stream"
STEP_UNFINISHED = "ora.step.unfinished"
ROLE = "ora.role"
PROMPT_KEY = "ora.prompt_key"
PLANNED_PROVIDER = "ora.planned_provider"
FALLBACK_FLAGS = "ora.fallback_flags"
MISMATCH = "ora.model_mismatch"
ATTEMPTS = "ora.attempts"
CACHED = "ora.cached"
ERROR_KIND = "ora.error.kind"
RETRIEVAL_STREAM = "ora.retrieval.stream"
RETRIEVAL_CHUNKS = "ora.retrieval.chunks"
RETRIEVAL_EMPTY = "ora.retrieval.empty_reason"
SUBJECT_STEP = "ora.evaluation.subject_step"
LINK_RELATION = "ora.link.relation"
CONTINGENCY_EVENT = "ora.contingency"
CONTINGENCY_NAME = "ora.contingency.name"
CONTINGENCY_SEVERITY = "ora.contingency.severity"
CONTINGENCY_DETAIL = "ora.contingency.detail"
REPLAYED = "ora.replayed"


def verdict_label(status: str) -> str:
    """``gen_ai.evaluation.score.label`` of a verdict: ``pass``, ``fail`` or ``broken``."""
    return str(status).lower()
