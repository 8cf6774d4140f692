"""Running the app under uvicorn: the settings into ``ORA_SERVE_SETTINGS`` for the workers, the
configuration checked once here (a malformed one fails before any port is bound), then ``uvicorn.run``
on the factory with ``workers`` processes. Uvicorn's own access log is off: ``ora.serve.access``
writes one line per request without the prompt (``app.AccessLog``)."""

from __future__ import annotations

import os
from typing import Any

from .settings import SETTINGS_ENV, ServeSettings

#: Seconds uvicorn waits for requests in flight after the board's own grace (its cancellations and the
#: traces closing) before it cancels what is left.
CLOSE_MARGIN_S = 5.0


def run_server(settings: ServeSettings, **uvicorn_options: Any) -> None:
    import uvicorn

    from .app import open_ora

    os.environ[SETTINGS_ENV] = settings.to_env()
    open_ora(settings)  # the configuration and the plugins' tables, checked before a worker starts
    uvicorn.run("ora_serve.app:create_app", factory=True, host=settings.host, port=settings.port,
                workers=settings.workers, access_log=False, log_level="info",
                timeout_graceful_shutdown=int(settings.shutdown_grace_s + CLOSE_MARGIN_S) + 1, **uvicorn_options)
