"""A circuit breaker per endpoint, shared by every backend (and turn) of the process.

closed -> open after ``failures`` consecutive transport/5xx/timeout failures; open rejects
calls at once, without touching the endpoint, for ``reset_s``; then half-open lets one probe
through: its success closes the circuit, its failure opens it again. State changes are kept
in ``transitions`` so a test, a check or a trace can say what happened and when.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Literal

State = Literal["closed", "open", "half_open"]


class CircuitBreaker:
    def __init__(self, endpoint: str, *, failures: int = 5, reset_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.endpoint = endpoint
        self.failures = failures
        self.reset_s = reset_s
        self.clock = clock
        self._state: State = "closed"
        self._consecutive = 0
        self._opened_at = 0.0
        self._probe_out = False
        self._lock = threading.Lock()
        self.transitions: list[tuple[float, State, str]] = []

    def _move(self, state: State, why: str) -> None:
        if state != self._state:
            self._state = state
            self.transitions.append((self.clock(), state, why))

    @property
    def state(self) -> State:
        with self._lock:
            if self._state == "open" and self.clock() - self._opened_at >= self.reset_s:
                return "half_open"
            return self._state

    @property
    def consecutive_failures(self) -> int:
        return self._consecutive

    def retry_in(self) -> float:
        with self._lock:
            return max(0.0, self.reset_s - (self.clock() - self._opened_at)) if self._state == "open" else 0.0

    def allow(self) -> bool:
        """May a call go to the endpoint now? (In half-open, only one probe at a time.)"""
        with self._lock:
            if self._state == "closed":
                return True
            if self._state == "open":
                if self.clock() - self._opened_at < self.reset_s:
                    return False
                self._move("half_open", "reset period over: one probe allowed")
            if self._probe_out:
                return False
            self._probe_out = True
            return True

    def success(self) -> None:
        with self._lock:
            self._consecutive = 0
            self._probe_out = False
            self._move("closed", "call succeeded")

    def failure(self, why: str) -> None:
        with self._lock:
            self._consecutive += 1
            probe_failed = self._state == "half_open"
            self._probe_out = False
            if probe_failed or self._consecutive >= self.failures:
                self._opened_at = self.clock()
                self._move("open", f"{'probe failed' if probe_failed else f'{self._consecutive} failures'}: {why}")

    def release(self) -> None:
        """A call ended without saying anything about the endpoint's health (e.g. a 4xx)."""
        with self._lock:
            self._probe_out = False
            if self._state == "half_open":
                self._consecutive = 0
                self._move("closed", "probe answered")


_BREAKERS: dict[str, CircuitBreaker] = {}
_REGISTRY_LOCK = threading.Lock()


def breaker_for(endpoint: str, *, failures: int = 5, reset_s: float = 30.0) -> CircuitBreaker:
    """The process-wide breaker of ``endpoint`` (created with the first caller's thresholds)."""
    key = endpoint.rstrip("/")
    with _REGISTRY_LOCK:
        breaker = _BREAKERS.get(key)
        if breaker is None:
            breaker = _BREAKERS[key] = CircuitBreaker(key, failures=failures, reset_s=reset_s)
        return breaker


def reset_breakers() -> None:
    """Forget every breaker (tests, long-lived processes after a configuration change)."""
    with _REGISTRY_LOCK:
        _BREAKERS.clear()
