"""Failure signals: the verifier's own words saying that something did not hold.

A verifier that ends with ``VERDICT: PASS`` after writing ``UNSUPPORTED: the 2019 adoption date is
not in the evidence package`` has not passed the analysis (issue 13, item 2). ``find_failure_signals``
reads the verifier's *own* lines (quoted material already masked by ``verdict.own_lines``) for the
phrasings verifier models use when a claim fails, so that ``parse_verdict`` can refuse such a PASS.

What counts (``FAILURE_PATTERNS``, each named):

- failure tokens in capitals (``UNSUPPORTED``, ``FAILED``, ``FABRICATED``, ``NOT VERIFIED``,
  ``INCORRECT`` ...), a line that starts with a FAIL verdict token and carries a reason
  (``Verification failed: ...``, ``VERDICT: FAIL — ...``), a FAIL verdict inside a line
  (``(just kidding) VERDICT: FAIL``);
- judgements against the evidence: *unsupported / unsubstantiated / unverifiable*, *not in (found in,
  supported by, mentioned in) the evidence / chunks / sources*, *missing from / absent from the
  evidence*, *no evidence (source, support, mention) for*, *no chunk mentions*, *cannot be verified*,
  *could not confirm*, *contradicts (is inconsistent with) the evidence*, *is fabricated / invented /
  made up / a hallucination*, *the date is wrong*, *misquotes*, *criterion 2 fails*;
- the same in German (*nicht belegt*, *unbelegt*, *frei erfunden*, *kein Beleg für*), French (*non
  étayé*, *n'est pas confirmé*, *ne figure pas*, *inventé de toutes pièces*, *aucune preuve*) and
  Spanish (*no está respaldado*, *sin respaldo*, *no aparece en*).

What does not count, because it is not a failure:

- a **negated** phrase: a negator earlier in the same clause (*no unsupported claims*, *nothing is
  missing from the evidence*, *I found no fabricated figures*, *it avoids unsupported specifics*,
  *keine unbelegten Angaben*, *aucune affirmation non étayée*) or a *not* right before it (*does not
  go beyond the evidence*, *is not contradicted by the evidence*);
- a **category with nothing in it**: ``Unsupported claims: none``, ``## UNSUPPORTED CLAIMS`` followed
  only by ``- none`` (a heading or an empty label counts through the items listed under it);
- the analysis's own **acknowledged gap**, reported by the verifier: *the analysis flags the date as
  unverified*, *it correctly notes that the figure cannot be verified*, *(listed in its) coverage gap*,
  *it leaves the year open, as it is not in the evidence*, *where the evidence is silent on X, the
  analysis says so* — unless a contrast word (*but*, *and*, *however* ...) stands between the cue and
  the failure (*it avoids speculation but the date is unsupported* is a failure);
- a ``PASS/FAIL`` or ``PASS or FAIL`` alternative (a restated instruction, not a verdict);
- an inline quotation (``"..."``) copied verbatim from the texts the verifier was shown.

The FAIL *tokens* (``VERDICT_TOKEN_PATTERNS``: the capitals, the FAIL-with-reason line, the embedded
FAIL verdict) are verdict words and give a FAIL even where no verdict line stands; the prose
phrasings only overrule a PASS line (see ``verdict``).

Clauses end at punctuation and at *and / but / however / although / while / because* (and their
German, French and Spanish equivalents), so a negation never reaches across them: *no source is
given, and the date is unsupported* is a failure. When in doubt the phrase counts: a false FAIL
costs one revision cycle; a false PASS ships a confabulation.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from ora_core.api import lazy_compile


class FailureSignal(BaseModel):
    """One line of the verifier's own text that names a failure."""

    model_config = ConfigDict(extra="forbid")

    line: int  # 1-based line of the raw output
    signal: str  # the FailurePattern's name
    matched: str
    text: str  # the line, markdown stripped (for a heading or label: "<heading>: <item>")
    verdict_token: bool = False  # a FAIL token (``UNSUPPORTED``, ``VERIFICATION FAILED: ...``), not prose


@dataclass(frozen=True)
class FailurePattern:
    name: str
    pattern: re.Pattern[str]


