"""Pre-routing: Stage 1 signals on the cleaned prompt, Stage 2 dispatch on one score per mode.

Stage 1 reads two signals:

- **vocabulary**: the ``mode_signal`` detectors of layer ``cleaned_prompt`` (their phrases are
  the modes' ``signals`` front matter), plus the defensive bypass re-scan (kind ``bypass``);
- **semantic**: the configured embedder (``ctx.embedder()``, ``[embedding] embedder``) compares
  the prompt with every mode's ``examples`` and ``description``. A mode's semantic score is the
  mean of its ``top_k`` best cosine similarities, so one lucky example does not carry a mode
  and a mode is judged by its nearest region of meaning, not its average. The examples'
  vectors are computed once per process per mode set (keyed by a hash of the embedder's name
  and every example text), so a warm turn embeds only its own prompt.

One score per mode: ``semantic + vocab_weight * vocabulary``, where ``vocabulary`` is 1 for a
strong phrase (or three weak ones) and a third per weak phrase, capped at 1. The vocabulary
stays because its phrases are precise where they exist ("cui bono", "should I"); the semantic
signal carries the requests that avoid them ("Which companies come out ahead when ...").

Stage 1 also reads the prompt's **request shapes** (issue 25): the ``request_shape`` detectors of
layer ``cleaned_prompt`` (``ora-signals``) name what the prompt asks for by its form, whatever its
topic: ``choice`` (a pick between options the user names), ``case-for`` (the best case for a
position), ``definition`` (what a term means), ``creative`` (a joke, slogan, riddle ...),
``context-reference`` (leans on something shared earlier that the prompt does not carry) and
``assertion`` (a checkable statement: given only when no other shape is). Modes opt in by front
matter: a shape in ``shapes.claims`` counts as one strong phrase of the mode (decision-analysis
claims ``choice``, steelman ``case-for``, standard ``definition``, direct ``creative``); a mode
whose ``shapes.requires`` names a shape the prompt lacks *stands aside*: it is scored and shown
but cannot lead, compete or claim (fact-check requires an ``assertion``: vocabulary about
checking, "what does the verdict band mean?", is not a claim to check). No shape detector
installed: nothing is claimed or required (``routing-no-request-shape-detector``, a warning when
a loaded mode declares shapes).

Stage 2 dispatches on the scores (``RoutingParams``: four numbers, each explained there):

- a forced mode (``--mode``) wins (``forced``); a strong bypass element Phase A revealed, with
  no strong mode signal, goes to ``simple`` (``bypass``);
- a ``context-reference`` shape: the request leans on context it does not carry ("do the usual
  for the report"), so a clarification is pending that names the words and asks what they refer
  to (``context-reference``); with best-guess on, ``pipeline.fallback_mode`` (deep-clarification:
  it answers the clear part and names the assumption) runs;
- nothing recognised (no phrase, and no mode's similarity reaches ``recognised_floor``): the
  text is not a request a mode can take, so a clarification is pending;
- the modes within ``clear_margin`` of the leader are *close*. Two or more close *specific
  analytical* modes (gear >= 2, not the general mode) genuinely compete: a clarification is
  pending, naming them;
- a specific mode that leads clearly runs (``high``); one the general mode is close to has not
  claimed the request, so the general mode (``pipeline.default_mode``, ``standard``) runs it
  (``default``), as it does any request the general mode leads. A clear question no specific
  mode claims is therefore answered, not asked back (seed 000 #2 forbids *swallowing* a
  question, not answering a clear request);
- a direct mode (gear 1: ``simple``, ``direct``) that leads runs (``high``, or ``medium`` when
  another mode is close);
- a mode that declares no examples has no semantic score; it claims a request by its strong
  phrases (more than any other mode), so a mode pack without examples still routes by vocabulary.

A pending clarification is never swallowed: the turn stops with ``needs_clarification`` and a
question that always offers at least two real options and "just answer"; with best-guess on it
continues on the leading candidate (``best-guess``) or on ``pipeline.fallback_mode`` when
nothing was recognised (``fallback``), keeping the question as ``pending_clarification_swallowed``.

The semantic signal degrades by name, never by crashing: no embedder registered, an embedder
that raises or returns unusable vectors, or no mode with examples, and routing runs on the
vocabulary alone (``routing-semantic-unavailable-vocabulary-only``). Without the semantic
signal a question cannot be told from a non-request, so an unmatched prompt goes to the general
mode rather than being asked back.

Every decision keeps its audit (``RoutingDecision.audit``): the per-mode scores (vocabulary,
semantic, combined, nearest examples), the leader's margin, the rule that decided, the
weights and the timings; and a ``signal_strength_summary`` (#13) flagging a high-confidence
dispatch that rests on exactly one strong phrase.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ora_core.engine import index_cache
from ora_core.kernel.components import ComponentContext
from ora_core.kernel.ctx_data import MODES
from ora_core.kernel.errors import PluginError
from ora_core.kernel.models import (
    ModeCandidate,
    NearestExample,
    RoutingAudit,
    RoutingDecision,
    Signal,
    SignalStrengthSummary,
)
from ora_core.kernel.modes import ModeLibrary
from ora_core.kernel.stash import StashKey
from ora_core.kernel.trace import TurnContext

STEP = "pre-routing"
STRONG_WEIGHT = 3.0
WEAK_WEIGHT = 1.0
NEAREST_SHOWN = 3  # nearest examples kept per mode in the audit
QUESTION_OPTIONS = 3  # most modes a clarification offers
ROUTING_WARMUP = "routing-examples"  # the warm-up job that embeds the modes' examples
#: The category of the Stage 1 re-scan's strong bypass signal (``time_date`` ...), when pre-routing
#: routed the turn to Gear 1 on it (the direct gear reads it).
BYPASS_CATEGORY: StashKey[str | None] = StashKey("bypass_category")
_WORDS = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)?")

#: Function words that tell English, German and French apart (a prompt is guessed to be in the
#: language with the most of them; none: English). MiniLM is English-centric: across languages
#: its similarity measures the language more than the request ("What is the capital of France?"
#: lies nearest "Bonjour, ça va ?"), so a prompt is compared with the examples of its own language.
def _wordset(*lines: str) -> frozenset[str]:
    return frozenset(" ".join(lines).split())


LANGUAGE_MARKERS: dict[str, frozenset[str]] = {
    "en": _wordset("the a an is are was were what how why who which whose when where do does did i you my your",
                   "me we our it this that of to in for and or should would could can will with about hello hi",
                   "thanks thank please"),
    "de": _wordset("der die das ein eine einen einem einer ist sind was wie warum wieso wer wem wen welche",
                   "welcher welches ich du mein meine wir unser es nicht und oder für mit über soll sollte kann von",
                   "zu im den dem des auf noch schon auch bitte ins zum zur vom beim bin hast hat haben wird mir",
                   "dir dich sich uns euch ihr sie er kein keine sehr heute gut ja nein wenn dass aber hallo",
                   "guten danke schön morgen tag abend wessen bei aus nach davon etwas"),
    "fr": _wordset("le la les un une des est sont que qu quoi comment pourquoi qui quel quelle quels quelles je",
                   "tu mon ma mes nous notre ce cette et ou pour avec sur dans du de au aux il elle on pas faut",
                   "dois l d j c n en y mais très bien oui non vous moi toi te suis es sommes êtes son sa ses",
                   "leur nos vos votre ton ta tes à où bonjour bonsoir salut merci beaucoup ça va plaît"),
}

#: Openings that make a text a request by its form: interrogatives, auxiliaries and the
#: imperatives people start requests with, in the languages the bundled modes speak.
REQUEST_OPENERS = _wordset(
    "what what's whats how how's why who who's whom whose which when where is are was were do does did can "
    "could would will should shall may might must have has tell give show explain describe list name write "
    "help make let please summarise summarize compare translate draft compose create rewrite find define "
    "outline argue convince defend steelman imagine suggest recommend rephrase paraphrase reword shorten convert "
    "turn change polish edit correct proofread fix brainstorm generate plan calculate check analyse analyze "
    "break walk teach present build lay play provide "
    "was wie warum wieso weshalb wer wem wen wessen welche welcher welches wann wo woher wohin ist sind kann "
    "können soll sollte sollen gibt erkläre erklär erklären schreib schreibe sag sage zeig zeige hilf nenne "
    "übersetze beschreibe vergleiche fasse formuliere korrigiere mach "
    "que qu'est-ce quoi comment pourquoi qui quel quelle quels quelles quand où est-ce peux pouvez puis dois "
    "faut vaut explique expliquez écris écrivez donne donnez dis dites aide aidez traduis traduisez décris "
    "compare résume reformule reformulez corrige corrigez rends fais faites")


class RoutingParams(BaseModel):
    """Stage 2's numbers. Similarities are MiniLM cosines: related prompts score ~0.4-0.7,
    unrelated ones ~0.0-0.2. Chosen on the development part of ``tests/data/routing``
    (``benchmarks/routing.py`` prints the cross-validated figures)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: What a strong phrase (or three weak ones) adds to a mode's similarity: enough to decide
    #: between modes the meaning alone finds close, not enough to override a clearly different
    #: meaning ("What should I know about ibuprofen?" says "should I" and is not a decision).
    vocab_weight: float = Field(default=0.2, ge=0.0)
    #: A mode's semantic score is the mean of its this-many best similarities.
    top_k: int = Field(default=2, ge=1)
    #: Modes within this of the leader's score are close: two close specific modes compete.
    clear_margin: float = Field(default=0.02, ge=0.0)
    #: Below this best similarity, and with no phrase, no mode recognises the text as a request.
    recognised_floor: float = Field(default=0.3, ge=-1.0, le=1.0)


