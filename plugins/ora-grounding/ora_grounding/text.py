"""Plain-Python text handling for grounding: sentences, claims, content words.

No heavy imports here: the specifics detector and ``ora plugins list`` use this module
without loading a model.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from ora_core.api import lazy_compile

STOPWORDS: frozenset[str] = frozenset([
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
    "are", "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between",
    "both", "but", "by", "can", "can't", "cannot", "could", "couldn't", "did", "didn't", "do",
    "does", "doesn't", "doing", "don't", "down", "during", "each", "even", "ever", "every",
    "few", "for", "from", "further", "get", "gets", "got", "had", "hadn't", "has", "hasn't",
    "have", "haven't", "having", "he", "he'd", "he'll", "he's", "her", "here", "here's", "hers",
    "herself", "him", "himself", "his", "how", "how's", "however", "i", "i'd", "i'll", "i'm",
    "i've", "if", "in", "into", "is", "isn't", "it", "it's", "its", "itself", "just", "let's",
    "like", "many", "may", "me", "might", "more", "most", "much", "must", "mustn't", "my",
    "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "one", "only", "or",
    "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "per", "quite",
    "rather", "really", "same", "shall", "shan't", "she", "she'd", "she'll", "she's", "should",
    "shouldn't", "so", "some", "such", "than", "that", "that's", "the", "their", "theirs",
    "them", "themselves", "then", "there", "there's", "these", "they", "they'd", "they'll",
    "they're", "they've", "this", "those", "though", "through", "thus", "to", "too", "under",
    "until", "up", "upon", "us", "very", "was", "wasn't", "we", "we'd", "we'll", "we're",
    "we've", "were", "weren't", "what", "what's", "when", "when's", "where", "where's",
    "whether", "which", "while", "who", "who's", "whom", "whose", "why", "why's", "will",
    "with", "within", "without", "won't", "would", "wouldn't", "yes", "yeah", "yet", "you",
    "you'd", "you'll", "you're", "you've", "your", "yours", "yourself", "yourselves", "oh",
    "ok", "okay", "well", "um", "uh", "hmm", "lol", "actually", "also", "its", "s", "t", "d",
    "ll", "m", "re", "ve"
])

_WORD = lazy_compile(r"[^\W_][\w'’\-]*")
_SENTENCE_END = lazy_compile(
    r"(?<=[.!?…])[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Za-z0-9])"
    # two sentences glued without a space ("...the Byzantine Empire.Süreyya Opera House is"),
    # as scraped and concatenated text has them: a lower-case word, its stop, a capitalised word
    r"|(?<=[a-z][a-z][.!?])(?=[A-Z][^\W\d_])"
)
_BLOCK_START = lazy_compile(r"^\s*(?:[-*•]\s|\d+[.)]\s|>\s?)")
_HEADING = lazy_compile(r"^\s*#{1,6}\s+")
_ABBREVIATIONS = lazy_compile(
    r"\b(?:mr|mrs|ms|dr|prof|sr|jr|st|mt|vs|etc|inc|ltd|co|corp|no|vol|fig|approx|e\.g|i\.e|u\.s|"
    r"jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.$",
    re.IGNORECASE,
)
_INITIAL = lazy_compile(r"(?:^|\s)[A-Z]\.$")


#: Letters NFKD does not split into a base letter and an accent.
_UNDECOMPOSABLE = str.maketrans({"ı": "i", "ø": "o", "Ø": "O", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "ß": "ss",
                                 "æ": "ae", "Æ": "Ae", "œ": "oe", "Œ": "Oe"})


class _CombiningMarks(dict[int, int | None]):
    """``str.translate`` table deleting combining marks (the accents NFKD splits off), filled per
    code point on first sight; past ``_MARKS_KEPT`` code points it answers without keeping more."""

    def __missing__(self, code: int) -> int | None:
        value = None if unicodedata.combining(chr(code)) else code
        if len(self) < _MARKS_KEPT:
            self[code] = value
        return value


_MARKS_KEPT = 65_536
_DROP_MARKS = _CombiningMarks()


def fold(text: str) -> str:
    """Lower case without accents ("Süreyya" -> "sureyya", "Bartók" -> "bartok"): an answer that
    spells a name without its accents still names what the evidence names."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.translate(_UNDECOMPOSABLE))
    if decomposed.isascii():
        return decomposed.lower()
    return decomposed.translate(_DROP_MARKS).lower()