_I = re.IGNORECASE
#: the patterns that are FAIL *tokens* (a verdict word, as verifiers label a verdict or a claim),
#: as opposed to prose phrasings: a token gives a FAIL even where no verdict line stands
VERDICT_TOKEN_PATTERNS = frozenset({"failure-token", "fail-verdict-with-reason", "embedded-fail-verdict"})
_EVIDENCE = (r"(?:evidence|package|chunks?|sources?|excerpts?|passages?|context|documents?|retrieved|material|"
             r"materials|vault|corpus|citations?|references?|records?|data|snippets?|results?)")
_EV_OBJECT = (rf"(?:the\s+|any\s+|this\s+|that\s+|these\s+|those\s+|its\s+|our\s+|your\s+)?"
              rf"(?:\w+\s+){{0,2}}?{_EVIDENCE}\b")
_SUPPORT_PART = (r"(?:supported|backed|sourced|corroborated|substantiated|confirmed|verified|verifiable|grounded|"
                 r"attested|documented|evidenced)")


#: "not contradicted by the evidence" is no failure: a negated judgement *against* the evidence
_NOT_AGAINST = r"(?!(?:\w+\s+){0,2}?(?:contradicted|refuted|disputed|challenged|undermined|contested|contradict)\b)"


def _p(name: str, pattern: str, flags: int = _I) -> FailurePattern:
    return FailurePattern(name, lazy_compile(pattern, flags))