PARAMS = RoutingParams()


# --- the semantic signal ----------------------------------------------------------------------


class SemanticError(ValueError):
    """The embedder returned something routing cannot use (wrong count, dimension, zero vector)."""


@dataclass
class ExampleIndex:
    """The unit vectors of every mode's examples and description, for one embedder."""

    key: str
    embedder: str
    owners: list[str]  # the mode of each row
    sources: list[str]  # "example" | "description"
    texts: list[str]
    languages: list[str]  # guess_language of each text
    rows: list[list[float]]
    build_ms: float
    #: Where the rows came from: computed (and written to the disk cache, or why not) or read from the
    #: disk cache (``ora_core.engine.index_cache``); the routing audit shows it.
    origin: str = ""


@dataclass
class SemanticReading:
    """What the semantic signal found for one prompt, or why it did not run."""

    status: str  # ok | missing | failed | no-examples
    detail: str = ""
    embedder: str | None = None
    scores: dict[str, float] = field(default_factory=dict)
    nearest: dict[str, list[NearestExample]] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    language: str = "en"
    index_origin: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


_INDEXES: dict[str, ExampleIndex] = {}
_INDEX_LOCK = threading.Lock()


def index_entries(library: ModeLibrary) -> list[tuple[str, str, str]]:
    """``(mode, source, text)`` for the examples of every loaded mode that declares examples, and
    its description. A mode without examples is not scored by its description alone (a text
    written for people, not a prompt): it routes by its vocabulary."""
    entries: list[tuple[str, str, str]] = []
    for mode in library:
        if not mode.examples:
            continue
        if mode.description.strip():
            entries.append((mode.name, "description", " ".join(mode.description.split())))
        entries += [(mode.name, "example", text) for text in mode.examples]
    return entries


