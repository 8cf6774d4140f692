"""Phase A on the default model, with and without a constrained (JSON-schema) reply.

Each prompt of ``benchmarks/data/phase_a_prompts.jsonl`` (48 prompts written for this: eight
languages, typos, one-word and paragraph-long requests, paraphrase pairs, prompt-injection and
hostile text; ``split`` = ``dev`` for the 24 looked at while the structured prompt was written,
``heldout`` for the 24 that were not) runs through ``ora_core.engine.phase_a.run_phase_a`` twice on
the bundled default configuration (SmolLM2-135M-Instruct in process, its compact prompt profile),
with ``[pipeline] phase_a = "run"`` so that the step is not skipped:

- ``text``: the local backend's option ``structured_output = false``: Phase A asks for its three
  sections and reads them with the text parser (what every default run did before);
- ``constrained``: ``structured_output = true``: Phase A asks for one JSON object and the backend
  generates it under the llama.cpp grammar of ``phase_a.RESPONSE_SCHEMA``.

The two runs of a prompt are interleaved, their order alternating from prompt to prompt.

Per run: parsed or not (and the contingency named), wall time, generated tokens, and whether the
cleaned prompt keeps the request's meaning: the cosine similarity of its MiniLM embedding to the raw
prompt's (``ora-minilm``, offline). For scale the same encoder gives two references: the mean cosine
of the hand-written paraphrase pairs of the set (same request, other words) and of prompts paired with
an unrelated prompt of the set. MiniLM-L6 is an English model: the figures for other languages are
rougher. A reading by hand of 20 pairs is in ``benchmarks/data/phase_a_reading.md``.

Parse rates and similarities are not timing: they do not depend on the machine's load; the wall
times printed beside them do (a shared 2-core machine).

    HF_HUB_OFFLINE=1 python benchmarks/phase_a_structured.py [--limit N] [--split dev|heldout] [--out results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "benchmarks" / "data" / "phase_a_prompts.jsonl"
MODES = ("text", "constrained")


def load_prompts(split: str | None, limit: int | None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    if split:
        rows = [r for r in rows if r["split"] == split]
    return rows[:limit] if limit else rows


def setup(mode: str) -> tuple[Any, Any, Any]:
    import ora_local_llm

    from ora_core.engine.backends import BackendPool
    from ora_core.testing import make_config, make_host

    resolved = make_config({"pipeline": {"phase_a": "run"},
                            "backends": {"local": {"options": {"threads": 2,
                                                               "structured_output": mode == "constrained"}}}})
    host = make_host(ora_local_llm)
    return resolved, host, BackendPool(resolved.config, host)


async def one(resolved: Any, host: Any, pool: Any, prompt: str) -> dict[str, Any]:
    from ora_core.engine.phase_a import run_phase_a
    from ora_core.kernel.trace import TurnContext

    turn = TurnContext(prompt=prompt, config=resolved.config, config_hash=resolved.hash, host=host)
    start = time.perf_counter()
    result = await run_phase_a(turn, pool, prompt)
    wall = time.perf_counter() - start
    call = turn.calls[-1] if turn.calls else None
    return {"parsed": result.parsed, "cleaned_prompt": result.cleaned_prompt, "raw_output": result.raw_output,
            "corrections": result.corrections, "inferred_items": result.inferred_items,
            "contingencies": [c.name for c in turn.contingencies], "wall_s": round(wall, 3),
            "prompt_tokens": call.prompt_tokens if call else 0,
            "completion_tokens": call.completion_tokens if call else 0}


def cosine_fn() -> Any:
    import numpy as np
    from ora_minilm import get_encoder

    encoder = get_encoder()

    def cosines(pairs: list[tuple[str, str]]) -> list[float]:
        if not pairs:
            return []
        a = encoder.encode([p[0] for p in pairs])
        b = encoder.encode([p[1] for p in pairs])
        return [round(float(x), 3) for x in np.sum(np.asarray(a) * np.asarray(b), axis=1)]

    return cosines


def summary(rows: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    runs = [r[mode] for r in rows]
    parsed = [r for r in runs if r["parsed"]]
    sims = [r["similarity"] for r in parsed]
    out: dict[str, Any] = {
        "runs": len(runs), "parsed": len(parsed), "parse_rate": round(len(parsed) / len(runs), 3) if runs else 0.0,
        "median_wall_s": round(statistics.median(r["wall_s"] for r in runs), 2) if runs else 0.0,
        "mean_completion_tokens": round(statistics.mean(r["completion_tokens"] for r in runs), 1) if runs else 0.0,
        "contingencies": {}}
    for r in runs:
        for name in r["contingencies"]:
            out["contingencies"][name] = out["contingencies"].get(name, 0) + 1
    if sims:
        out.update(similarity_mean=round(statistics.mean(sims), 3), similarity_median=round(statistics.median(sims), 3),
                   similarity_min=min(sims), kept_ge_0_8=sum(1 for s in sims if s >= 0.8),
                   kept_ge_0_8_of_all=round(sum(1 for s in sims if s >= 0.8) / len(runs), 3))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--split", choices=("dev", "heldout"), default=None)
    parser.add_argument("--out", type=Path, default=None, help="write every run (JSON) here")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    prompts = load_prompts(args.split, args.limit)
    setups = {mode: setup(mode) for mode in MODES}
    rows: list[dict[str, Any]] = []

    async def run_all() -> None:
        for i, item in enumerate(prompts):
            order = MODES if i % 2 == 0 else MODES[::-1]
            row: dict[str, Any] = dict(item)
            for mode in order:
                row[mode] = await one(*setups[mode], item["prompt"])
            rows.append(row)
            t, c = row["text"], row["constrained"]
            print(f"{item['id']:7} {item['lang']} {item['kind']:10} text {'P' if t['parsed'] else '-'} "
                  f"{t['wall_s']:5.2f}s | constrained {'P' if c['parsed'] else '-'} {c['wall_s']:5.2f}s "
                  f"{c['cleaned_prompt'][:70]!r}", flush=True)

    asyncio.run(run_all())
    cosines = cosine_fn()
    for mode in MODES:
        sims = cosines([(r["prompt"], r[mode]["cleaned_prompt"]) for r in rows])
        for r, s in zip(rows, sims, strict=True):
            r[mode]["similarity"] = s if r[mode]["parsed"] else None
    by_id = {r["id"]: r["prompt"] for r in load_prompts(None, None)}
    paraphrases = [(by_id[a], by_id[b]) for a, b in (("dev-08", "dev-09"), ("ho-08", "ho-09"))]
    ids = sorted(by_id)
    unrelated = [(by_id[ids[i]], by_id[ids[(i + 17) % len(ids)]]) for i in range(len(ids))]
    references = {"paraphrase_pairs_mean": round(statistics.mean(cosines(paraphrases)), 3),
                  "unrelated_pairs_mean": round(statistics.mean(cosines(unrelated)), 3)}

    report: dict[str, Any] = {"prompts": len(rows), "references": references, "splits": {}}
    for split in sorted({r["split"] for r in rows}) + ["all"]:
        part = [r for r in rows if split in ("all", r["split"])]
        report["splits"][split] = {mode: summary(part, mode) for mode in MODES}
    print()
    print(f"MiniLM cosine references: hand-written paraphrase pairs {references['paraphrase_pairs_mean']}, "
          f"unrelated prompt pairs {references['unrelated_pairs_mean']}")
    for split, modes in report["splits"].items():
        for mode, s in modes.items():
            sim = "similarity n/a (nothing parsed)"
            if "similarity_mean" in s:
                sim = (f"similarity mean {s['similarity_mean']} median {s['similarity_median']} "
                       f"min {s['similarity_min']}, >=0.8: {s['kept_ge_0_8']}/{s['runs']}")
            print(f"{split:8} {mode:12} parsed {s['parsed']}/{s['runs']} ({s['parse_rate']:.0%}); {sim}; "
                  f"median wall {s['median_wall_s']} s; mean generated {s['mean_completion_tokens']} tokens; "
                  f"{s['contingencies']}")
    if args.out:
        args.out.write_text(json.dumps({"report": report, "rows": rows}, indent=2, ensure_ascii=False),
                            encoding="utf-8")
        print(f"runs written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