FAILURE_PATTERNS: tuple[FailurePattern, ...] = (
    _p("failure-token",
       r"(?<![A-Za-z/])(?:FAIL(?:S|ED|URE|ING)?|INCORRECT|INACCURATE|FALSE|WRONG|FABRICATED|HALLUCINATED|"
       r"CONFABULATED|INVENTED|CONTRADICTED|REFUTED|UNVERIFIED|UNVERIFIABLE|UNSUPPORTED|UNSUBSTANTIATED|"
       r"NOT\s+(?:VERIFIED|SUPPORTED|FOUND|BACKED|CONFIRMED|IN\s+(?:THE\s+)?EVIDENCE)|"
       r"NICHT\s+(?:BELEGT|BESTANDEN|VERIFIZIERT)|UNBELEGT|FEHLGESCHLAGEN|"
       r"NON\s+(?:ÉTAYÉ|VÉRIFIÉ|CONFIRMÉ)E?S?|ÉCHEC|ÉCHOUÉ|FALLA|FALLIDO|NO\s+VERIFICADO)(?![A-Za-z])",
       flags=0),
    _p("fail-verdict-with-reason",
       r"^(?:(?:final\s+)?verdict\s*[:：\-–—]\s*)?(?:fail(?:ed|s)?|verification\s+failed|failed\s+verification|"
       r"not\s+verified|nicht\s+bestanden|échec)\s*(?:[:：\-–—(]|$)"),
    _p("embedded-fail-verdict",
       r"\bverdict\s*(?:is\s+|would\s+be\s+|must\s+be\s+)?[:：\-–—=]?\s*(?:is\s+)?[\"'“]?"
       r"(?:fail(?:ed)?|not\s+verified|verification\s+failed)\b"),
    _p("unsupported",
       r"\b(?:unsupported|unsubstantiated|unsourced|uncorroborated|unverifiable|unverified|unfounded|ungrounded|"
       r"unattested|uncited|unbacked)\b(?!\s+(?:devices?|platforms?|browsers?|versions?|formats?|features?|"
       r"operations?|hardware|software|os|languages?|characters?|encodings?|files?|media|codecs?|architectures?)\b)"),
    _p("cannot-verify",
       r"\b(?:cannot|can\s*not|can't|could\s*not|couldn't|unable\s+to|impossible\s+to|failed\s+to|fails\s+to|"
       r"not\s+able\s+to)\s+(?:be\s+)?(?:independently\s+|directly\s+)?(?:verif(?:y|ied)|confirm(?:ed)?|"
       r"substantiat(?:e|ed)|corroborat(?:e|ed)|support(?:ed)?|back(?:ed)?|source(?:d)?|trace(?:d)?|find|found|"
       r"locate(?:d)?|match(?:ed)?)\b(?!\s+(?:any|anything|a\s+single|no|nothing|fault|problems?|issues?|errors?|"
       r"discrepanc\w+|inconsistenc\w+)\b)"),
    _p("not-in-evidence",
       rf"(?:\bnot|n't|\bcannot|\bnever|\bnowhere)\s+{_NOT_AGAINST}(?:\w+\s+){{0,4}}?(?:in|within|from|by|among|across|"
       rf"inside)\s+"
       rf"{_EV_OBJECT}"
       rf"|\b(?:absent|missing|lacking|omitted)\s+(?:from|in)\s+{_EV_OBJECT}"
       rf"|\b(?:goes|go|going|went)\s+(?:well\s+|far\s+)?beyond\s+(?:what\s+)?{_EV_OBJECT}"),
    _p("not-supported",
       rf"(?:\bnot|n't)\s+(?:\w+ly\s+)?{_SUPPORT_PART}\b"
       rf"|\b{_EVIDENCE}[^.;\n]{{0,30}}?(?:\bnot|n't)\s+(?:\w+ly\s+)?(?:support|back|confirm|corroborate|substantiate|"
       r"mention|contain|include|cover|say|state|show|give)\b"
       r"|(?:\bnot|n't)\s+(?:\w+ly\s+)?(?:cite|give|provide|name|offer)\s+(?:a|any)\s+(?:\w+\s+)?(?:source|citation|"
       r"evidence|reference|support)\b"
       r"|\bwithout\s+(?:a\s+|any\s+)?(?:source|citation|evidence|reference|support)\b"),
    _p("no-evidence-for",
       r"\bno\s+(?:\w+\s+)?(?:evidence|support|source|citation|basis|backing|mention|record|trace|corroboration|"
       r"grounding)\s+(?:at\s+all\s+)?(?:for|of|that|supporting|backing|confirming|to\s+support|in\s+the|in\s+any)\b"
       r"|\b(?:no|none\s+of\s+the)\s+(?:\w+\s+)?(?:chunks?|sources?|documents?|passages?|excerpts?|evidence|"
       r"citations?)\s+(?:\w+\s+)?(?:mentions?|supports?|confirms?|contains?|gives?|states?|says?|backs?|"
       r"corroborates?|includes?|shows?)\b"
       r"|\black(?:s|ed|ing)?\s+(?:any\s+)?(?:\w+\s+)?(?:support|evidence|sources?|sourcing|citations?|backing|basis|"
       r"grounding|corroboration)\b"
       rf"|\bnone\s+of\s+(?:the|its|these|those)\s+(?:\w+\s+){{0,3}}?(?:is|are|was|were|can\s+be|could\s+be)\s+"
       rf"(?:\w+ly\s+)?(?:{_SUPPORT_PART}|found)\b"
       rf"|\bnothing\s+in\s+{_EV_OBJECT}\s+(?:\w+\s+)?(?:supports?|confirms?|mentions?|backs?|corroborates?|says|"
       r"shows?|states?)\b"
       rf"|\b{_EVIDENCE}\s+(?:\w+\s+)?(?:says?|states?|mentions?|shows?|gives?)\s+nothing\s+(?:about|of|on)\b"
       r"|\b(?:is|are)\s+silent\s+(?:on|about)\b"),
    _p("contradicts-evidence",
       rf"\b(?:contradict(?:s|ed|ing)?|conflicts?\s+with|inconsistent\s+with|at\s+odds\s+with|disagrees?\s+with|"
       rf"contrary\s+to|refuted\s+by|differs?\s+from)\s+(?:by\s+)?(?:(?:\w+\s+){{0,3}}?{_EVIDENCE}\b|itself\b)"
       r"|\b(?:evidence|chunk\s*\d*|source|excerpt)\s+(?:\w+\s+)?(?:says?|states?|shows?|gives?|reports?)\s+"
       r"(?:otherwise|the\s+opposite|something\s+else|a\s+different)\b"),
    _p("fabricated",
       r"\b(?:is|are|was|were|be|been|being|appears?|seems?|looks?|likely|probably|possibly|clearly|evidently|"
       r"apparently|entirely|simply|wholly)\s+(?:to\s+be\s+)?(?:\w+ly\s+)?(?:fabricated|invented|made[- ]up|"
       r"hallucinated|confabulated|fictional|fictitious|fake|spurious|imaginary)\b"
       r"|\b(?:fabricated|invented|made[- ]up|hallucinated|confabulated|fictitious|fake|spurious)\s+"
       r"(?:\d[\w.,%$]*\s+|\w+ly\s+)?(?:figures?|dates?|numbers?|quotes?|quotations?|citations?|sources?|names?|"
       r"statistics?|stats?|specifics?|claims?|facts?|details?|references?|stud(?:y|ies)|percentages?|amounts?|"
       r"events?|years?|urls?|links?)\b"
       r"|\b(?:analysis|analyst|author|draft|answer|response|summary|writer|model)\s+(?:has\s+|have\s+|had\s+)?"
       r"(?:\w+ly\s+)?(?:fabricat|invent|hallucinat|confabulat|ma(?:de|kes?)\s+up)\w*"
       r"|\b(?:an?|is|are|likely|probable|clear|outright)\s+(?:\w+\s+)?(?:hallucinations?|confabulations?|"
       r"fabrications?)\b"),
    _p("incorrect",
       r"\b(?:claim|figure|date|number|name|quote|quotation|citation|attribution|statement|year|amount|percentage|"
       r"specific|fact|detail|assertion|conclusion)s?\b(?:\s+\S+){0,4}?\s+(?:is|are|was|were|appears?|seems?)\s+"
       r"(?:\w+ly\s+)?(?:incorrect|wrong|inaccurate|erroneous|mistaken|misquoted|misattributed|misstated|"
       r"overstated|exaggerated|false|speculative|conjectural|questionable|dubious|doubtful|a\s+guess|guesswork)\b"
       r"|\b(?:incorrect|wrong|inaccurate|erroneous)\s+(?:figures?|dates?|numbers?|names?|quotes?|quotations?|"
       r"citations?|attributions?|claims?|statements?|years?|amounts?|percentages?|specifics?)\b"
       r"|\b(?:misquot|misattribut)\w*"),
    _p("all-but",
       r"\b(?:supported|verified|correct|accurate|holds?|confirmed|checks?\s+out|matches|match|sourced)\b"
       r"[^.;\n]{0,40}?\b(?:except|apart\s+from|other\s+than|save\s+for|but\s+not|with\s+the\s+exception\s+of)\b"),
    _p("fails-criterion",
       r"\bfail(?:s|ed|ing)?\s+(?:on\s+)?(?:the\s+|this\s+|that\s+|its\s+)?(?:\w+\s+)?(?:criteri(?:on|a)|check|"
       r"requirements?|standard)\b"
       r"|\b(?:criteri(?:on|a)|claims?|checks?|items?|requirements?|statements?|specifics?|facts?)\s*"
       r"(?:#?\d+[a-z]?\s*)?(?:\([^)\n]*\)\s*)?[:\-–—]?\s*(?:\w+\s+)?fail(?:s|ed)?\b"
       r"|\bfail(?:s|ed)?\s+to\s+(?:be\s+)?(?:meet|satisfy|pass|hold|cite|match|support|verif|back|ground|"
       r"substantiat|source|reflect|mention|address|answer)\w*"),
    _p("de:nicht-belegt",
       r"\bnicht\s+(?:\w+\s+){0,3}?(?:belegt|gestützt|gedeckt|verifiziert|verifizierbar|bestätigt|nachweisbar|"
       r"nachgewiesen|auffindbar)\b"
       r"|\bnicht\s+in\s+(?:den|der|dem)\s+(?:\w+\s+)?(?:Belegen|Quellen|Unterlagen|Auszügen|Evidenz|Dokumenten|"
       r"Materialien|Paket)\b"
       r"|\b(?:unbelegt|unbestätigt|unbewiesen)\w*|\b(?:frei\s+)?erfunden\b"
       r"|\bwiderspr(?:icht|echen|ach|ochen)\s+(?:\w+\s+){0,2}?(?:Belegen|Quellen|Evidenz|Auszug|Auszügen|Beleg)\b"
       r"|\bkein(?:e|en|er)?\s+(?:\w+\s+)?(?:Beleg|Belege|Nachweis|Quelle|Hinweis|Stütze|Grundlage)\w*\s+"
       r"(?:für|dafür|in|dass)\b"
       r"|\bfehlt\s+in\s+den\s+(?:Belegen|Quellen|Unterlagen)\b"),
    _p("fr:non-etaye",
       r"\bnon\s+(?:étayée?s?|vérifiée?s?|confirmée?s?|fondée?s?|sourcée?s?|corroborée?s?|appuyée?s?|"
       r"justifiée?s?|prouvée?s?|documentée?s?)\b"
       r"|\b(?:n['’]est|ne\s+sont)\s+pas\s+(?:\w+\s+){0,2}?(?:étayée?s?|vérifiée?s?|confirmée?s?|fondée?s?|"
       r"sourcée?s?|corroborée?s?|appuyée?s?|justifiée?s?|prouvée?s?|mentionnée?s?|présente?s?)\b"
       r"|\bne\s+(?:figure|figurent|apparaît|apparaissent)\s+pas\b|\bn['’]appara(?:ît|it|issent)\s+pas\b"
       r"|\b(?:est|sont|semble|semblent|paraît)\s+(?:(?!pas\b)\w+\s+)?(?:inventée?s?|fabriquée?s?|erronée?s?|"
       r"inexacte?s?)\b"
       r"|\binventée?s?\s+de\s+toutes\s+pièces\b"
       r"|\bcontredi(?:t|sent)\s+(?:\w+\s+){0,2}?(?:preuves?|sources?|extraits?|dossier|éléments?|documents?)\b"
       r"|\baucune?\s+(?:preuve|source|mention|trace|élément|extrait)\s+(?:ne\s|de\s|pour\s|n['’]|qui\s|dans\s)"
       r"|\babsente?s?\s+(?:des|du|de\s+la)\s+(?:preuves|sources|dossier|extraits|documents)\b"),
    _p("es:no-respaldado",
       r"\bno\s+(?:(?:está|están|es|son|fue|fueron|ha\s+sido|puede\s+ser)\s+(?:\w+\s+)?)?(?:respaldad|verificad|"
       r"confirmad|sustentad|fundamentad|corroborad|documentad)[oa]s?\b"
       r"|\bsin\s+(?:ningún\s+|ninguna\s+)?(?:respaldo|fundamento|evidencia|fuente|sustento|pruebas?)\b"
       r"|\bno\s+(?:aparece|aparecen|figura|figuran|consta|constan)\s+en\b"
       r"|\b(?:es|son|está|están|parece|parecen)\s+(?:(?!no\b)\w+\s+)?(?:inventad[oa]s?|fabricad[oa]s?|"
       r"incorrect[oa]s?|erróne[oa]s?)\b"
       r"|\bcontradice(?:n)?\s+(?:\w+\s+){0,2}?(?:evidencia|fuentes?|pruebas?|extractos?|documentos?)\b"),
)