def index_key(embedder: Any, entries: Sequence[tuple[str, str, str]]) -> str:
    digest = hashlib.sha256()
    digest.update(f"{getattr(embedder, 'name', type(embedder).__name__)}\0{getattr(embedder, 'dimension', '')}"
                  .encode())
    digest.update(json.dumps(list(entries), ensure_ascii=False).encode())
    return digest.hexdigest()


def unit_vectors(embedder: Any, texts: Sequence[str]) -> list[list[float]]:
    """``embedder.embed(texts)`` as plain unit vectors, checked: one row per text, each of the
    embedder's ``dimension``, none zero. (No numpy in the kernel: rows are Python lists.)"""
    raw = embedder.embed(list(texts))
    rows = raw.tolist() if hasattr(raw, "tolist") else [list(r) for r in raw]
    if len(rows) != len(texts):
        raise SemanticError(f"embedder {embedder.name!r} returned {len(rows)} vector(s) for {len(texts)} text(s)")
    dimension = getattr(embedder, "dimension", None)
    out = []
    for i, row in enumerate(rows):
        if dimension is not None and len(row) != dimension:
            raise SemanticError(f"embedder {embedder.name!r} returned a {len(row)}-dimensional vector for text {i}; "
                                f"it declares dimension {dimension}")
        norm = math.sqrt(sum(x * x for x in row))
        if not norm or not math.isfinite(norm):
            raise SemanticError(f"embedder {embedder.name!r} returned a zero or non-finite vector for text {i}")
        out.append([float(x) / norm for x in row])
    return out


def example_index(embedder: Any, library: ModeLibrary) -> tuple[ExampleIndex, bool]:
    """The example index for this embedder and mode set, and whether this call built it. Built
    once per process per (embedder, examples) key; concurrent callers wait for the one build."""
    entries = index_entries(library)
    key = index_key(embedder, entries)
    with _INDEX_LOCK:
        cached = _INDEXES.get(key)
        if cached is not None:
            return cached, False
        start = time.perf_counter()
        rows, origin = _cached_rows(key, embedder, len(entries))
        if rows is None:
            rows = unit_vectors(embedder, [text for _, _, text in entries]) if entries else []
            origin = _store_rows(key, embedder, rows, origin)
        index = ExampleIndex(key=key, embedder=embedder.name, owners=[m for m, _, _ in entries],
                             sources=[s for _, s, _ in entries], texts=[t for _, _, t in entries],
                             languages=[guess_language(t) for _, _, t in entries], rows=rows,
                             build_ms=(time.perf_counter() - start) * 1000, origin=origin)
        _INDEXES[key] = index
        return index, True


def _cached_rows(key: str, embedder: Any, count: int) -> tuple[list[list[float]] | None, str]:
    """The example vectors from the disk cache, or None and what the index's origin will say."""
    disk, why_not = index_cache.disk_key(key, embedder)
    if disk is None:
        return None, f"computed; not cached on disk: {why_not}"
    rows, problem = index_cache.load(disk, count, getattr(embedder, "dimension", None))
    if rows is not None:
        return rows, f"read from the disk cache ({index_cache.cache_dir() / disk}.f64)"
    return None, f"computed; the disk cache was unusable ({problem})" if problem else "computed"


def _store_rows(key: str, embedder: Any, rows: list[list[float]], origin: str) -> str:
    disk, _ = index_cache.disk_key(key, embedder)
    if disk is None:
        return origin
    problem = index_cache.store(disk, rows)
    return f"{origin}; not written to the disk cache: {problem}" if problem else f"{origin}; written to the disk cache"


