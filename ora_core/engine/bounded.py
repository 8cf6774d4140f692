"""Calling a plugin's synchronous code with a deadline.

A retriever or a verifier is third-party code that may hang (a vector store that accepts the
connection and never answers, a verifier stuck on a lock). The engine runs such a call on a daemon
thread of its own and waits at most ``timeout_s``: past it, the turn goes on with the failure named
(a ``RetrievalTimeout``/``VerifierTimeout`` the caller records), and the thread is left to finish
on its own, its late result discarded. A daemon thread, not the default executor's: a thread still
stuck at interpreter exit must not hold the process.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def call_in_thread(fn: Callable[..., T], *args: Any, timeout_s: float, name: str = "ora-call") -> T:
    """``fn(*args)`` on a daemon thread; its result, its exception, or ``TimeoutError`` after
    ``timeout_s`` seconds (the thread then finishes unobserved)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def work() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (fn(*args), None)
        except BaseException as exc:  # noqa: BLE001 - carried to the awaiting task and raised there
            outcome = (None, exc)
        if not loop.is_closed():  # else the caller gave up and its loop has ended
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await asyncio.wait_for(asyncio.shield(done), timeout_s)