_NEGATOR = lazy_compile(
    r"\b(?:no|none|nothing|nobody|neither|nor|zero|without|never|free\s+(?:of|from)|absence\s+of|"
    r"not\s+(?:a\s+single|any|one)|(?:did|do|does|could|can|have|has)(?:\s*not|n't)\s+(?:find|found|see|seen|"
    r"spot|spotted|detect|detected|identify|identified|notice|noticed)|found\s+no|kein\w*|nichts|ohne|aucune?|"
    r"rien|sans|ningun[oa]?|ningún|nada|avoid(?:s|ed|ing)?|refrain(?:s|ed|ing)?\s+from|steers?\s+clear\s+of|"
    r"(?:not|n't|never)\s+(?:make|makes|made|contain|contains|include|includes|introduce|introduces|add|adds|assert|"
    r"asserts|rely\s+on|relies\s+on|use|uses)|contains\s+no)\b", _I)
_ADJACENT_NOT = lazy_compile(r"(?:\bnot|n't|\bnicht|\bpas)\s+(?:\w+ly\s+)?$", _I)
_CLAUSE_BREAK = lazy_compile(
    r"[.;:!?,()\[\]—–]|\s-\s|\b(?:and|but|however|although|though|whereas|while|yet|except|so|because|since|"
    r"und|aber|jedoch|doch|mais|et|pero|y|sino)\b", _I)