def words(text: str) -> list[str]:
    """Lower-cased, accent-folded word tokens (letters/digits, inner apostrophes and hyphens kept)."""
    return [w.replace("’", "'").strip("'-") for w in _WORD.findall(fold(text))]


def stem(word: str) -> str:
    """A deliberately light suffix stripper: enough to match plural/tense variants."""
    w = word.lower()
    if len(w) <= 3 or w.isdigit():
        return w
    for suffix in ("'s", "ies", "ing", "edly", "ed", "ly", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            base = w[: len(w) - len(suffix)]
            if suffix == "ies":
                return base + "y"
            if suffix == "s" and base.endswith("s"):
                return w  # "glass", "class"
            return base
    return w


def content_words(text: str) -> list[str]:
    """Words that carry content: not stopwords, not single letters."""
    return [w for w in words(text) if (w not in STOPWORDS and len(w) > 1) or w.isdigit()]


def has_content_word(text: str) -> bool:
    """``bool(content_words(text))``, stopping at the first content word."""
    for match in _WORD.finditer(fold(text)):
        w = match.group(0).replace("’", "'").strip("'-")
        if (w not in STOPWORDS and len(w) > 1) or w.isdigit():
            return True
    return False


def content_stems(text: str) -> list[str]:
    return [stem(w) for w in content_words(text)]


def vocabulary(texts: Iterable[str]) -> set[str]:
    """Every content word and its stem, over several texts."""
    vocab: set[str] = set()
    for text in texts:
        for w in content_words(text):
            vocab.add(w)
            vocab.add(stem(w))
    return vocab


def _blocks(text: str) -> list[str]:
    """Paragraphs, with every heading, list item and quote line starting a block of its own."""
    blocks: list[list[str]] = [[]]
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line.strip():
            blocks.append([])
            continue
        if _HEADING.match(line):
            blocks.extend([[_HEADING.sub("", line).strip()], []])
            continue
        if _BLOCK_START.match(line):
            blocks.append([])
            line = _BLOCK_START.sub("", line, count=1)
        blocks[-1].append(line.strip())
    return [" ".join(b) for b in blocks if b]


def split_sentences(text: str) -> list[str]:
    """Sentences of prose, markdown lists and headings; never splits after an abbreviation."""
    out: list[str] = []
    for block in _blocks(text):
        start = 0
        for match in _SENTENCE_END.finditer(block):
            # both patterns end in "\.$" and span at most 8 characters (the longest abbreviation,
            # its stop and the boundary before it): the tail's last 12 say what the whole would
            tail = block[max(start, match.start() - 16):match.start()].rstrip()[-12:]
            if tail.endswith(".") and (_ABBREVIATIONS.search(tail) or _INITIAL.search(tail)):
                continue
            out.append(block[start:match.start()])
            start = match.end()
        out.append(block[start:])
    spaces = _SPACES.compiled()
    return [cleaned for piece in out if (cleaned := spaces.sub(" ", piece).strip())]


_SPACES = lazy_compile(r"\s+")


#: Sentences that carry no claim (conversational fillers, headings, hedges without content).
_FILLER = lazy_compile(
    r"^(?:(?:yes|no|yeah|yep|nope|sure|ok(?:ay)?|oh|wow|well|hmm|indeed|right|true|really|cool|"
    r"great|nice|awesome|interesting|absolutely|definitely|certainly|exactly|totally|of course|"
    r"ha(?:ha)+|lol|thanks?(?: you)?|i (?:see|agree|know|guess|think so|believe so)|"
    r"i (?:believe|think) (?:it (?:was|is)|so|that'?s right)|me too|that'?s (?:true|right|"
    r"interesting|cool|great|nice|awesome))[\s,.!?]*)+$",
    re.IGNORECASE,
)


_SPECIFIC_MARK = lazy_compile(r"[A-Z0-9&$%€£]")
_AFFIRMATION = lazy_compile(r"^\s*(?:yes|no|yeah|yep|nope|correct|incorrect|true|false)\b[\s,.!]*$", re.IGNORECASE)


def is_affirmation(text: str) -> bool:
    """A bare yes/no: it asserts (or denies) the question's proposition, nothing of its own."""
    return bool(_AFFIRMATION.match(text))


_DENIAL = lazy_compile(r"^\s*(?:no|nope|incorrect|false)\b[\s,.!]*$", re.IGNORECASE)


def is_denial(text: str) -> bool:
    """A bare no: it denies the question's proposition."""
    return bool(_DENIAL.match(text))


def is_claim(sentence: str) -> bool:
    """Does the sentence assert something checkable (a content word, not filler, not a question)?"""
    if _FILLER.match(sentence.strip()):
        return False
    if sentence.rstrip().endswith("?"):
        return False
    # a content word, or a name / figure / symbol (a bare title such as "R&B" is an answer too);
    # the capital that opens every sentence is no such mark ("It really is." claims nothing)
    return has_content_word(sentence) or bool(_SPECIFIC_MARK.search(sentence.strip()[1:]))


def split_claims(text: str) -> list[str]:
    """The checkable claims of an output, one per sentence."""
    return [s for s in split_sentences(text) if is_claim(s)]


#: Words that frame a sentence as talk about the request rather than an answer to it.
_META = frozenset({"user", "user's", "users", "request", "requests", "question", "questions", "ask", "asks",
                   "asking", "asked", "want", "wants", "wanted", "know", "knowing"})
RESTATEMENT_COVERAGE = 0.6


def restates_question(claim: str, question: str) -> bool:
    """The claim only tells back what was asked ("The user's request is to know how X works"):
    it frames itself as the request (a word such as user, request, question, asks, wants), adds
    no content word the question lacks, and covers most of the question's content. An answer
    that picks an option named in the question ("Arthur's Magazine") or resolves it ("X was
    started first") has no such framing and stays a claim."""
    said = content_words(claim)
    if not any(w in _META for w in said):
        return False
    asked = {stem(w) for w in content_words(question)}
    rest = {stem(w) for w in said if w not in _META}
    if not asked or not rest or not rest <= asked:
        return False
    return len(rest) / len(asked) >= RESTATEMENT_COVERAGE



#: First- and second-person words: a sentence about the speaker or the listener ("I love dogs",
#: "you should try it", "we went there") is talk, not a claim the evidence can support.
_PERSONAL = lazy_compile(
    r"(?<![\w'’])(?:i|i'm|i’m|im|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'd|we'll|our|ours|ourselves|"
    r"us|you|you're|you've|you'd|you'll|your|yours|yourself|yourselves)(?![\w'’])",
    re.IGNORECASE,
)
_QUOTED = lazy_compile(r"\"[^\"\n]*\"|“[^”\n]*”")
_NUMERAL_AFTER = lazy_compile(r"(?:^|[^.!?:;,\s])\s+[A-Z][\w'’-]*\s+$")  # "War I", never "Yes I"


def speaks_of_persons(sentence: str) -> bool:
    """Does the sentence talk about the speaker or the listener (I, me, my, we, our, you, your
    ...), outside quotation marks? The Roman numeral "I" after a name ("World War I") and the
    country "US" are not persons."""
    text = _QUOTED.sub(" ", sentence)
    for match in _PERSONAL.finditer(text):
        token = match.group(0)
        if token == "US":
            continue
        if token == "I" and _NUMERAL_AFTER.search(text[:match.start()]):
            continue
        return True
    return False
