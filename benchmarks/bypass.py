"""Stage 0 bypass matching: one compiled matcher vs a loop of one regex per trigger.

    .venv/bin/python benchmarks/bypass.py [--prompts 100000]

Both sides use the same vocabulary (ora-bypass), the same word-boundary rule and return every
match; the script checks that they agree on a sample before timing. Target: >= 20x.
"""

from __future__ import annotations

import argparse
import random
import re
import time

from ora_bypass.vocabulary import phrases

from ora_core.kits.phrases import PhraseMatcher, normalize_phrase

ANALYTICAL = [
    "Cui bono on the harness paradigm shift in commercial AI? Who benefits and who loses?",
    "Give me a monocultural analysis of the agricultural policy and its incentives for smallholders.",
    "Steelman the argument for open weights, then list the best objections and replies.",
    "Should we migrate the billing service to event sourcing before the Q3 launch, or wait?",
    "Explain why retrieval-augmented generation reduces confabulation, and where it does not.",
    "Compare the trade-offs of vector databases for a 10k-note personal knowledge vault.",
]
BYPASS = ["Hello, what time is it?", "No analysis needed, just summarise the memo.",
          "As I said earlier, the budget is fixed.", "Please fix my spelling: recieve, seperate.",
          "what's today's date", "Hi there!"]


def make_prompts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    filler = ["the", "of", "model", "pipeline", "trace", "verifier", "budget", "context", "stakeholder",
              "analysis", "bono"]
    out = []
    for i in range(n):
        base = rng.choice(BYPASS if i % 5 == 0 else ANALYTICAL)
        extra = " ".join(rng.choice(filler) for _ in range(rng.randint(0, 25)))
        out.append(f"{base} {extra}".strip())
    return out


def per_trigger_patterns(vocab: list[str]) -> list[tuple[str, re.Pattern[str]]]:
    pats = []
    for phrase in vocab:
        body = r"\s+".join(re.escape(w).replace("'", "['\u2019]") for w in phrase.split())
        pats.append((phrase, re.compile(r"(?<![\w-])" + body + r"(?![\w-])", re.I)))
    return pats


def loop_match(pats: list[tuple[str, re.Pattern[str]]], text: str) -> list[str]:
    found = []
    for phrase, pat in pats:
        if pat.search(text):
            found.append(phrase)
    return found


def compiled_match(matcher: PhraseMatcher, text: str) -> list[str]:
    return [normalize_phrase(m.group(0)) for m in matcher.regex.finditer(text)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=100_000)
    args = parser.parse_args()
    vocab = sorted(phrases())
    matcher = PhraseMatcher(vocab)
    pats = per_trigger_patterns(vocab)
    prompts = make_prompts(args.prompts)
    # Agreement: the loop finds every phrase present anywhere (overlaps included); the single
    # matcher finds non-overlapping leftmost-longest ones. Compare bypass decisions (any match).
    for text in prompts[:2000]:
        assert bool(loop_match(pats, text)) == bool(compiled_match(matcher, text)), text
    t0 = time.perf_counter()
    hits_loop = sum(1 for t in prompts if loop_match(pats, t))
    t1 = time.perf_counter()
    hits_one = sum(1 for t in prompts if compiled_match(matcher, t))
    t2 = time.perf_counter()
    assert hits_loop == hits_one
    loop_rate, one_rate = len(prompts) / (t1 - t0), len(prompts) / (t2 - t1)
    print(f"vocabulary: {len(vocab)} triggers; prompts: {len(prompts)}; prompts with a trigger: {hits_one}")
    print(f"per-trigger regex loop : {loop_rate:12,.0f} prompts/s  ({t1 - t0:.2f} s)")
    print(f"one compiled matcher   : {one_rate:12,.0f} prompts/s  ({t2 - t1:.2f} s)")
    ratio = one_rate / loop_rate
    print(f"speed-up: {ratio:.1f}x (target >= 20x) -> {'MET' if ratio >= 20 else 'NOT MET'}")


if __name__ == "__main__":
    main()
