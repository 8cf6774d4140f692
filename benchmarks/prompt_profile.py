"""What the compact prompt profile costs: full against compact on the default model, 20 prompts.

Each prompt runs twice through ``ora run --json --mode standard`` (gear 2: analyst, grounding
verification, a re-revision after a FAIL, verification again) on the bundled default configuration,
once with ``[backends.local] prompt_profile = "full"`` and once with ``"compact"`` (the default),
each on a fresh copy of the ingested sample vault (no conversation memory). The two runs of a prompt
are interleaved, their order alternating from prompt to prompt (A B, B A, ...), so a change in the
machine's load falls on both profiles alike.

Per run: wall time, status, the grounding verdicts (the first one judges the analyst's own answer;
the last one the answer that shipped), the shipped answer's length in words (its warning header
left out), prompt and generated tokens. Side by side per prompt, then per profile: the grounding
pass rate (first verdict; final verdict = status ok), median wall time, mean tokens and answer
length. The prompts: the README's, nine more the sample vault can answer (questions about Ora), and
ten everyday gear-2 prompts of tests/data/routing/dev.jsonl (the vault has nothing on them: the
honest answer names the gap).

Timing on a shared 2-core machine is noisy: each row prints the load average before the run, and
the token counts beside the wall time are the comparable figures.

    python benchmarks/prompt_profile.py [--prompts N] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from backends import RUN_PROMPT, ingest_vault, run_ora  # noqa: E402

VAULT_PROMPTS = (
    RUN_PROMPT,
    "What does the grounding verifier check in an answer?",
    "How does Ora's forensic trace record a package boundary?",
    "What happens when a retriever fails during context assembly?",
    "Explain what the anti-confabulation directive tells a model.",
    "How does the adversarial cascade in gear 4 work?",
    "What are the budget signals, and when is critical truncation raised?",
    "Why does Ora cap supplemental requests at two per step?",
    "What does Phase A do with a user's prompt?",
    "How does confidence routing decide whether a step proceeds?",
)
#: Everyday gear-2 prompts, from tests/data/routing/dev.jsonl (labelled ``standard``).
EVERYDAY_PROMPTS = (
    "Why did the Roman Empire fall?",
    "Is coffee bad for your health?",
    "How does a transformer neural network work?",
    "Summarize the main risks of nuclear energy.",
    "What is photosynthesis?",
    "How do tides work?",
    "How does sleep affect memory?",
    "What does a kidney do?",
    "Why is Pluto no longer a planet?",
    "How did the printing press change Europe?",
)
PROMPTS = VAULT_PROMPTS + EVERYDAY_PROMPTS
PROFILES = ("full", "compact")


def verdicts(trace: str | None) -> list[str]:
    """The grounding verdicts of a gear-2 turn, in order (``*-verify.json`` step files)."""
    if not trace:
        return []
    out = []
    for path in sorted(Path(trace).glob("*-verify.json")):
        verdict = (json.loads(path.read_text()).get("output") or {}).get("verdict") or {}
        out.append(str(verdict.get("status", "?")))
    return out


def answer_words(answer: str) -> int:
    """Words of the shipped answer, its warning/degraded header lines left out."""
    body = [line for line in answer.splitlines() if not line.startswith(("[warning", "[degraded"))]
    return len(" ".join(body).split())


def run_profile(prompt: str, profile: str, tmp: str, template: str, label: str) -> dict[str, Any]:
    run = run_ora(prompt, tmp, template, label, {"ORA__BACKENDS__LOCAL__PROMPT_PROFILE": profile},
                  ("--mode", "standard"))
    found = verdicts(run["trace"])
    return {"profile": profile, "prompt": prompt, "wall_s": run["wall_s"], "cpu_s": run["cpu_s"],
            "status": run["status"],
            "exit_code": run["exit_code"], "gear": run["gear"], "load": run["loadavg_1m_before"],
            "verdicts": found, "first_pass": bool(found) and found[0] == "PASS",
            "final_pass": bool(found) and found[-1] == "PASS", "answer_words": answer_words(run["answer"]),
            "prompt_tokens": run["prompt_tokens"], "generated_tokens": run["generated_tokens"],
            "calls": run["calls"], "peak_rss_mb": run["peak_rss_mb"], "stderr_tail": run["stderr_tail"]}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    return {"runs": n, "ok": sum(r["status"] == "ok" for r in rows),
            "first_pass_rate": round(sum(r["first_pass"] for r in rows) / n, 3),
            "final_pass_rate": round(sum(r["final_pass"] for r in rows) / n, 3),
            "median_wall_s": round(statistics.median(r["wall_s"] for r in rows), 2),
            "mean_wall_s": round(statistics.fmean(r["wall_s"] for r in rows), 2),
            "median_cpu_s": round(statistics.median(r["cpu_s"] for r in rows), 2),
            "mean_prompt_tokens": round(statistics.fmean(r["prompt_tokens"] for r in rows)),
            "mean_generated_tokens": round(statistics.fmean(r["generated_tokens"] for r in rows)),
            "mean_calls": round(statistics.fmean(len(r["calls"]) for r in rows), 2),
            "mean_answer_words": round(statistics.fmean(r["answer_words"] for r in rows), 1),
            "median_answer_words": statistics.median(r["answer_words"] for r in rows),
            "errors": sum(r["exit_code"] not in (0,) for r in rows)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=len(PROMPTS), help="the first N prompts only")
    parser.add_argument("--out", type=Path, help="write every row and the summary as JSON here")
    args = parser.parse_args()
    prompts = PROMPTS[:args.prompts]
    load = os.getloadavg()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        template = ingest_vault(tmp)
        for i, prompt in enumerate(prompts):
            order = PROFILES if i % 2 == 0 else PROFILES[::-1]
            pair = {}
            for profile in order:
                pair[profile] = run_profile(prompt, profile, tmp, template, f"{i}-{profile}")
                rows.append(pair[profile])
            print(f"[{i + 1:2}] {prompt[:60]!r}", flush=True)
            for profile in PROFILES:
                r = pair[profile]
                print(f"     {profile:<8}{r['wall_s']:6.1f} s ({r['cpu_s']:5.1f} s CPU) {r['status']!s:<9} "
                      f"{'/'.join(r['verdicts']):<10} "
                      f"{r['prompt_tokens']:5} + {r['generated_tokens']:4} tok {r['answer_words']:4} words "
                      f"load {r['load']}", flush=True)
    result = {"machine": {"cpus": os.cpu_count(), "loadavg_1_5_15_start": [round(x, 2) for x in load],
                          "loadavg_1_5_15_end": [round(x, 2) for x in os.getloadavg()]},
              "summary": {p: summary([r for r in rows if r["profile"] == p]) for p in PROFILES}, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    print()
    keys = ("runs", "ok", "first_pass_rate", "final_pass_rate", "median_wall_s", "mean_wall_s", "median_cpu_s",
            "mean_prompt_tokens",
            "mean_generated_tokens", "mean_calls", "mean_answer_words", "median_answer_words", "errors")
    print(f"{'':24}{'full':>12}{'compact':>12}")
    for key in keys:
        print(f"{key:24}{result['summary']['full'][key]!s:>12}{result['summary']['compact'][key]!s:>12}")
    machine = result["machine"]
    print(f"load average: start {machine['loadavg_1_5_15_start']}, end {machine['loadavg_1_5_15_end']} "
          f"on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