_ACK_BEFORE = lazy_compile(
    r"\b(?:flag(?:s|ged)?|mark(?:s|ed)?|label(?:s|l?ed)?|treat(?:s|ed)?|present(?:s|ed)?|list(?:s|ed)?|"
    r"identif(?:y|ies|ied)|describ(?:e|es|ed)|qualif(?:y|ies|ied)|report(?:s|ed)?|disclos(?:e|es|ed))\s+"
    r"(?:\S+\s+){1,6}?as\s+(?:being\s+|an?\s+|still\s+|possibly\s+|potentially\s+)?$"
    r"|\bcall(?:s|ed)?\s+(?:it|this|that|them|these)\s+$"
    r"|\b(?:analysis|analyst|author|draft|answer|response|summary|text|writer|it|they)\s+"
    r"(?:(?:\w+ly|itself|also)\s+)*(?:acknowledg(?:e|es|ed)|admit(?:s|ted)?|note(?:s|d)?|state(?:s|d)?|says?|said|"
    r"concede(?:s|d)?|disclose(?:s|d)?|warn(?:s|ed)?|explain(?:s|ed)?|point(?:s|ed)?\s+out|mention(?:s|ed)?|"
    r"caveat(?:s|ed)?|report(?:s|ed)?|writes?|wrote|flag(?:s|ged)?|hedge(?:s|d)?)\s+that\s+(?:\S+\s+){0,6}?$", _I)
