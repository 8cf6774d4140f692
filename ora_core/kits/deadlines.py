"""Deadlines for the model-call path, checked by one watchdog per event loop.

``async with deadline(seconds):`` keeps ``asyncio.timeout``'s contract: when the time is up the
block's task is cancelled, and the block raises ``TimeoutError`` (from the ``CancelledError``)
only for its own cancellation, never for anybody else's; nested deadlines each answer for
their own. What differs is how the time is kept: ``asyncio.timeout`` schedules and cancels a
timer per block (a ``TimerHandle`` pushed onto and later cleaned out of the loop's heap, two
per model call: the kernel's deadline and the backend's per-attempt timeout), while here every
block of a loop is a dict entry that one watchdog callback checks every ``TICK_S`` while any
block is open. A deadline therefore fires up to ``TICK_S`` late, which is nothing next to the
timeouts of model calls (seconds to minutes).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from types import TracebackType

#: How often the watchdog of a loop looks at its open deadlines (only while there are any).
TICK_S = 0.05


class _Watchdog:
    """The open deadlines of one event loop and the callback that enforces them (it holds its
    loop weakly: a finished loop is not kept alive by the slot that last served it)."""

    __slots__ = ("loop", "open", "handle")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = weakref.ref(loop)
        self.open: dict[Deadline, None] = {}  # insertion-ordered set
        self.handle: asyncio.TimerHandle | None = None

    def add(self, block: Deadline, loop: asyncio.AbstractEventLoop) -> None:
        self.open[block] = None
        if self.handle is None:
            self.handle = loop.call_later(TICK_S, self.check)

    def check(self) -> None:
        self.handle = None
        loop = self.loop()
        if loop is None:  # unreachable while a callback of that loop runs; said for the type checker
            return
        now = loop.time()
        for block in [b for b in self.open if b.when <= now]:
            del self.open[block]
            block.expire()
        if self.open:
            self.handle = loop.call_later(TICK_S, self.check)


class _PerThread(threading.local):
    watchdog: _Watchdog | None = None


_local = _PerThread()


def _watchdog(loop: asyncio.AbstractEventLoop) -> _Watchdog:
    """The running loop's watchdog. One loop runs per thread at a time, so one slot per thread
    holds it; a watchdog left behind by a finished loop keeps serving its own open blocks."""
    dog = _local.watchdog
    if dog is None or dog.loop() is not loop:
        dog = _local.watchdog = _Watchdog(loop)
    return dog


class Deadline:
    """One ``async with`` block under a deadline (see the module docstring); single use."""

    __slots__ = ("seconds", "when", "_task", "_cancelling", "_expired", "_dog")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.when = 0.0
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._expired = False
        self._dog: _Watchdog | None = None

    @property
    def expired(self) -> bool:
        return self._expired

    async def __aenter__(self) -> Deadline:
        if self._dog is not None:
            raise RuntimeError("a Deadline is entered once")
        loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("a Deadline must be entered inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self.when = loop.time() + self.seconds
        self._dog = _watchdog(loop)
        self._dog.add(self, loop)
        return self

    def expire(self) -> None:
        """The watchdog found this block overdue: cancel its task (it raises on the way out)."""
        self._expired = True
        assert self._task is not None
        self._task.cancel()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._dog is not None and self._task is not None
        self._dog.open.pop(self, None)
        # As asyncio.timeout: only a cancellation this block caused, with none requested since
        # it was entered, becomes a TimeoutError; any other cancellation goes on as it came.
        if self._expired and self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError(f"deadline of {self.seconds:g}s passed") from exc


def deadline(seconds: float) -> Deadline:
    """``async with deadline(seconds):`` — ``asyncio.timeout(seconds)``'s behaviour at a
    fraction of its per-use cost, up to ``TICK_S`` late."""
    return Deadline(seconds)
