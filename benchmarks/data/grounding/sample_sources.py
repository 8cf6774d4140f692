"""How the files of this folder were sampled from their upstream repositories (run once; kept as
the record of the sampling, not run by any test or benchmark).

    python benchmarks/data/grounding/sample_sources.py BEGIN_REPO WICE_REPO

``BEGIN_REPO`` is a checkout of github.com/google/BEGIN-dataset, ``WICE_REPO`` one of
github.com/ryokamoi/wice. Every line written has the format of ``../shared/data``
(``{"id", "evidence", "question", "answer", "label", "source"}``); the rows are a seeded sample
(``random.Random(25)``) of the upstream split, in upstream order.
"""

from __future__ import annotations

import ast
import csv
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BEGIN_LABELS = {"Fully attributable": "supported", "Not fully attributable": "hallucinated"}  # Generic: left out


def sample(rows: list[dict], n: int) -> list[dict]:
    keep = sorted(random.Random(25).sample(range(len(rows)), min(n, len(rows))))
    return [rows[i] for i in keep]


def begin(repo: Path, tsv: str, name: str, n: int) -> None:
    with (repo / tsv).open(encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
                if r["begin_label"] in BEGIN_LABELS]
    out = []
    for i, r in enumerate(rows):
        out.append({"id": f"{name}-{i:04d}", "evidence": r["knowledge"], "question": r["message"],
                    "answer": r["response"], "label": BEGIN_LABELS[r["begin_label"]],
                    "source": f"BEGIN {tsv} (google/BEGIN-dataset) model={r['model_name']}"})
    write(name, sample(out, n))


def wice(repo: Path, split: str, name: str, n: int) -> None:
    out = []
    lines = (repo / "data" / "entailment_retrieval" / "claim" / f"{split}.jsonl").read_text(encoding="utf-8")
    for line in lines.splitlines():
        r = json.loads(line)
        meta = r["meta"] if isinstance(r["meta"], dict) else ast.literal_eval(r["meta"])
        sentences = r["evidence"] if isinstance(r["evidence"], list) else ast.literal_eval(r["evidence"])
        out.append({"id": f"wice-{meta['id']}", "evidence": " ".join(sentences), "question": "",
                    "answer": r["claim"], "label": "supported" if r["label"] == "supported" else "hallucinated",
                    "source": f"WiCE claim {split} (ryokamoi/wice; annotations ODC-BY, text CC-BY-SA/Common Crawl) "
                              f"orig={r['label']}"})
    write(name, sample(out, n))


def write(name: str, rows: list[dict]) -> None:
    (HERE / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                        encoding="utf-8")
    print(name, len(rows), {lab: sum(r["label"] == lab for r in rows) for lab in ("supported", "hallucinated")})


if __name__ == "__main__":
    begin_repo, wice_repo = Path(sys.argv[1]), Path(sys.argv[2])
    begin(begin_repo, "wow/begin_test_wow.tsv", "begin_wow_test", 300)
    begin(begin_repo, "cmu-dog/begin_dev_cmu.tsv", "begin_cmu_dev", 300)
    begin(begin_repo, "topicalchat/begin_dev_tc.tsv", "begin_tc_dev", 300)
    wice(wice_repo, "test", "wice_claim_test", 150)
