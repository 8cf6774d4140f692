"""``ora_core.kits.deadlines.deadline``: ``asyncio.timeout``'s contract, kept by one watchdog per loop.

Each scenario runs under both and must end the same way: an overrun raises ``TimeoutError``
(late by at most one tick), a block that finishes in time leaves its task uncancelled, nested
deadlines each answer for their own, and a cancellation from outside stays a cancellation.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from ora_core.kits import deadlines
from ora_core.kits.deadlines import TICK_S, deadline

KINDS: dict[str, Callable[[float], Any]] = {"asyncio.timeout": asyncio.timeout, "ora deadline": deadline}


@pytest.fixture(params=list(KINDS))
def limit(request: pytest.FixtureRequest) -> Callable[[float], Any]:
    return KINDS[request.param]


def test_an_overrun_raises_timeout_error_on_time_and_the_task_goes_on(limit) -> None:
    async def main() -> tuple[float, str]:
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            async with limit(0.1):
                await asyncio.sleep(5)
        elapsed = time.monotonic() - start
        await asyncio.sleep(0.01)  # the task is not left cancelled
        return elapsed, "went on"

    elapsed, after = asyncio.run(main())
    assert 0.1 <= elapsed < 0.1 + TICK_S + 0.5 and after == "went on"


def test_a_block_that_finishes_in_time_is_never_cancelled_later(limit) -> None:
    async def main() -> str:
        async with limit(0.1):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1 + 2 * TICK_S)  # past the old deadline: nothing fires
        return "done"

    assert asyncio.run(main()) == "done"


def test_nested_deadlines_each_answer_for_their_own(limit) -> None:
    async def main() -> list[str]:
        seen = []
        async with limit(5):
            try:
                async with limit(0.05):
                    await asyncio.sleep(5)
            except TimeoutError:
                seen.append("inner expired")
            await asyncio.sleep(0.01)
            seen.append("outer still running")
        try:
            async with limit(0.1), limit(5):  # the outer expires: the inner lets the cancellation through
                await asyncio.sleep(5)
        except TimeoutError:
            seen.append("outer expired")
        return seen

    assert asyncio.run(main()) == ["inner expired", "outer still running", "outer expired"]


async def _cancelled_from_outside(task: asyncio.Task[None]) -> str:
    """Cancel ``task`` shortly after it starts; how it ended."""
    await asyncio.sleep(0.01)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return "cancelled"
    except TimeoutError:
        return "timed out"
    return "finished"


def test_a_cancellation_from_outside_stays_a_cancellation(limit) -> None:
    async def main() -> str:
        async def guarded() -> None:
            async with limit(0.05):
                await asyncio.sleep(5)

        return await _cancelled_from_outside(asyncio.create_task(guarded()))

    assert asyncio.run(main()) == "cancelled"


def test_the_deadline_passing_during_an_outside_cancellation_is_not_a_timeout(limit) -> None:
    async def main() -> str:
        async def guarded() -> None:
            async with limit(0.05):
                try:
                    await asyncio.sleep(5)
                finally:
                    await asyncio.sleep(0.05 + 2 * TICK_S)  # cleanup outlives the deadline

        return await _cancelled_from_outside(asyncio.create_task(guarded()))

    assert asyncio.run(main()) == "cancelled"


def test_outside_a_task_it_refuses_by_name() -> None:
    async def enter(block: Any) -> None:
        async with block:
            pass

    async def main() -> str:
        loop = asyncio.get_running_loop()
        said: asyncio.Future[str] = loop.create_future()

        def from_a_callback() -> None:  # a loop callback runs outside any task
            coroutine = enter(deadline(1))
            try:
                coroutine.send(None)
            except RuntimeError as exc:
                said.set_result(str(exc))
            finally:
                coroutine.close()

        loop.call_soon(from_a_callback)
        return await said

    assert "inside a task" in asyncio.run(main())


def test_the_watchdog_ticks_only_while_blocks_are_open_and_serves_each_loop_and_thread() -> None:
    async def one(seconds: float) -> str:
        try:
            async with deadline(seconds):
                await asyncio.sleep(0.3)
            return "answered"
        except TimeoutError:
            return "timed out"

    async def main() -> tuple[list[str], bool, bool]:
        outcomes = await asyncio.gather(one(0.05), one(2), one(0.1))
        dog = deadlines._local.watchdog
        assert dog is not None and dog.loop() is asyncio.get_running_loop()
        await asyncio.sleep(2 * TICK_S)  # nothing open: the last tick does not re-arm
        return outcomes, dog.handle is not None, not dog.open

    # Each worker's result, or the exception that ended it (an assertion inside ``main`` included),
    # goes back to this thread: a failing or missing worker fails the test.
    results: dict[str, Any] = {}
    errors: dict[str, BaseException] = {}

    def worker() -> None:
        name = threading.current_thread().name
        try:
            results[name] = asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread and asserted on below
            errors[name] = exc

    threads = [threading.Thread(target=worker, name=f"loop-thread-{n}") for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert [t.name for t in threads if t.is_alive()] == [], "a worker thread did not finish within 10 s"
    assert errors == {}
    results["main"] = asyncio.run(main())  # and again on this thread's new loop
    assert sorted(results) == ["loop-thread-0", "loop-thread-1", "main"]
    for outcomes, still_ticking, empty in results.values():
        assert outcomes == ["timed out", "answered", "timed out"]
        assert not still_ticking and empty
