import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fault_server import FaultServer  # noqa: E402


@pytest.fixture(scope="module")
def fault_server() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_breakers() -> Iterator[None]:
    from ora_openai.breaker import reset_breakers

    reset_breakers()
    yield
    reset_breakers()