def guess_language(text: str) -> str:
    """``en``, ``de`` or ``fr``: the language with the most ``LANGUAGE_MARKERS`` words in ``text``
    (English when none or a tie with English)."""
    words = [w.lower().replace("\u2019", "'") for w in _WORDS.findall(text)]
    counts = {lang: sum(w in markers or w.split("'")[0] in markers for w in words)  # l'argument, qu'est
              for lang, markers in LANGUAGE_MARKERS.items()}
    best = max(counts, key=lambda lang: (counts[lang], lang == "en"))
    return best if counts[best] else "en"


def request_form(text: str) -> str | None:
    """Why ``text`` reads as a request by its form, or None: an opening interrogative, auxiliary or
    imperative ("Tell me ...", "Quick question, what ..."), or a question mark in a text with at
    least one function word of a language the markers know. "Interest rates.", "bananas" and
    "zzqx vlorp?" are not requests."""
    words = [w.lower().replace("\u2019", "'") for w in _WORDS.findall(text)]
    for word in words[:2]:  # "Quick question, what ..." / "Please write ..."
        if word in REQUEST_OPENERS or word.split("'")[0] in REQUEST_OPENERS:
            return f"opens with {word!r}"
    if "?" in text or "\uff1f" in text:
        known = [w for w in words if any(w in m or w.split("'")[0] in m for m in LANGUAGE_MARKERS.values())]
        if known:
            return "question mark"
    return None


def semantic_scores(index: ExampleIndex, vector: Sequence[float], top_k: int, language: str = "en"
                    ) -> tuple[dict[str, float], dict[str, list[NearestExample]]]:
    """Per mode: the mean of its ``top_k`` best similarities among its texts in ``language`` (its
    English ones when it has none in that language), and its nearest texts."""
    by_mode: dict[str, list[tuple[float, int]]] = {}
    own = {index.owners[i] for i, lang in enumerate(index.languages) if lang == language}
    for i, row in enumerate(index.rows):
        mode = index.owners[i]
        if index.languages[i] != (language if mode in own else "en"):
            continue
        by_mode.setdefault(mode, []).append((sum(map(operator.mul, row, vector)), i))
    scores: dict[str, float] = {}
    nearest: dict[str, list[NearestExample]] = {}
    for mode, sims in by_mode.items():
        sims.sort(reverse=True)
        best = sims[:top_k]
        scores[mode] = sum(s for s, _ in best) / len(best)
        nearest[mode] = [NearestExample(text=index.texts[i], similarity=round(s, 4),
                                        source=index.sources[i])
                         for s, i in sims[:NEAREST_SHOWN]]
    return scores, nearest


def read_semantic(ctx: ComponentContext, library: ModeLibrary, text: str,
                  params: RoutingParams = PARAMS) -> SemanticReading:
    """The semantic signal for ``text``; a missing or failing embedder is a reading that says
    so (``missing`` / ``failed``), never an exception."""
    start = time.perf_counter()
    try:
        embedder = ctx.embedder()
    except PluginError as exc:
        return SemanticReading(status="missing", detail=str(exc))
    except Exception as exc:  # noqa: BLE001 - named in the reading; routing goes on by vocabulary
        return SemanticReading(status="failed", detail=f"looking up the embedder: {type(exc).__name__}: {exc}")
    name = getattr(embedder, "name", type(embedder).__name__)
    if not index_entries(library):
        return SemanticReading(status="no-examples", embedder=name, detail="no loaded mode declares examples")
    try:
        index_start = time.perf_counter()
        index, built = example_index(embedder, library)
        index_ms = (time.perf_counter() - index_start) * 1000
        embed_start = time.perf_counter()
        [vector] = unit_vectors(embedder, [text])
        embed_ms = (time.perf_counter() - embed_start) * 1000
    except Exception as exc:  # noqa: BLE001 - named in the reading; routing goes on by vocabulary
        return SemanticReading(status="failed", embedder=name, detail=f"{type(exc).__name__}: {exc}"[:500])
    language = guess_language(text)
    scores, nearest = semantic_scores(index, vector, params.top_k, language)
    timings = {"embed_prompt_ms": round(embed_ms, 2),
               "semantic_total_ms": round((time.perf_counter() - start) * 1000, 2)}
    if built:
        timings["index_build_ms"] = round(index.build_ms, 2)
    elif index_ms >= 1.0:  # a cold turn: the warm-up thread was still embedding the examples
        timings["index_wait_ms"] = round(index_ms, 2)
    origin = index.origin if built else f"in this process ({index.origin})"
    return SemanticReading(status="ok", embedder=name, scores=scores, nearest=nearest, timings_ms=timings,
                           language=language, index_origin=origin)


