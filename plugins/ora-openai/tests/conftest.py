import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fault_server import FaultServer  # noqa: E402

TRANSPORTS = ["aiohttp", "httpcore"]


@pytest.fixture(scope="module", params=TRANSPORTS)
def transport_kind(request: pytest.FixtureRequest) -> str:
    """Each transport of the ``transport`` option in turn (the fault tests run under both)."""
    return request.param


@pytest.fixture(scope="module")
def fault_server(transport_kind: str) -> Iterator[FaultServer]:
    # one server per transport: request counts per prefix stay per run
    with FaultServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_breakers() -> Iterator[None]:
    from ora_openai.breaker import reset_breakers

    reset_breakers()
    yield
    reset_breakers()