_ACK_AFTER = lazy_compile(
    r"^[^.;!?]*?\b(?:as|which)\s+(?:the\s+)?(?:analysis|analyst|author|draft|answer|text|it)\s+"
    r"(?:(?:\w+ly|itself|also)\s+)*(?:acknowledges|admits|concedes|notes|flags|marks|discloses)\b", _I)
#: the analysis abstaining where the evidence is silent, reported by the verifier: "it leaves the year
#: open, as it is not in the evidence", "where the evidence is silent on X, the analysis says so"
_ABSTENTION = lazy_compile(
    r"\b(?:leaves?|left)\s+(?:\S+\s+){0,4}?(?:open|unstated|unspecified|blank|undetermined|unanswered)\b"
    r"|\b(?:does|did)\s+not\s+(?:claim|assert|guess|invent|speculate|commit\s+to)\b"
    r"|\b(?:refrains?|refrained|declines?|declined|withholds?|withheld|abstains?|abstained)\b"
    r"|\bcorrectly\s+(?:omits|leaves|avoids|declines|withholds|hedges|flags|marks|notes|says)\b"
    r"|\b(?:says|said|states|stated|notes|noted|acknowledges|acknowledged|admits|admitted)\s+(?:so|as\s+much)\b"
    r"|\b(?:flags|flagged|marks|marked|labels|labelled|labeled)\s+(?:it|this|that|them)\b", _I)
#: words that cut an abstention off from a failure in the same sentence ("avoids X but Y is unsupported")
_CONTRAST = lazy_compile(
    r"\b(?:but|however|although|though|yet|except|while|whereas|and|also|still|nonetheless|nevertheless|"
    r"aber|jedoch|mais|pero)\b", _I)
_COVERAGE_GAP = lazy_compile(r"\bcoverage[- ]gaps?\b", _I)
_NO_COVERAGE_GAP = lazy_compile(r"\b(?:no|without|lacks?|missing|omits?)\s+(?:a\s+|any\s+)?coverage[- ]gaps?\b", _I)
_ALTERNATIVE_BEFORE = lazy_compile(
    r"(?:pass(?:ed)?|verified)[\s*_`'\"”“]*(?:/|\||\bor|\boder|\bou|\bo)[\s*_`'\"”“]*(?:verdict\s*[:：]?[\s*_`'\"”“]*)?$",
    _I)