def warm_examples(ctx: ComponentContext, library: ModeLibrary,
                  results: dict[str, Any] | None = None) -> threading.Thread | None:
    """Build the example index in a daemon thread (the runner starts it before Phase A, so the
    examples are embedded while the Phase A model call runs); its outcome goes to
    ``results[ROUTING_WARMUP]`` (``status``, ``seconds``, ``error``). None when there is no embedder
    to warm: the routing step looks it up again and names what it finds."""
    try:
        embedder = ctx.embedder()
    except Exception:  # noqa: BLE001 - the routing step looks it up again and names what it finds
        return None
    if not index_entries(library):
        return None
    out = results if results is not None else {}

    def build() -> None:
        start = time.perf_counter()
        try:
            example_index(embedder, library)
        except Exception as exc:  # noqa: BLE001 - recorded; the routing step meets it again and names it
            out[ROUTING_WARMUP] = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"[:500],
                                   "seconds": round(time.perf_counter() - start, 3)}
        else:
            out[ROUTING_WARMUP] = {"status": "ok", "seconds": round(time.perf_counter() - start, 3)}

    thread = threading.Thread(target=build, name="ora-warmup-routing-examples", daemon=True)
    thread.start()
    return thread


# --- Stage 2 -----------------------------------------------------------------------------------


def candidates_from(signals: list[Signal], known: Any) -> tuple[list[ModeCandidate], list[Signal]]:
    """Group mode signals by mode (each phrase counted once); signals naming unknown modes apart.
    The candidates are scored by the vocabulary alone (``STRONG_WEIGHT`` / ``WEAK_WEIGHT``)."""
    by_mode: dict[str, ModeCandidate] = {}
    unknown: list[Signal] = []
    for s in signals:
        if not s.mode or s.mode not in known:
            unknown.append(s)
            continue
        cand = by_mode.setdefault(s.mode, ModeCandidate(mode=s.mode))
        bucket = cand.strong if s.strength == "strong" else cand.weak
        if s.name not in bucket:
            bucket.append(s.name)
    for cand in by_mode.values():
        cand.score = STRONG_WEIGHT * len(cand.strong) + WEAK_WEIGHT * len(cand.weak)
    ranked = sorted(by_mode.values(), key=lambda c: (-len(c.strong), -c.score, c.mode))
    return ranked, unknown


def shapes_of(signals: list[Signal] | None) -> dict[str, str] | None:
    """The prompt's request shapes (``request_shape`` signals: shape -> matched words); None when no
    detector of that kind ran."""
    if signals is None:
        return None
    out: dict[str, str] = {}
    for s in signals:
        out.setdefault(s.name, s.matched)
    return out


def score_modes(signals: list[Signal], library: ModeLibrary, semantic: SemanticReading | None,
                params: RoutingParams = PARAMS, shapes: dict[str, str] | None = None) -> list[ModeCandidate]:
    """Every loaded mode with its vocabulary, semantic and combined score, best first; a mode that
    stands aside (a required shape the prompt lacks) after every other. A shape the mode claims
    counts as a strong phrase."""
    vocab = {c.mode: c for c in candidates_from(signals, library)[0]}
    reading = semantic if semantic is not None and semantic.ok else None  # the semantic signal, when it ran
    found_shapes = shapes or {}
    out = []
    for mode in library:
        found = vocab.get(mode.name)
        strong, weak = (found.strong, found.weak) if found else ([], [])
        claimed = [s for s in mode.shapes.claims if s in found_shapes]
        unmet = [s for s in mode.shapes.requires if s not in found_shapes] if shapes is not None else []
        share = min(STRONG_WEIGHT * (len(strong) + len(claimed)) + WEAK_WEIGHT * len(weak),
                    STRONG_WEIGHT) / STRONG_WEIGHT
        sem = reading.scores.get(mode.name) if reading is not None else None
        score = (sem or 0.0) + params.vocab_weight * share
        out.append(ModeCandidate(
            mode=mode.name, gear=mode.gear, score=round(score, 4), vocabulary=round(share, 4),
            semantic=round(sem, 4) if sem is not None else None, strong=list(strong), weak=list(weak),
            nearest=reading.nearest.get(mode.name, []) if reading is not None else [], shapes=claimed, unmet=unmet))
    return sorted(out, key=lambda c: (bool(c.unmet), -c.score, -len(c.strong) - len(c.shapes), c.mode))


def summarize(signals: list[Signal], mode: str | None, confidence: str) -> SignalStrengthSummary:
    strong_for = sorted({s.name for s in signals if s.mode == mode and s.strength == "strong"})
    weak_for = sorted({s.name for s in signals if s.mode == mode and s.strength == "weak"})
    return SignalStrengthSummary(
        total_matches=len(signals),
        strong_matches=sum(1 for s in signals if s.strength == "strong"),
        weak_matches=sum(1 for s in signals if s.strength == "weak"),
        dispatched_mode=mode,
        strong_signals_for_dispatched=strong_for,
        weak_signals_for_dispatched=weak_for,
        single_signal_high_confidence=confidence == "high" and len(strong_for) == 1,
    )


def _option(library: ModeLibrary, name: str) -> str:
    mode = library.modes.get(name)
    title = mode.title if mode is not None and mode.title else name
    return f"{title} ({name})"


