"""The ``model`` verifier: an LLM grades the analysis through the ``verifier`` / ``final_verifier``
role (``[verification] verifier = "model"``).

The engine runs the call for it (``ctx.ask_model``): the anti-confabulation directive, Phase A's
assumptions, the Supplemental RAG protocol (a verifier may ask for a missing fact too), the role
ledger, and every ``verifier_output`` detector on the reply — this plugin's own verdict parser
among them (``BrokenVerdictDetector``). The verifier hands the reply back as it is (a
``ModelReply``): the engine reads the verdict from those signals, so there is one parser.
A backend failure is BROKEN, recorded as ``<step>-verifier-backend-<kind>``, never PASS.

Where the verifier role's backend can hold a reply to a JSON schema, the request carries
``VERDICT_SCHEMA`` (status PASS|FAIL, findings): the reply is then one JSON object, which the same
parser validates and reads (``verdict.parse_verdict``, rule 0); one that does not validate is BROKEN.
A backend without the capability ignores the schema and answers in the text contract.
"""

from __future__ import annotations

from typing import Any

from ora_core.api import BackendError, ModelRequest, Verdict, VerdictStatus

from .verdict import VERDICT_CONTRACT, VERDICT_SCHEMA

VERIFIER_TASK = """\
ROLE: VERIFIER. You grade the analysis under review against the VERIFICATION CRITERIA and the
evidence package. You did not write it and have nothing to protect. Check every specific fact
(names, dates, figures, quotations) against the evidence; an unsupported specific is a FAIL.
Do not rewrite the analysis."""
#: For a reply held to ``VERDICT_SCHEMA`` (a backend that constrains it): the same verdict, as JSON.
STRUCTURED_NOTE = """\
If your reply is held to a JSON object, it is the same verdict: "status" is "PASS" or "FAIL" under the
rules above, and "findings" holds one entry per failed criterion (for a PASS, what you checked)."""


def _chunk_texts(package: Any) -> list[str]:
    return [c.text for c in getattr(package, "chunks", None) or [] if isinstance(getattr(c, "text", None), str)]


class ModelVerifier:
    name = "model"
    uses_model = True  # its step is probabilistic ("verification"), not deterministic

    async def verify(self, subject: str, package: Any, criteria: str, ctx: Any) -> Any:
        call = getattr(ctx, "verification", None)
        role = call.role if call is not None else "verifier"
        step = call.step if call is not None else "verify"
        request = ModelRequest(
            task=VERIFIER_TASK + "\n\n" + VERDICT_CONTRACT + "\n\n" + STRUCTURED_NOTE,
            package=f"## VERIFICATION CRITERIA\n{criteria}\n\n## ANALYSIS UNDER REVIEW\n{subject}",
            role=role, prompt_key=f"verify.{role}", purpose="verifier", layer="verifier_output",
            quoted=[subject, *_chunk_texts(package)], response_schema=VERDICT_SCHEMA, schema_name="verdict")
        try:
            return await ctx.ask_model(request)
        except BackendError as exc:
            ctx.contingency(f"{step}-verifier-backend-{exc.kind}", step, str(exc), severity="degraded",
                            error=exc.describe())
            return Verdict(status=VerdictStatus.BROKEN, verifier=self.name,
                           reasons=[f"the verifier's backend failed: {exc}"], data={"error": exc.describe()})