_ALTERNATIVE_AFTER = lazy_compile(
    r"^[\s*_`'\"”“]*(?:/|\||or\b|oder\b|ou\b)[\s*_`'\"”“]*(?:verdict\s*[:：]?\s*)?pass", _I)
_NONE_LIKE = lazy_compile(
    r"^(?:there\s+(?:are|is|were)\s+)?(?:none|nothing|n/?a|nil|zero|0|no|keine?r?|nichts|aucune?|rien|ningun[oa]?|"
    r"ningún|nada)\b(?:\s+(?:found|identified|detected|noted|spotted|so\s+far|at\s+all|here|seen|claims?|issues?|"
    r"problems?|items?|figures?|specifics?|findings?|failures?|gefunden|trouvée?s?|encontrad[oa]s?|"
    r"(?:out\s+)?of\s+\d+))*"
    r"\s*(?:[.;,!:—–\-(].*)?$", _I)
_INLINE_QUOTE = lazy_compile(r"[\"“„«]([^\"“”„«»\n]{6,400})[\"”“»]")
_HEADING_MARK = lazy_compile(r"^\s{0,3}#{1,6}\s+")
_LIST_MARK = lazy_compile(r"^\s*(?:[-*•+]|\d{1,3}[.)]|\(\w{1,3}\))\s+")
_WHOLE_BOLD = lazy_compile(r"^\s*(?:\*\*|__)[^*_\n]+(?:\*\*|__)\s*:?\s*$")
_EMPHASIS = lazy_compile(r"[*`]+|(?<!\w)_+|_+(?!\w)")
_SENTENCE_END = lazy_compile(r"[.;!?]")
_LABEL_MAX_CHARS = 60


def normalize(line: str) -> str:
    """A line without markdown: heading marks, list markers, emphasis and code ticks removed."""
    text = _HEADING_MARK.sub("", line.strip())
    text = _LIST_MARK.sub("", text)
    return _EMPHASIS.sub("", text).strip().rstrip("#").strip()


def _is_heading(line: str) -> bool:
    return bool(_HEADING_MARK.match(line) or _WHOLE_BOLD.match(line))


def _is_section_header(line: str) -> bool:
    return _is_heading(line) or normalize(line).endswith((":", "："))


def _collapse(text: str) -> str:
    return " ".join(_EMPHASIS.sub("", text).split()).lower()


def _mask_quoted_spans(text: str, quoted_blob: str) -> str:
    """Inline quotations copied verbatim from the texts the verifier was shown: blanked."""
    if not quoted_blob:
        return text
    def blank(match: re.Match[str]) -> str:
        return " " * len(match.group(0)) if _collapse(match.group(1)) in quoted_blob else match.group(0)
    return _INLINE_QUOTE.sub(blank, text)


def _clause_before(text: str, start: int) -> str:
    before = text[:start]
    breaks = list(_CLAUSE_BREAK.finditer(before))
    return before[breaks[-1].end():] if breaks else before


def none_like(text: str) -> bool:
    """``none``, ``n/a``, ``0``, ``None found.``, ``keine``, ``aucun`` ... (or nothing at all)."""
    stripped = normalize(text)
    return not stripped or bool(_NONE_LIKE.match(stripped))


def _benign(norm: str, match: re.Match[str]) -> bool:
    """A match in prose that does not say a failure: negated, or a gap the analysis acknowledges or
    abstains on (with no contrast word between the cue and the match)."""
    start, end = match.span()
    clause = _clause_before(norm, start)
    if _NEGATOR.search(clause) or _ADJACENT_NOT.search(clause):
        return True
    if _ACK_BEFORE.search(clause) or _ACK_AFTER.match(norm[end:]):
        return True
    before = _SENTENCE_END.split(norm[:start])[-1]
    after = _SENTENCE_END.split(norm[end:], 1)[0]
    if any(not _CONTRAST.search(before[cue.end():]) for cue in _ABSTENTION.finditer(before)) or \
            any(not _CONTRAST.search(after[:cue.start()]) for cue in _ABSTENTION.finditer(after)):
        return True
    sentence = before + match.group(0) + after
    return bool(_COVERAGE_GAP.search(sentence)) and not _NO_COVERAGE_GAP.search(sentence)