#: The mode "just answer" runs: a direct, grounded reply without analysis.
JUST_ANSWER_MODE = "simple"


def question_options(options: list[str], library: ModeLibrary) -> list[str]:
    """The modes a pending clarification offers: at least two real ones whenever the library has
    two modes (never "a choice" of one), at most ``QUESTION_OPTIONS``."""
    names = list(dict.fromkeys(options))
    for mode in library:  # pad to two real options
        if len(names) >= 2:
            break
        if mode.name not in names:
            names.append(mode.name)
    return names[:QUESTION_OPTIONS]


def clarification_question(options: list[str], library: ModeLibrary, *, not_a_request: bool) -> str:
    """The question of a pending clarification: the options (``question_options``) and "just answer"."""
    listed = "; ".join(_option(library, n) for n in question_options(options, library))
    if not_a_request:
        return (f"I could not tell what you would like me to do with this. Which fits best: {listed}? "
                "Or say 'just answer' for a direct reply.")
    return (f"Your request fits more than one kind of analysis. Which do you want: {listed}? "
            "Or say 'just answer' for a direct reply without analysis.")


def context_question(words: str, options: list[str], library: ModeLibrary) -> str:
    """The question of a request that leans on context the prompt does not carry: the words, the options
    and "just answer"."""
    listed = "; ".join(_option(library, n) for n in question_options(options, library))
    return (f"Your request refers to something I was not given ({words!r}). What does it refer to? Paste it or "
            f"describe it, or pick how to go on: {listed}. Or say 'just answer' and I will state what I assume.")


