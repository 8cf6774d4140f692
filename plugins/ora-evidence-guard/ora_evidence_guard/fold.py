"""One view of a text that hides nothing from the rules: what a model reads, not what the bytes are.

``fold`` maps every character to what it looks like, keeping an index back into the original:

- invisible characters go (zero-width space and joiners, word joiner, BOM, soft hyphen, bidi
  controls: every Unicode *format* character; combining marks and variation selectors; Hangul
  fillers and the blank Braille pattern);
- compatibility forms become their plain letters (full-width ``ＩＧＮＯＲＥ``, mathematical bold
  ``𝐈𝐠𝐧𝐨𝐫𝐞``, ligatures, the long s), accents are dropped (``précédentes`` -> ``precedentes``),
  Latin variants become the letter they are named after (small capitals ``ɪɢɴᴏʀᴇ``, ``ø``, ``ł``);
- Cyrillic and Greek look-alikes become the Latin letter they imitate (``іgnоrе`` with Cyrillic
  і, о, е reads ``ignore``); typographic quotes become ASCII quotes.

Case is kept (a few rules look for upper-case tokens such as ``VERIFIED``). ``reveal`` gives the
other ways a text hides words from a reader but not from a model: HTML entities, HTML comment
delimiters (replaced by line breaks, so a comment's content is scanned as lines of its own),
percent-encoding (a markdown link target), and Unicode *tag* characters (U+E0020-E007E, an
invisible copy of ASCII that some models read).
"""

from __future__ import annotations

import html
import unicodedata
from functools import lru_cache
from urllib.parse import unquote

from ora_core.api import lazy_compile

#: Cyrillic and Greek letters that render like a Latin one (the common part of Unicode's
#: confusables list for these scripts).
CONFUSABLES: dict[str, str] = {
    # Cyrillic, lower case
    "а": "a", "в": "b", "е": "e", "ё": "e", "г": "r", "һ": "h", "і": "i", "ї": "i", "ј": "j", "к": "k",
    "ӏ": "l", "м": "m", "н": "h", "о": "o", "п": "n", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x",
    "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ь": "b", "ɡ": "g", "ɑ": "a", "ı": "i", "ȷ": "j",
    # Cyrillic, upper case
    "А": "A", "В": "B", "Е": "E", "Ё": "E", "Һ": "H", "І": "I", "Ї": "I", "Ј": "J", "К": "K", "М": "M",
    "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "У": "Y", "Х": "X", "Ѕ": "S", "Ԁ": "D", "Ԛ": "Q",
    "Ԝ": "W", "Ӏ": "I",
    # Greek
    "α": "a", "ο": "o", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ρ": "p", "τ": "t", "υ": "u", "χ": "x",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # typographic quotes read as the ASCII ones
    "‘": "'", "’": "'", "‚": "'", "‛": "'", "“": '"', "”": '"', "„": '"', "‟": '"', "«": '"', "»": '"',
}
#: Characters that render as nothing but are not Unicode format characters.
BLANKS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
TAG_FIRST, TAG_LAST = 0xE0020, 0xE007E  # Unicode tag characters that mirror printable ASCII

_ENTITY = lazy_compile(r"&(?:#\d{1,7}|#x[0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_PERCENT = lazy_compile(r"%[0-9A-Fa-f]{2}")


_LATIN_NAME = lazy_compile(r"^(?:LATIN|MODIFIER) (?:(SMALL|CAPITAL) )?LETTER (?:(SMALL CAPITAL) )?([A-Z])(?: |$)")


def _latin_by_name(ch: str) -> str:
    """The plain letter a Latin variant is named after (small capitals ``ɪɢɴᴏʀᴇ``, ``ø``, ``ł``,
    dotless and hooked letters), or the character itself."""
    match = _LATIN_NAME.match(unicodedata.name(ch, ""))
    if match is None:
        return ch
    size, small_capital, letter = match.groups()
    return letter if size == "CAPITAL" and not small_capital else letter.lower()


@lru_cache(maxsize=4096)
def fold_char(ch: str) -> str:
    """What one non-ASCII character reads as ("" for an invisible one)."""
    if ch in BLANKS or unicodedata.category(ch) in ("Cf", "Mn", "Me"):
        return ""
    if ch in CONFUSABLES:
        return CONFUSABLES[ch]
    out = []
    for part in unicodedata.normalize("NFKD", ch):
        if unicodedata.category(part) in ("Cf", "Mn", "Me") or part in BLANKS:
            continue
        part = CONFUSABLES.get(part, part)
        out.append(part if part.isascii() or not part.isalpha() else _latin_by_name(part))
    return "".join(out)


def fold(text: str) -> tuple[str, list[int] | None]:
    """``(folded text, index of each folded character in text)``; the index is None when the text
    is ASCII (folding changes nothing then)."""
    if text.isascii():
        return text, None
    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        if ch.isascii():
            out.append(ch)
            where.append(i)
            continue
        for part in fold_char(ch):
            out.append(part)
            where.append(i)
    return "".join(out), where


def hidden_tags(text: str) -> str:
    """The ASCII text spelled in Unicode tag characters (invisible when rendered), or ""."""
    if text.isascii():
        return ""
    return "".join(chr(ord(c) - 0xE0000) for c in text if TAG_FIRST <= ord(c) <= TAG_LAST)


def tags_read(text: str) -> str:
    """``text`` with each tag character replaced by the ASCII character it mirrors (what a model
    that reads them sees), and other invisible characters removed."""
    out = "".join(chr(ord(c) - 0xE0000) if TAG_FIRST <= ord(c) <= TAG_LAST else c for c in text)
    return fold(out)[0]


def reveal(text: str) -> str:
    """``text`` with HTML entities decoded and HTML comment delimiters turned into line breaks."""
    if "&" in text and _ENTITY.search(text):
        text = html.unescape(text)
    if "<!--" in text or "-->" in text:
        text = text.replace("<!--", "\n").replace("-->", "\n")
    return text


def percent_decoded(text: str) -> str:
    """``text`` with percent-encoding decoded, or "" when it holds none."""
    if "%" not in text or not _PERCENT.search(text):
        return ""
    decoded = unquote(text)
    return decoded if decoded != text else ""


_WORDS = lazy_compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """The lower-case words of ``text`` after folding (what repetition is measured on)."""
    folded, _ = fold(text)
    return _WORDS.findall(folded.lower())
