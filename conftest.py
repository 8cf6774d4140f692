"""The whole test session's rules (``tests``, ``plugins``, ``contrib``): a skipped test fails the
session unless the skip is on the allow-list.

A skip is a test that did not run, and a run that ends green with tests silently not run is a
failure that looks like a success (a missing browser once skipped fifteen backend tests without
anyone noticing). So every skip — ``pytest.skip``, ``skipif``, ``importorskip``, at collection
or inside a test — is compared with ``tests/skip_allowlist.toml`` (``[[skip]]`` entries: the
test id, optionally the reason the skip must give, and ``why`` it is legitimate), and any skip
not on it turns the session's exit status into a failure, naming each such test and its reason.
Expected failures (``xfail``) are not skips.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import NamedTuple

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

pytest_plugins = ["pytester"]  # tests/test_skip_policy.py runs whole sessions to prove the rule

ALLOWLIST = Path("tests") / "skip_allowlist.toml"  # relative to the rootdir


class AllowedSkip(BaseModel):
    """One ``[[skip]]`` entry of the allow-list."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The test id (``path/to/test_file.py::test_name[param]``, relative to the rootdir); ``*``
    #: matches any run of characters, nothing else is special.
    test: str = Field(min_length=1)
    #: Text the skip's reason must contain (a skip of the same test for another reason is not allowed).
    reason: str = ""
    #: Why this skip is legitimate: the environment it happens in, and why the test cannot run there.
    why: str = Field(min_length=10)

    def matches(self, nodeid: str, reason: str) -> bool:
        pattern = ".*".join(re.escape(part) for part in self.test.split("*"))
        return re.fullmatch(pattern, nodeid) is not None and self.reason in reason


class SkipAllowList(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    skip: list[AllowedSkip] = Field(default_factory=list)


class Skipped(NamedTuple):
    nodeid: str
    reason: str


def load_allowlist(path: Path) -> SkipAllowList:
    """The allow-list at ``path`` (none when the file does not exist); a malformed file is a
    ``pytest.UsageError`` naming the file and the field."""
    if not path.is_file():
        return SkipAllowList()
    try:
        return SkipAllowList.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except tomllib.TOMLDecodeError as exc:
        raise pytest.UsageError(f"{path}: not valid TOML: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise pytest.UsageError(f"{path}: {problems}") from None


def skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
    return text.removeprefix("Skipped: ")


class SkipPolicy:
    """A pytest plugin: collects the session's skips and, at the end, fails the session for the
    ones the allow-list does not name."""

    def __init__(self, allowlist: SkipAllowList, source: Path) -> None:
        self.allowlist = allowlist
        self.source = source
        self.skipped: list[Skipped] = []

    def unlisted(self) -> list[Skipped]:
        return [s for s in self.skipped if not any(e.matches(s.nodeid, s.reason) for e in self.allowlist.skip)]

    def _record(self, report: pytest.CollectReport | pytest.TestReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            self.skipped.append(Skipped(report.nodeid, skip_reason(report)))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._record(report)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._record(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.unlisted() and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        unlisted = self.unlisted()
        if not unlisted:
            return
        terminalreporter.section("skips not on the allow-list", sep="=", red=True, bold=True)
        terminalreporter.line(f"{len(unlisted)} test(s) skipped and not allowed by {self.source}; a skip is a "
                              "test that did not run. Make it run here, or add a [[skip]] entry saying why it "
                              "cannot:")
        for skipped in unlisted:
            terminalreporter.line(f"SKIPPED (not allowed) {skipped.nodeid}: {skipped.reason}", red=True)


def pytest_configure(config: pytest.Config) -> None:
    path = config.rootpath / ALLOWLIST
    config.pluginmanager.register(SkipPolicy(load_allowlist(path), path), "ora-skip-policy")