def dispatch(signals: list[Signal], rescan: list[Signal], library: ModeLibrary, *, forced_mode: str | None,
             best_guess: bool, fallback_mode: str, general_mode: str = "standard",
             semantic: SemanticReading | None = None, params: RoutingParams = PARAMS,
             prompt: str = "", shapes: list[Signal] | None = None) -> RoutingDecision:
    """Stage 2: one decision from the signals, the request shapes (``shapes``: the ``request_shape``
    signals; None when no detector of that kind ran), the semantic reading and the prompt's form
    (rules in the module doc)."""
    found_shapes = shapes_of(shapes)
    candidates = score_modes(signals, library, semantic, params, found_shapes)
    form = request_form(prompt)
    use_semantic = semantic is not None and semantic.ok
    audit = RoutingAudit(
        method="combined" if use_semantic else "vocabulary-only", rule="",
        semantic_status=semantic.status if semantic is not None else "not-run",
        semantic_detail=semantic.detail if semantic is not None else "",
        embedder=semantic.embedder if semantic is not None else None, general_mode=general_mode,
        modes_without_examples=sorted(m.name for m in library if not m.examples),
        weights={"vocab_weight": params.vocab_weight, "top_k": float(params.top_k),
                 "clear_margin": params.clear_margin, "recognised_floor": params.recognised_floor},
        timings_ms=dict(semantic.timings_ms) if semantic is not None else {}, request_form=form,
        example_index=semantic.index_origin if semantic is not None else "",
        language=semantic.language if semantic is not None and use_semantic else None, shapes=found_shapes)
    eligible = [c for c in candidates if not c.unmet] or candidates  # a mode standing aside cannot lead
    if eligible:
        audit.leader = eligible[0].mode
        if len(eligible) > 1:
            audit.runner_up = eligible[1].mode
            audit.margin = round(eligible[0].score - eligible[1].score, 4)

    def decided(mode: str | None, confidence: str, rule: str, reasoning: str, **extra: Any) -> RoutingDecision:
        audit.rule = rule
        loaded = library.modes.get(mode) if mode else None
        return RoutingDecision(mode=mode, requested_gear=loaded.gear if loaded is not None else None,
                               classification_confidence=confidence,
                               candidates=candidates, signal_strength_summary=summarize(signals, mode, confidence),
                               reasoning=reasoning, audit=audit, **extra)

    if forced_mode:
        audit.method = "forced"
        return decided(forced_mode, "forced", "forced", f"mode {forced_mode!r} forced by the caller")
    strong_rescan = [s for s in rescan if s.strength == "strong"]
    if strong_rescan and not any(c.strong for c in candidates):
        audit.method = "bypass-rescan"
        return decided("simple", "bypass", "bypass-rescan",
                       f"the cleaned prompt carries bypass trigger {strong_rescan[0].name!r} and no "
                       "strong mode signal (defensive Stage 1 re-scan)")

    def specific(c: ModeCandidate) -> bool:
        return (c.gear or 0) >= 2 and c.mode != general_mode

    have_general = general_mode in library
    leader = eligible[0] if eligible else None
    best_similarity = max((c.semantic for c in candidates if c.semantic is not None), default=None)
    phrases = any(c.strong or c.weak or c.shapes for c in candidates)
    recognised = phrases or form is not None or (best_similarity is not None
                                                 and best_similarity >= params.recognised_floor)

    def pending(options: list[str], rule: str, why: str, *, not_a_request: bool) -> RoutingDecision:
        question = clarification_question(options, library, not_a_request=not_a_request)
        if not best_guess:
            return decided(None, "pending", rule, f"{why}: asking the user", pending_clarification=question,
                           clarification_options=question_options(options, library))
        if not not_a_request and options:
            return decided(options[0], "best-guess", rule,
                           f"{why}; best guess: {options[0]!r} leads; the clarification is kept",
                           pending_clarification_swallowed=question)
        return decided(fallback_mode, "fallback", rule,
                       f"{why}; fallback mode {fallback_mode!r}; the clarification is kept",
                       pending_clarification_swallowed=question)

    if leader is None:
        return pending([], "no-modes", "no mode is loaded", not_a_request=True)
    context_words = (found_shapes or {}).get("context-reference")
    if context_words is not None:
        options = [fallback_mode] + [c.mode for c in eligible if c.mode != fallback_mode]
        question = context_question(context_words, options, library)
        why = (f"the request leans on context it does not carry ({context_words!r}): asking what it refers to "
               "rather than guessing")
        if not best_guess:
            return decided(None, "pending", "context-reference", why, pending_clarification=question,
                           clarification_options=question_options(options, library))
        return decided(fallback_mode, "fallback", "context-reference",
                       f"{why}; fallback mode {fallback_mode!r} names the assumption; the clarification is kept",
                       pending_clarification_swallowed=question)
    if not recognised:
        top = [c.mode for c in candidates[:QUESTION_OPTIONS]]
        similarity = (f", best similarity {best_similarity:.2f} < {params.recognised_floor}"
                      if best_similarity is not None else "")
        return pending(top, "not-a-request",
                       f"the text is not a request: not a question, no request opening, no phrase matched{similarity}",
                       not_a_request=True)
    # A mode without examples has no semantic score: its strong phrases speak for it, as they
    # did before the semantic signal existed (most strong phrases, strictly, claims the request).
    unscored = [c for c in eligible if c.semantic is None and c.strong] if use_semantic else []
    if unscored:
        claimer = max(unscored, key=lambda c: len(c.strong))
        if all(len(c.strong) < len(claimer.strong) for c in candidates if c is not claimer):
            return decided(claimer.mode, "high", "vocabulary-claim-no-examples",
                           f"{claimer.mode!r} declares no examples and leads on strong phrases "
                           f"({', '.join(claimer.strong)})")
    if not phrases and not use_semantic:
        return decided(general_mode if have_general else leader.mode, "default", "vocabulary-only-default",
                       f"a request ({form}) no phrase claims, and the semantic signal is unavailable "
                       f"({audit.semantic_status}): the general mode {general_mode!r} answers")

    def claims(c: ModeCandidate) -> bool:  # a phrase or shape, or a similarity that counts as recognition
        return (bool(c.strong or c.weak or c.shapes)
                or (c.semantic is not None and c.semantic >= params.recognised_floor))

    close = [c for c in eligible if c.score >= leader.score - params.clear_margin]
    audit.competing = [c.mode for c in close]
    rivals = [c for c in close if specific(c) and claims(c)]
    scores = ", ".join(f"{c.mode} {c.score:.3f}" for c in close)
    if len(rivals) >= 2:
        return pending([c.mode for c in rivals], "close-competitors",
                       f"{len(rivals)} analytical modes are within {params.clear_margin} of each other ({scores})",
                       not_a_request=False)
    if leader.mode != general_mode and not claims(leader) and have_general:
        return decided(general_mode, "default", "no-claim",
                       f"no mode claims the request: the leader {leader.mode!r} has no phrase and a similarity "
                       f"below {params.recognised_floor} ({_evidence(leader)}); the general mode {general_mode!r} "
                       "answers")
    if specific(leader):
        if have_general and any(c.mode == general_mode for c in close):
            return decided(general_mode, "default", "specific-not-clear",
                           f"{leader.mode!r} leads the general mode by less than {params.clear_margin} ({scores}): "
                           f"no specific mode claims the request; {general_mode!r} answers")
        return decided(leader.mode, "high", "clear-leader",
                       f"{leader.mode!r} leads ({_evidence(leader)})"
                       + (f", {audit.margin:.3f} ahead of {audit.runner_up!r}" if audit.margin is not None else ""))
    if leader.mode == general_mode:
        return decided(general_mode, "default", "general-leads",
                       f"the general mode {general_mode!r} leads ({_evidence(leader)}): no specific mode claims "
                       "the request")
    confidence = "high" if len(close) == 1 else "medium"
    return decided(leader.mode, confidence, "clear-leader" if confidence == "high" else "narrow-leader",
                   f"{leader.mode!r} (gear {leader.gear}) leads ({_evidence(leader)})"
                   + (f"; close: {scores}" if len(close) > 1 else ""))


