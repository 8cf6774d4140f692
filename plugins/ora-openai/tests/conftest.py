import socket
import sys
import time
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


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A port whose listener never accepts and whose backlog is full: a connect there hangs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))  # EINPROGRESS: the connect waits in the backlog
        fillers.append(filler)
    time.sleep(0.05)
    yield port
    for s in (*fillers, listener):
        s.close()
