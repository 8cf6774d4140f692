"""The root conftest's rule: a skipped test fails the session unless ``tests/skip_allowlist.toml``
allows that skip, for that reason, and says why. Each case runs a whole pytest session (pytester)
with the repository's own conftest.py."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONFTEST = (REPO / "conftest.py").read_text(encoding="utf-8")

TESTS = '''
import sys
import pytest


def test_runs():
    pass


@pytest.mark.skipif(sys.platform != "no-such-platform", reason="needs the no-such-platform kernel")
def test_platform_bound():
    pass


def test_skips_inside():
    pytest.skip("the tool is missing")


@pytest.mark.xfail(reason="a known bug, not a skip")
def test_known_bug():
    assert False
'''


def session(pytester: pytest.Pytester, allowlist: str | None, tests: str = TESTS) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    if allowlist is not None:
        pytester.mkdir("tests")
        (pytester.path / "tests" / "skip_allowlist.toml").write_text(allowlist, encoding="utf-8")
    pytester.makepyfile(test_things=tests)
    return pytester.runpytest("-p", "no:cacheprovider")


def test_an_unlisted_skip_fails_a_session_whose_tests_all_passed_and_names_each_skip(pytester: pytest.Pytester):
    result = session(pytester, allowlist=None)
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "skips not on the allow-list" in out and "2 test(s) skipped and not allowed" in out
    result.stdout.fnmatch_lines([
        "SKIPPED (not allowed) test_things.py::test_platform_bound: needs the no-such-platform kernel",
        "SKIPPED (not allowed) test_things.py::test_skips_inside: the tool is missing",
    ])
    assert "test_known_bug" not in out.split("skips not on the allow-list")[1]  # an xfail is not a skip


def test_skips_the_allow_list_names_for_their_reason_pass(pytester: pytest.Pytester):
    result = session(pytester, allowlist='''
[[skip]]
test = "test_things.py::test_platform_bound"
reason = "no-such-platform kernel"
why = "the subject of this test exists only on that platform"

[[skip]]
test = "test_things.py::test_skips_*"
why = "the tool cannot be installed on this machine"
''')
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    assert "skips not on the allow-list" not in result.stdout.str()


def test_a_listed_test_skipping_for_another_reason_fails(pytester: pytest.Pytester):
    result = session(pytester, allowlist='''
[[skip]]
test = "test_things.py::*"
reason = "the tool is missing"
why = "the tool cannot be installed on this machine"
''')
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["SKIPPED (not allowed) test_things.py::test_platform_bound: needs the *"])
    assert "(not allowed) test_things.py::test_skips_inside" not in result.stdout.str()


def test_a_module_skipped_at_collection_counts_too(pytester: pytest.Pytester):
    result = session(pytester, allowlist=None,
                     tests='import pytest\npytest.importorskip("no_such_module_anywhere")\n\ndef test_x():\n    pass\n')
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["SKIPPED (not allowed) test_things.py: *no_such_module_anywhere*"])


def test_an_entry_without_a_why_is_a_usage_error_naming_the_field(pytester: pytest.Pytester):
    result = session(pytester, allowlist='[[skip]]\ntest = "test_things.py::test_skips_inside"\n')
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*skip_allowlist.toml: skip.0.why: Field required*"])


def test_the_repositorys_allow_list_gives_each_entry_a_reason_and_names_real_tests():
    path = REPO / "tests" / "skip_allowlist.toml"
    entries = tomllib.loads(path.read_text(encoding="utf-8"))["skip"]
    assert entries
    for entry in entries:
        assert set(entry) <= {"test", "reason", "why"} and len(entry["why"]) > 40, entry
        file, _, name = entry["test"].partition("::")
        source = (REPO / file).read_text(encoding="utf-8")  # the test file exists ...
        assert re.search(rf"^def {re.escape(name)}\(", source, re.MULTILINE), entry["test"]  # ... and the test
        assert entry["reason"] and entry["reason"] in source, entry  # the reason is the skip's own words
    assert not [e for e in entries if "playwright" in e["test"]]  # browser tests must run, never skip