def _evidence(c: ModeCandidate) -> str:
    parts = [f"score {c.score:.3f}"]
    if c.semantic is not None:
        parts.append(f"similarity {c.semantic:.3f}")
    if c.strong or c.weak:
        parts.append("phrases: " + ", ".join(c.strong + c.weak))
    if c.shapes:
        parts.append("shapes: " + ", ".join(c.shapes))
    return "; ".join(parts)


def scores_table(decision: RoutingDecision) -> str:
    """The per-mode scores as a plain-text table for the step's Markdown."""
    lines = [f"{'mode':<20} {'gear':>4} {'vocab':>6} {'semantic':>8} {'score':>6}  nearest example"]
    for c in decision.candidates:
        sem = f"{c.semantic:.3f}" if c.semantic is not None else "-"
        near = f"{c.nearest[0].similarity:.2f} {c.nearest[0].text[:60]}" if c.nearest else ""
        lines.append(f"{c.mode:<20} {c.gear or 0:>4} {c.vocabulary:>6.2f} {sem:>8} {c.score:>6.3f}  {near}")
    audit = decision.audit
    if audit is not None:
        margin = f"{audit.margin:.3f}" if audit.margin is not None else "-"
        lines.append(f"rule {audit.rule}; method {audit.method}; leader {audit.leader} by {margin} over "
                     f"{audit.runner_up}")
    return "\n".join(lines)


def run_routing(turn: TurnContext, library: ModeLibrary, cleaned_prompt: str, *, forced_mode: str | None,
                best_guess: bool, params: RoutingParams = PARAMS) -> RoutingDecision:
    pipeline = turn.config.pipeline
    start = time.perf_counter()
    with turn.step(STEP, cleaned_prompt=cleaned_prompt, layer="cleaned_prompt",
                   forced_mode=forced_mode, best_guess=best_guess) as step:
        MODES.put(turn.data, library)
        if turn.host is not None and not turn.host.detectors(layer="cleaned_prompt", kind="mode_signal"):
            step.contingency("stage1-no-mode-signal-detector",
                             "no detector of kind 'mode_signal' on layer 'cleaned_prompt' is installed",
                             severity="warning")
        signals = turn.detect("cleaned_prompt", cleaned_prompt, step=STEP, kind="mode_signal")
        rescan = turn.detect("cleaned_prompt", cleaned_prompt, step=STEP, kind="bypass")
        shapes: list[Signal] | None = None
        if turn.host is None or turn.host.detectors(layer="cleaned_prompt", kind="request_shape"):
            shapes = turn.detect("cleaned_prompt", cleaned_prompt, step=STEP, kind="request_shape")
        elif any(m.shapes.requires or m.shapes.claims for m in library):
            step.contingency("routing-no-request-shape-detector",
                             "modes declare request shapes but no detector of kind 'request_shape' on layer "
                             "'cleaned_prompt' is installed: no shape is claimed and no requirement enforced",
                             severity="warning")
        semantic = None if forced_mode else read_semantic(turn, library, cleaned_prompt, params)
        decision = dispatch(signals, rescan, library, forced_mode=forced_mode, best_guess=best_guess,
                            fallback_mode=pipeline.fallback_mode, general_mode=pipeline.default_mode,
                            semantic=semantic, params=params, prompt=cleaned_prompt, shapes=shapes)
        if decision.audit is not None:
            decision.audit.timings_ms["routing_total_ms"] = round((time.perf_counter() - start) * 1000, 2)
        strong_rescan = [s for s in rescan if s.strength == "strong"]
        if decision.classification_confidence == "bypass" and strong_rescan:
            turn.stash[BYPASS_CATEGORY] = strong_rescan[0].data.get("category")
        _, unknown = candidates_from(signals, library)
        step.output.update(decision.model_dump(mode="json"))
        step.output["routing_scores"] = scores_table(decision)
        step.output["stage1_signals"] = [s.model_dump(mode="json") for s in signals]
        step.output["request_shapes"] = [s.model_dump(mode="json") for s in shapes or []]
        step.output["stage1_bypass_rescan"] = {
            "signals": [s.model_dump(mode="json") for s in rescan],
            "acted": decision.classification_confidence == "bypass",
        }
        if unknown:
            step.output["signals_for_unknown_modes"] = [s.model_dump(mode="json") for s in unknown]
        if semantic is not None and not semantic.ok:
            step.contingency("routing-semantic-unavailable-vocabulary-only",
                             f"the semantic signal did not run ({semantic.status}: {semantic.detail}); "
                             "modes were scored by their vocabulary alone", severity="warning",
                             status=semantic.status)
        summary = decision.signal_strength_summary
        if summary.single_signal_high_confidence:
            step.contingency("stage2-single-signal-high-confidence",
                             f"dispatched {decision.mode!r} on one strong signal "
                             f"({summary.strong_signals_for_dispatched[0]!r})", severity="info")
        if decision.classification_confidence in {"best-guess", "fallback"}:
            step.contingency(f"stage2-clarification-pending-ran-{decision.classification_confidence}",
                             f"continued on {decision.mode!r}; the question is kept in the trace",
                             severity="warning", question=decision.pending_clarification_swallowed)
    return decision
