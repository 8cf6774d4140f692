"""Lazy components keep `ora --help` cheap: a backend factory registered by name imports its
module on first use only; detector regexes compile on first use and behave as compiled ones."""

from __future__ import annotations

import re
import sys
import textwrap

import pytest

from ora_core.kits.lazy import LazyBackendFactory, lazy_compile, lazy_exports
from ora_core.testing import make_host


@pytest.fixture
def fake_backend_module(tmp_path, monkeypatch):
    (tmp_path / "ora_lazy_fake_backend.py").write_text(textwrap.dedent("""
        class Factory:
            name = "fake"
            family_hint = "fakes"

            def create(self, settings):
                return ("backend for", settings)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("ora_lazy_fake_backend", None)
    yield "ora_lazy_fake_backend"
    sys.modules.pop("ora_lazy_fake_backend", None)


def test_registering_a_lazy_factory_imports_nothing_until_it_is_used(fake_backend_module):
    from ora_core import hookimpl

    factory = LazyBackendFactory("fake", f"{fake_backend_module}:Factory")

    class Plugin:
        @hookimpl
        def ora_register_backends(self, register):
            register(factory)

    host = make_host(Plugin())
    assert host.get("backend", "fake") is factory
    assert fake_backend_module not in sys.modules and not factory.loaded
    assert factory.create({"model": "m"}) == ("backend for", {"model": "m"})
    assert fake_backend_module in sys.modules and factory.loaded
    assert factory.family_hint == "fakes"  # other attributes come from the real factory


def test_a_malformed_target_is_refused_at_once_and_a_missing_module_fails_on_first_use():
    with pytest.raises(ValueError, match="module:attribute"):
        LazyBackendFactory("x", "no_colon_here")
    broken = LazyBackendFactory("x", "ora_no_such_module_anywhere:Factory")
    with pytest.raises(ModuleNotFoundError, match="ora_no_such_module_anywhere"):
        broken.create({})


def test_a_lazy_pattern_compiles_on_first_use_and_matches_like_re():
    pattern = lazy_compile(r"\bcui\s+bono\b", re.IGNORECASE)
    assert pattern._compiled is None
    assert pattern.search("A Cui Bono analysis").group(0) == "Cui Bono"
    assert pattern.sub("X", "cui bono?") == "X?"
    assert pattern.pattern == r"\bcui\s+bono\b" and pattern.flags & re.IGNORECASE
    text = "cui bono? Cui  bono!"
    real = re.compile(r"\bcui\s+bono\b", re.IGNORECASE)
    assert pattern.findall(text) == real.findall(text)
    assert [m.span() for m in pattern.finditer(text)] == [m.span() for m in real.finditer(text)]
    assert pattern.split(text) == real.split(text)
    assert pattern.match(text).group(0) == "cui bono" and pattern.fullmatch("CUI BONO")
    assert lazy_compile("x").findall("xyx") == ["x", "x"]  # a fresh one compiles on any method


def test_lazy_exports_import_the_submodule_on_first_access():
    getter = lazy_exports("ora_core.kits", {"parse_retry_after": "retry_after"})
    assert getter("parse_retry_after")("7") == 7.0
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        getter("nope")
