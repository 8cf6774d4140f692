"""Request shapes: what kind of request a prompt is by its form, whatever its topic (issue 25).

A mode's vocabulary says what a prompt is *about*; a shape says what the user *asks for*: a pick
between options they name, the best case for a position, what a term means, a joke, a claim to
check, or work on something the system was never given. Each shape is one strong signal of kind
``request_shape`` on the cleaned prompt, named for the shape, ``matched`` the words that show it.
Modes opt in by front matter (``shapes: {claims: [...], requires: [...]}``); the engine acts on
the signals as ``docs/hooks.md`` states. English, German and French, like the bundled modes.

The shapes:

- ``choice``: two options joined by "or" / "vs" / "oder" / "ou" (or "between ... and" / "zwischen
  ... und" / "entre ... et" with a verb of choosing), in a request that is the user's own (I, we,
  our ...), asks for a pick or advice (which, your pick, recommend, better ...), or is a question
  made of the options alone ("Buy now or wait?": no interrogative or auxiliary opens it);
- ``case-for``: the best, strongest, most convincing argument, case, defence or version of a
  position, or an order to argue or defend one as well as possible;
- ``definition``: what a term means or is for ("what does X mean", "what is the 'X'", "the term",
  "what is the purpose of", "was bedeutet", "wofür steht", "que veut dire", "à quoi sert");
- ``creative``: a request for a short made-up text: a joke, pun, riddle, limerick, slogan,
  tagline, motto, toast, tongue twister, caption, rhyme, poem or a name for something (not a
  question *about* one);
- ``beneficiary``: a question about who gains, profits, pays or is behind something ("which lobbies
  are behind ...", "who ends up richer", "wer verdient an", "à qui profite");
- ``context-reference``: a short request that leans on something shared earlier that the prompt
  does not contain ("the usual", "like last time", "the changes we discussed", "wie immer",
  "comme d'habitude"), with no text of its own to work on;
- ``assertion``: a checkable statement about the world: a yes/no question ("Is it true that ...",
  "Does X really ..."), a reported claim ("my uncle says ..."), a statement handed over to be
  checked ("check this: ..."), or a bare declarative sentence about the world (not about the
  speaker). A request for an argument, a definition, a creative text or a choice is not a claim
  to check: ``assertion`` is only given when none of those shapes is;
- ``claim-check``: with ``assertion``, when the user asks outright whether it is true ("is it
  true that", "true or false", "accurate?", "stimmt es", "est-ce vrai") or hands it over to be
  checked ("check this: ..."), or asks about a reported claim ("my uncle says ... How much truth
  is in that?").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ora_core.api import Signal

_I = re.I | re.U


def _rx(*parts: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in parts), _I)


_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)?|\d+", re.U)

# --- choice --------------------------------------------------------------------------------------
_OR = _rx(r"\b(?:or|vs\.?|versus|oder|ou)\b")
_NOT_A_CHOICE_OR = _rx(r"\bmore or less\b", r"\bor so\b", r"\bor (?:something|anything|other|two)\b",
                       r"\btrue or false\b", r"\bvrai ou faux\b", r"\bright or wrong\b", r"\bmehr oder weniger\b",
                       r"\bplus ou moins\b", r"\bwahr oder falsch\b")
_BETWEEN = _rx(r"\b(?:choos\w*|decid\w*|pick\w*|torn|split|hesitat\w*)\b.{0,40}\bbetween\b.{1,60}\band\b",
               r"\b(?:schwanken|entscheiden|wählen|überlegen|schwanke|zögern)\b.{0,40}\bzwischen\b.{1,60}\bund\b",
               r"\bzwischen\b.{1,60}\bund\b.{1,60}\b(?:schwanken|entscheiden|wählen)\b",
               r"\b(?:hésit\w*|choisir|trancher)\b.{0,40}\bentre\b.{1,60}\bet\b",
               r"\bentre\b.{1,60}\bet\b.{1,60}\b(?:lequel|laquelle|choisir|choisirais)\b")
#: A question that opens with an interrogative or an auxiliary asks about something; one that does
#: not ("Tea or coffee?", "Buy now or wait?") offers the options as the question.
_ASKS_ABOUT = _rx(r"^\W*(?:what|what's|whats|how|why|who|whom|whose|which|when|where|is|are|was|were|do|does|did|can|"
                  r"could|has|have|will|would|was|wie|warum|wieso|wer|wann|wo|welche\w*|ist|sind|que|qu'est-ce|quoi|"
                  r"comment|pourquoi|qui|quand|où|quel\w*|est-ce)\b")
_OWN = _rx(r"\b(?:i|i'm|we|we're|our|my|us|me)\b", r"\b(?:ich|wir|unser\w*|mein\w*|uns)\b",
           r"\b(?:je|j'\w+|nous|notre|nos|mon|ma|mes|on)\b")
_ADVICE = _rx(r"\bwhich\b", r"\byour (?:pick|take|call|advice|view|opinion)\b",
              r"\b(?:recommend|advise|advice|suggest)\w*\b",
              r"\b(?:better|smarter|wiser|best)\b", r"\bmakes? (?:more )?sense\b", r"\bwould you\b", r"\bshould\b",
              r"\bthoughts\b", r"\bwhere do you land\b", r"\bwhat do you (?:think|say)\b", r"\bgo (?:for|with)\b",
              r"\bwelche\w*\b", r"\b(?:rätst|empfiehlst|empfehlen|rat)\b",
              r"\b(?:besser|sinnvoller|klüger|vernünftiger)\b",
              r"\bwürdest\b", r"\blequel\b", r"\blaquelle\b", r"\b(?:conseill\w*|recommand\w*)\b", r"\bton avis\b",
              r"\bvotre avis\b", r"\bmieux\b", r"\bplus (?:raisonnable|judicieux|sage)\b", r"\bchoisirais\b",
              r"\bqu'en penses\b")

# --- case-for ------------------------------------------------------------------------------------
_GOOD = (r"best|strongest|stronger|most (?:compelling|convincing|persuasive|powerful|serious|intelligent|charitable|"
         r"sophisticated|forceful|solid)|smartest|ablest|sharpest|full strength|best possible|most (?:\w+ )?reasoned")
_ARGUMENT = (r"argument|arguments|case|defen[cs]e|reasoning|version|position|side|advocates?|defenders?|"
             r"supporters?|proponents?|justification|rationale")
_CASE_FOR = _rx(
    rf"\b(?:{_GOOD})\b.{{0,40}}\b(?:{_ARGUMENT})\b",
    rf"\b(?:{_ARGUMENT})\b.{{0,30}}\bat (?:its|their) (?:best|strongest|most \w+)\b",
    rf"\b(?:{_ARGUMENT})\b.{{0,30}}\bat full strength\b",
    rf"\b(?:{_ARGUMENT})\b.{{0,30}}\b(?:its|their) (?:strongest|best|most \w+) (?:form|version|shape)\b",
    r"\b(?:argue|defend|make|put|present)\b.{0,50}\bas (?:well|convincingly|persuasively|strongly|powerfully|"
    r"forcefully|best) as\b",
    r"\b(?:argue|plead)\b.{0,40}\b(?:on (?:its|their|his|her) behalf|in (?:its|their) (?:favou?r|defen[cs]e))\b",
    r"\bargue (?:its|their|the other|the opposing) side\b", r"\b(?:convince|persuade) me\b",
    r"\bwhat would an? (?:\w+ )?(?:sharp|smart|intelligent|clever|thoughtful|good) (?:advocate|defender|supporter|"
    r"proponent)\b",
    r"\bwhy (?:someone|a person|people) (?:intelligent|smart|thoughtful|reasonable)\b.{0,20}\b(?:support|believe|"
    r"favou?r|hold)\b",
    r"\b(?:stärkste|stärksten|überzeugendste|überzeugendsten|beste|besten|bestmögliche|bestmöglichen|klügste|"
    r"klügsten)\b.{0,30}\b(?:argument|argumente|begründung|verteidigung|position|befürworter|gründe)\b",
    r"\b(?:verteidige|vertritt|vertrete|argumentiere)\b",
    r"\bspricht am (?:stärksten|überzeugendsten)\b", r"\bsprechen am (?:stärksten|überzeugendsten)\b",
    r"\b(?:meilleur|meilleure|meilleurs|meilleures)\b.{0,30}\b(?:argument|arguments|défense|version|position|"
    r"plaidoyer)\b",
    r"\b(?:argument|arguments|défense|version|position)\b.{0,30}\bles? plus (?:solides?|convaincante?s?|forte?s?|"
    r"habiles?|intelligente?s?)\b",
    r"\bla (?:version|défense|position) la plus\b",
    r"\b(?:défends|défendez|défendre|plaide|plaidez)\b.{0,40}\b(?:possible|mieux|solidement|convaincante?)\b",
    r"\b(?:défends|défendez|plaide|plaidez)\b",
)

# --- definition ----------------------------------------------------------------------------------
_QUOTED = re.compile(r"['\"\u2018\u201c\u00ab]\s?([^'\"\u2019\u201d\u00bb]{2,40}?)\s?['\"\u2019\u201d\u00bb]", re.U)
_WH_DEFINE = _rx(r"^(?:\W*)(?:what|what's|whats|how|which|was|wofür|wozu|que|qu'est-ce|quoi|à quoi|le terme)\b")
_DEFINITION = _rx(
    r"\bwhat (?:does|do|did) .{1,60}\b(?:mean|stand for|refer to|signify|denote)\b",
    r"\bwhat (?:is|'s|does) (?:that|this|it) (?:telling|tell|saying|say|mean)\w*\b",
    r"\bmeaning of\b", r"\bdefine\b", r"\bdefinition\b", r"\bthe (?:term|word|notion|expression)\b",
    r"\bin (?:your|its|their|ora's) (?:terminology|vocabulary|jargon|terms)\b",
    r"\b(?:purpose|job|role) of\b", r"\bwhat (?:is|'s) (?:the )?(?:purpose|job|role|point)\b",
    r"\bwhat counts as\b", r"\bhow (?:am i|should i|do i|do you|should we) (?:\w+ )?(?:supposed to )?"
    r"(?:read|interpret|understand)\b",
    r"\bwhat (?:is|'s) .{1,40}\bfor\s*\?", r"\bsupposed to capture\b",
    r"\bwas (?:bedeutet|heißt|meint|meinst)\b", r"\bwofür steht\b", r"\bbegriff\w*\b", r"\bgemeint\b",
    r"\bque (?:veut dire|signifie|désigne|représente)\b", r"\bqu'est-ce que (?:veut dire|signifie)\b",
    r"\bà quoi sert\b", r"\ble (?:terme|mot)\b", r"\bdésigne quoi\b", r"\bsignifie\b", r"\bveut dire\b",
)

# --- creative ------------------------------------------------------------------------------------
_CREATIVE_THING = _rx(
    r"\b(?:joke|jokes|pun|puns|riddle|riddles|limerick|limericks|slogan|slogans|tagline|taglines|motto|toast|"
    r"tongue twister|caption|one-liner|one liner|knock-knock|rhyme|rhymes|haiku|poem|jingle|quip|wisecrack|sonnet|"
    r"verse|verses|lyrics|lullaby|ode)\b",
    r"\bsomething funny\b", r"\bmake me laugh\b", r"\bfunny (?:line|story|caption|quote)\b",
    r"\bnames? for (?:my|our|a|an|the|his|her|their)\b", r"\bname (?:my|our) \w+",
    r"\bnamen für\b", r"\bnoms? pour (?:mon|ma|mes|notre|nos|un|une|le|la)\b",
    r"\b(?:witz|witze|kalauer|wortspiel|rätsel|spruch|werbespruch|slogan|motto|trinkspruch|reim|gedicht|"
    r"zungenbrecher|scherz)\b", r"\bbring mich zum lachen\b", r"\blustige[nrs]? (?:spruch|geschichte|satz)\b",
    r"\b(?:blague|blagues|devinette|devinettes|calembour|jeu de mots|slogan|devise|virelangue|rime|poème|"
    r"charade|histoire drôle|histoires drôles)\b", r"\bfais-moi rire\b",
)
_ABOUT_IT = _rx(r"^\W*(?:why|how|who|when|where|warum|wieso|weshalb|wie|wer|wann|wo|pourquoi|comment|qui|quand|où)\b",
                r"^\W*what (?:is|are|was|were) (?:the )?(?:history|origin|difference|meaning|point)\b",
                r"\b(?:history|origin|origins|etymology|definition) of\b")

# --- beneficiary ---------------------------------------------------------------------------------
_GAIN = (r"gains?|profits?|benefits?|wins?|loses?|pays?|earns?|makes? money|cashes? in|stands? to (?:gain|lose)|"
         r"stands? to make money|(?:is|are) (?:better|worse) off|comes? out (?:ahead|on top|richer)|"
         r"ends? up (?:richer|poorer|better off|worse off)|is behind|are behind|"
         r"lobb(?:y|ies) for|funds?|bankrolls?|carries the costs?|bears? the costs?|foots? the bill|gets? rich\w*")
_BENEFICIARY = _rx(
    rf"\b(?:who|which (?:\w+ ){{0,2}}\w+)\b(?: \w+)? (?:really |actually |truly )?(?:{_GAIN})\b",
    r"\b(?:lobby|lobbies|interest groups?|industries|companies|players|parties) (?:are |is )?(?:behind|pushing|"
    r"funding)\b",
    r"\b(?:wer|welche \w+)\b(?: \w+)? (?:verdient|profitiert|gewinnt|verliert|zahlt|bezahlt|steckt hinter)\b",
    r"\bwem (?:nützt|nützen|nutzt|nutzen|dient|dienen|bringt)\b",
    r"\b(?:qui|à qui)\b(?: \w+)? (?:profite|profitent|gagne|gagnent|perd|perdent|paie|paye|paient|tire profit|"
    r"s'enrichit|s'enrichissent|finance)\b",
)


def beneficiary(text: str) -> str | None:
    return _hit(_BENEFICIARY, text)


# --- context-reference ---------------------------------------------------------------------------
_CONTEXT = _rx(
    r"\b(?:the|as) usual\b", r"\bthe (?:normal|usual|regular) way\b", r"\bthe usual (?:way|people|format|place)\b",
    r"\blike (?:last time|before|we (?:said|agreed|discussed|planned))\b",
    r"\b(?:same|exactly) (?:as|like) (?:last time|before|yesterday|usual|last week)\b",
    r"\b(?:as|like) (?:the )?last (?:time|round|one)\b",  # "the same thing as last time", "like the last one"
    r"\b(?:the way|how) (?:you|we|i) did (?:it |that |this )?(?:before|last time)\b",
    r"\b(?:we|you and i) (?:talked about|discussed|agreed(?: on)?|planned|started|keep|decided(?: on)?)\b",
    r"\b(?:as|like) (?:we|you) (?:agreed|discussed|planned|said)\b",
    r"\bwhere we left off\b", r"\bour (?:earlier|last|previous) (?:discussion|conversation|chat|call|meeting)\b",
    r"\b(?:from|in|after) (?:yesterday's|today's|this morning's|last week's|the) (?:call|meeting|chat|discussion)\b",
    r"\bthe (?:template|file|document|list|format|draft|thing|numbers|figures|slides?|changes|edits|people) "
    r"(?:i|we|you|\w+) (?:gave|sent|shared|like|use|keep|started|made|wanted|asked for|mentioned)\b",
    r"\bthe (?:format|way) (?:i|my boss|we) (?:like|want|asked)\b",
    r"\bthe way (?:my|our|the) \w+ (?:asked|wanted|said)\b",
    r"\bdo (?:that|it|this|the same) again\b", r"\bthe people from\b", r"\bthe thing for\b",
    r"\bthat (?:document|file|report|thing|spreadsheet)\b", r"\b(?:option|plan|version) [a-d1-3] from\b",
    r"\bwie (?:immer|üblich|gewohnt|besprochen|vereinbart|abgesprochen)\b",
    r"\bwie (?:beim )?letzte[ns]? (?:mal|woche)\b", r"\bwie wir es (?:besprochen|vereinbart|abgesprochen)\b",
    r"\bvon gestern\b", r"\bdas übliche\b", r"\bdie leute von\b",
    r"\bcomme d'habitude\b", r"\bla dernière fois\b", r"\bcomme (?:convenu|prévu|on a dit)\b",
    r"\bqu'on a (?:prévue?s?|dite?s?|convenue?s?|discutée?s?)\b", r"\bhabituel(?:le)?s?\b", r"\bd'hier\b",
)
_PAYLOAD = re.compile(r"[:\u00ab\"\u201c]\s*\S+(?:\s+\S+){3,}", re.U)  # the text to work on is in the prompt
CONTEXT_MAX_WORDS = 20

# --- assertion -----------------------------------------------------------------------------------
_YES_NO = _rx(r"^\W*(?:is|are|was|were|do|does|did|can|could|has|have|will|would)\b(?! you\b)(?! i\b)"
              r"(?!\s+(?:ist|sind|bedeutet|heißt|macht|kostet|passiert)\b)",
              r"^\W*(?:ist|sind|war|waren|stimmt|gibt|kann|können|hat|haben|hilft|macht|führt|verursacht|tötet|"
              r"töten|schadet|schaden)\b",
              r"^\W*est-(?:ce|il|elle)\b", r"\b\w+-t-(?:il|elle|on)\b", r"\b\w+-(?:ils|elles)\b")
_TRUTH = _rx(r"\bis (?:it|that|this) (?:really )?(?:true|accurate|right|correct)\b", r"\breally\b[^.!]*\?",
             r"\baccurate\s*\?", r"\bright\s*\?", r"\bholds? up\b", r"\btruth in\b", r"\btrue or false\b",
             r"\bmyth\b", r"\bstimmt es\b", r"\bwirklich\b", r"\bist (?:es|das) wahr\b", r"\bvraiment\b",
             r"\best-ce vrai\b", r"\bc'est vrai\b", r"\best-il vrai\b", r"\bvrai ou faux\b")
_REPORTED = _rx(r"\b(?:says|said|told me|tells me|claims|claimed|posted|heard|read) that\b",
                r"\b(?:says|claims|insists|swears)\b", r"\bapparently\b", r"\baccording to\b",
                r"\b(?:sagt|behauptet|meint|habe gehört|gelesen)\b", r"\b(?:dit que|prétend|paraît-il|j'ai lu|"
                r"on dit)\b")
_HANDED = _rx(r"\b(?:fact-?check|check|verify|prüfe|überprüfe|vérifie|vérifiez)\b[^:]{0,30}:\s*\S+(?:\s+\S+){2,}")
_CHECK = _rx(r"\bis (?:it|that|this) (?:really |actually )?(?:true|accurate|right|correct)\b",
             r"\b(?:accurate|true|right|correct)\s*\?", r"\bholds? up\b", r"\btruth (?:in|to)\b",
             r"\btrue or false\b", r"\bmyth or\b", r"\bstimmt (?:es|das)\b", r"\bist (?:es|das) wahr\b",
             r"\bwahr oder falsch\b", r"\best-ce vrai\b", r"\bc'est vrai\b", r"\best-il vrai\b",
             r"\bvrai ou faux\b")
_IMPERATIVE = _rx(r"^\W*(?:paraphrase|rephrase|reword|shorten|convert|turn|change|polish|edit|correct|proofread|"
                  r"brainstorm|generate|plan|calculate|tell|give|show|explain|describe|list|name|write|help|make|let|"
                  r"please|summari[sz]e|compare|"
                  r"translate|draft|compose|create|rewrite|find|define|outline|argue|defend|imagine|suggest|"
                  r"recommend|play|send|do|fix|use|update|prepare|put|add|redo|finish|handle|continue|go|take|"
                  r"lay|build|present|walk|break|teach|check|verify|fact-check|hey|hi|hello|thanks|thank|good|"
                  r"bye|ok|okay)\b")
_FINITE = _rx(r"\b(?:is|are|was|were|has|have|had|causes?|caused|makes?|made|kills?|reduces?|increases?|leads?|"
              r"prevents?|cures?|helps?|harms?|does|do|did|can|will|won't|never|always|only|contains?)\b",
              r"\b(?:ist|sind|war|hat|haben|macht|führt|tötet|verursacht|enthält|hilft|schadet|immer|nie)\b",
              r"\b(?:est|sont|était|a|ont|fait|cause|provoque|tue|réduit|augmente|contient|toujours|jamais)\b")
ASSERTION_MIN_WORDS = 4


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _hit(pattern: re.Pattern[str], text: str) -> str | None:
    m = pattern.search(text)
    return m.group(0).strip() if m else None


def choice(text: str) -> str | None:
    between = _hit(_BETWEEN, text)
    if between:
        return between
    elliptical = "?" in text and not _ASKS_ABOUT.search(text)  # "Buy now or wait?": the options are the question
    for m in _OR.finditer(text):
        window = text[max(0, m.start() - 40): m.end() + 40]
        if _NOT_A_CHOICE_OR.search(window):
            continue
        if m.start() == 0 or not text[:m.start()].strip():
            continue
        if _OWN.search(text) or _ADVICE.search(text) or elliptical:
            return window.strip()
    return None


def case_for(text: str) -> str | None:
    return _hit(_CASE_FOR, text)


def definition(text: str) -> str | None:
    found = _hit(_DEFINITION, text)
    if found:
        return found
    quoted = _QUOTED.search(text)
    if quoted and _WH_DEFINE.search(text) and len(quoted.group(1).split()) <= 5:
        return quoted.group(0)
    return None


def creative(text: str) -> str | None:
    if _ABOUT_IT.search(text):
        return None
    return _hit(_CREATIVE_THING, text)


def context_reference(text: str) -> str | None:
    if len(_words(text)) > CONTEXT_MAX_WORDS or _PAYLOAD.search(text):
        return None
    return _hit(_CONTEXT, text)


def claim_check(text: str) -> str | None:
    """A statement handed over to be checked, or a question whether one is true."""
    found = _hit(_HANDED, text) or _hit(_CHECK, text)
    if found:
        return found
    if "?" in text:
        return _hit(_REPORTED, text)
    return None


def assertion(text: str) -> str | None:
    for pattern in (_HANDED, _TRUTH, _REPORTED):
        found = _hit(pattern, text)
        if found:
            return found
    first_sentence = re.split(r"(?<=[.?!])\s", text.strip(), maxsplit=1)[0]
    if "?" in first_sentence and _YES_NO.search(first_sentence):
        return first_sentence
    words = _words(text)
    if ("?" not in text and len(words) >= ASSERTION_MIN_WORDS and not _IMPERATIVE.search(text)
            and not _OWN.search(text) and _FINITE.search(text)):  # a statement about the world, not the speaker
        return "a declarative statement"
    return None


#: The shapes other than ``assertion``, in the order they are reported.
SHAPES = {"choice": choice, "case-for": case_for, "definition": definition, "creative": creative,
          "beneficiary": beneficiary, "context-reference": context_reference}


def request_shapes(text: str) -> dict[str, str]:
    """``{shape: the words that show it}`` for ``text`` (the module doc lists the shapes)."""
    found = {name: hit for name, test in SHAPES.items() if (hit := test(text))}
    if not found:
        claim = assertion(text)
        if claim:
            found["assertion"] = claim
            check = claim_check(text)
            if check:
                found["claim-check"] = check
    return found


class RequestShapeDetector:
    """One strong ``request_shape`` signal per shape of the cleaned prompt."""

    name = "request-shapes"
    kind = "request_shape"
    layer = "cleaned_prompt"
    assumes: frozenset[str] = frozenset()

    def detect(self, text: str, ctx: Any = None) -> list[Signal]:
        from ora_core.api import Signal

        out = []
        for shape, matched in request_shapes(text).items():
            start = text.find(matched)
            out.append(Signal(detector=self.name, kind=self.kind, name=shape, strength="strong",
                              matched=matched[:200], start=start if start >= 0 else None,
                              end=start + len(matched) if start >= 0 else None))
        return out
