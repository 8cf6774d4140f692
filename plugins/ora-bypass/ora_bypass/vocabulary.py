"""The bypass vocabulary: phrases that say "answer directly, do not run the analysis".

Categories (seed 000, failure #1): greetings, time and date questions with their variants,
references to earlier conversation, grammar and spelling fixes, explicit opt-outs. Greetings
are *weak*: "Hi, who benefits from X?" is not a bypass; a prompt that is only a greeting is
(Stage 0 decides from the strengths). Everything else is *strong*.
"""

from __future__ import annotations

VOCABULARY: dict[str, tuple[str, tuple[str, ...]]] = {
    "greeting": ("weak", (
        "hello", "hello there", "hi", "hi there", "hey", "hey there", "hiya", "howdy", "greetings",
        "good morning", "good afternoon", "good evening", "good day", "how are you",
        "how's it going", "thanks", "thank you", "thank you very much", "cheers",
    )),
    "time_date": ("strong", (
        "what time is it", "what time is it now", "what time is it right now", "what's the time",
        "what is the time", "what's the time now", "what is the time now", "time right now",
        "the time now", "current time", "tell me the time", "do you know the time",
        "what day is it", "what day is it today", "what day is today", "what's the date",
        "what is the date", "what's the date today", "what is the date today", "what's today's date",
        "what is today's date", "today's date", "what date is it", "what date is today",
        "current date", "what day of the week is it", "what year is it", "what month is it",
        "what's the day today", "date today", "got the time", "what's the current time",
        "what is the current time", "what's the current date", "what is the current date", "what date is it today",
        "which day is it", "what hour is it",
        # German and French
        "wie spät ist es", "wie viel uhr ist es", "welcher tag ist heute", "welches datum ist heute",
        "den wievielten haben wir", "welches datum haben wir", "quelle heure est-il", "quel jour sommes-nous",
        "quel jour est-on", "on est quel jour", "quelle est la date", "quelle date sommes-nous",
    )),
    # Each phrase names the conversation with the assistant itself ("we", "you", "our", "I said"),
    # so an analytical prompt about someone else's conversation ("the last conversation between
    # Kennedy and Khrushchev", "what the delegates talked about") does not match.
    "earlier_conversation": ("strong", (
        "as i said earlier", "as i said before", "as i mentioned", "as i mentioned earlier",
        "as i mentioned before", "as i told you", "as i told you before", "like i said", "like i said before",
        "i told you earlier", "i told you before", "i mentioned earlier", "i mentioned before",
        "as we discussed", "as we discussed earlier", "as we discussed before",
        "you said earlier", "you said before", "earlier you said", "you mentioned earlier",
        "you mentioned before", "earlier you mentioned", "you told me earlier", "you told me before",
        "what you said earlier", "what you said before", "what you just said", "you just said",
        "remind me what you said",
        "remind me what i said", "what did you say earlier", "what did i tell you",
        "earlier in this conversation", "earlier in our conversation", "what did i just say",
        "what did you just say", "what did i ask earlier", "repeat that", "repeat your last answer",
        "your last answer", "your previous answer", "your earlier answer", "remind me what we",
        "go back to what we discussed", "what were we talking about", "what we were talking about",
        "what we talked about", "what we discussed", "what did we talk about", "what did we discuss",
        "what have we discussed", "what have we talked about", "we talked about earlier",
        "we talked about before", "we talked about last time", "we discussed earlier", "we discussed before",
        "we discussed last time", "our last conversation", "our previous conversation",
        "our earlier conversation", "our last chat", "our previous chat", "our last session",
        "our previous session", "our last discussion", "last time we talked", "last time we spoke",
        "last time we chatted", "when we last talked", "when we last spoke",
        # German and French
        "wie ich schon sagte", "wie ich bereits sagte", "wie ich schon erwähnt habe", "worüber wir gesprochen haben",
        "was wir besprochen haben", "unser letztes gespräch", "unserem letzten gespräch",
        "du hast vorhin gesagt", "du hast vorhin erwähnt", "sie haben vorhin gesagt",
        "comme je l'ai dit", "comme je te l'ai dit", "comme je vous l'ai dit", "comme je disais",
        "notre dernière conversation", "notre conversation précédente", "ce dont nous avons parlé",
        "ce dont on a parlé", "de quoi avons-nous parlé", "tu as dit tout à l'heure", "vous avez dit tout à l'heure",
        "tu as mentionné tout à l'heure",
    )),
    "grammar_fix": ("strong", (
        "fix the grammar", "fix my grammar", "fix the spelling", "fix my spelling",
        "correct the grammar", "correct my grammar", "correct the spelling", "correct my spelling",
        "check my spelling", "check the spelling", "check my grammar", "check the grammar",
        "proofread", "proofread this", "proof-read", "spell check", "spell-check", "spellcheck",
        "grammar check", "fix the typos", "fix my typos", "fix typos", "fix the punctuation",
    )),
    "opt_out": ("strong", (
        "no analysis", "no analysis needed", "no analysis required", "don't analyze",
        "don't analyse", "do not analyze", "do not analyse", "without analysis",
        "without any analysis", "skip the analysis", "no need to analyze", "no need to analyse",
        "just answer", "just answer the question", "quick answer", "no deep dive", "keep it simple",
    )),
}

#: Categories the defensive Stage 1 re-scan uses on Phase A's cleaned (expanded) prompt: only
#: explicit questions and requests that an expansion cannot plausibly manufacture by accident.
RESCAN_CATEGORIES: tuple[str, ...] = ("time_date", "grammar_fix", "earlier_conversation")


def phrases(categories: tuple[str, ...] | None = None) -> dict[str, tuple[str, str]]:
    """``{normalised phrase: (category, strength)}`` for the chosen categories (default all)."""
    from ora_core.api.text import normalize_phrase

    out: dict[str, tuple[str, str]] = {}
    for category, (strength, words) in VOCABULARY.items():
        if categories is not None and category not in categories:
            continue
        for word in words:
            out[normalize_phrase(word)] = (category, strength)
    return out