def _section_items(own: Sequence[str | None], start: int, stop: Collection[int], *,
                   blank_ends: bool) -> list[tuple[int, str]]:
    items: list[tuple[int, str]] = []
    for j in range(start + 1, len(own)):
        line = own[j]
        if line is None:
            continue
        if not line.strip():
            if blank_ends and items:
                break
            continue
        if j in stop or _is_section_header(line):
            break
        items.append((j, normalize(line)))
    return items


def _signal(line: int, fp: FailurePattern, matched: str, text: str) -> FailureSignal:
    return FailureSignal(line=line, signal=fp.name, matched=matched, text=text,
                         verdict_token=fp.name in VERDICT_TOKEN_PATTERNS)


def _line_signals(own: Sequence[str | None], i: int, skip: Collection[int], norm: str,
                  patterns: Sequence[FailurePattern]) -> list[FailureSignal]:
    """The failure signal(s) of own line ``i`` (``norm``: the line normalized, quoted spans
    masked), by the ``patterns`` that can match: the line itself, or the items under a failing
    category.

    A match before a label's colon (``Unsupported claims: ...``) or in a heading (``## UNSUPPORTED
    CLAIMS``) names a category: it fails through its value or the items listed under it, and not
    when they are all ``none``. A category with nothing under it at all is read as prose."""
    line = own[i] or ""
    heading = _is_heading(line)
    colon = min((k for k in (norm.find(":"), norm.find("：")) if k > 0), default=-1)
    for fp in patterns:
        for match in fp.pattern.finditer(norm):
            if _ALTERNATIVE_BEFORE.search(norm[:match.start()]) or _ALTERNATIVE_AFTER.match(norm[match.end():]):
                continue  # "PASS/FAIL", "PASS or FAIL": a restated instruction, not a verdict
            if 0 < colon <= _LABEL_MAX_CHARS and match.end() <= colon + 1:
                label, value = norm[:colon], norm[colon + 1:].strip()
                items = [] if value else _section_items(own, i, skip, blank_ends=not heading)
            elif heading and (colon < 0 or match.start() < colon):
                label, value = norm, ""
                items = _section_items(own, i, skip, blank_ends=False)
            else:
                label, value, items = "", "", []
            if value or items:
                if _NEGATOR.search(_clause_before(label, match.start())):
                    continue
                if value:
                    if none_like(value):
                        continue
                    return [_signal(i + 1, fp, match.group(0), norm)]
                failing = [(j, item) for j, item in items if not none_like(item)]
                if not failing:
                    continue
                title = label.rstrip(":： ").strip()
                return [_signal(j + 1, fp, match.group(0), f"{title}: {item}") for j, item in failing]
            if _benign(norm, match):
                continue
            return [_signal(i + 1, fp, match.group(0), norm)]
    return []


def find_failure_signals(own: Sequence[str | None], *, skip: Collection[int] = (),
                         quoted: Sequence[str] = ()) -> list[FailureSignal]:
    """Every own line (``None`` = masked) that names a failure, in order; ``skip``: indexes of lines
    that are not prose (the standalone verdict lines, a supplement-request block)."""
    quoted_blob = " \n ".join(_collapse(q) for q in quoted if q)
    norms = {i: _mask_quoted_spans(normalize(line), quoted_blob) for i, line in enumerate(own)
             if line is not None and i not in skip and line.strip()}
    # One literal test per pattern over all the lines at once (each line is a substring of the
    # join, so a pattern ruled out here could match none of them); the lines then run only the
    # patterns left, in their order: the same signals, without 16 tests per line.
    joined = "\n".join(norms.values())
    patterns = [fp for fp in FAILURE_PATTERNS if not fp.pattern.cannot_match(joined)]
    found: dict[int, FailureSignal] = {}
    if not patterns:
        return []
    for i, norm in norms.items():
        if i in found:
            continue
        for signal in _line_signals(own, i, skip, norm, patterns):
            found.setdefault(signal.line - 1, signal)
    return [found[k] for k in sorted(found)]
