"""Fixtures of the ora-serve tests: ``serve(**config)`` starts a real ``ora serve`` (serve_harness.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside the tests (serve_harness)
from serve_harness import ServeFactory  # noqa: E402


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[ServeFactory]:
    factory = ServeFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.stop_all()
