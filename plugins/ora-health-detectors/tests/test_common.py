"""What the detectors share: the word count that stops at the minimum."""

from __future__ import annotations


def test_has_words_agrees_with_the_full_count_at_every_minimum() -> None:
    from ora_health_detectors.common import has_words, word_count

    for text in ["", "one", "one two three", "It's a well-known fact — 3 items, e.g. apples.", "word " * 50]:
        total = word_count(text)
        for minimum in range(0, total + 3):
            assert has_words(text, minimum) is (total >= minimum), (text, minimum)
