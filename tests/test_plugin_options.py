"""Plugins declare their options (``ora_register_options``, a backend factory's ``options_model``):
an unknown key, a wrong type or a table that names no plugin is a ``ConfigError`` naming the
configuration source, the table and the key (with a did-you-mean), raised before any turn runs;
a table whose plugin declares nothing is passed on with a warning, never silently; components read
the validated model with ``ctx.options(name)``."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import ora_scripted
import pytest
from pydantic import Field

from ora_core import hookimpl
from ora_core.api import LazyBackendFactory, PluginOptions
from ora_core.engine.app import Ora
from ora_core.kernel.config import check_options, load_config, options_problems
from ora_core.kernel.errors import ConfigError, PluginError
from ora_core.kernel.trace import StandaloneContext, TurnContext
from ora_core.testing import make_config, make_host, scripted_config


class GreeterOptions(PluginOptions):
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    greeting: str = "hello"
    streams: list[str] = Field(default_factory=lambda: ["concept"])


class Greeter:
    """A plugin declaring ``[plugins.greeter]``."""

    @staticmethod
    @hookimpl
    def ora_register_options(register: Any) -> None:
        register(GreeterOptions, table="greeter")


class Undeclared:
    """A third party with a table and no declared model."""

    @staticmethod
    @hookimpl
    def ora_register_verifiers(register: Any) -> None:
        register(type("V", (), {"name": "undeclared-verifier", "verify": lambda *a, **k: None})())


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ora.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_ora_register_options_declares_a_table_and_ctx_options_gives_the_validated_model(tmp_path: Path) -> None:
    host = make_host(Greeter)
    assert host.options_model("greeter") is GreeterOptions
    assert host.records["Greeter"].hooks == ["ora_register_options"]
    assert host.summary()[0]["components"] == {"options": ["greeter"]}
    resolved = load_config(write_config(tmp_path, """
        [plugins.greeter]
        threshold = 0.7
    """), env={})
    assert check_options(resolved, host) == []
    turn = TurnContext(prompt="p", config=resolved.config, config_hash=resolved.hash, host=host)
    options = turn.options("greeter")
    assert isinstance(options, GreeterOptions) and (options.threshold, options.greeting) == (0.7, "hello")
    assert turn.options("greeter") is options, "validated once while the table stays the same"
    standalone = StandaloneContext(resolved.config, host=host)
    assert standalone.options("greeter") is options
    assert GreeterOptions.of(resolved, "greeter") is options  # a ResolvedConfig, an OraConfig or a ctx
    with pytest.raises(PluginError, match=r"no loaded plugin declares the options of \[plugins.greetr\].*"
                                          r"did you mean 'greeter'"):
        turn.options("greetr")


def test_a_changed_table_is_validated_again_not_served_from_the_cache() -> None:
    first = make_config({"plugins": {"greeter": {"greeting": "hi"}}})
    second = make_config({"plugins": {"greeter": {"greeting": "bye"}}})
    assert GreeterOptions.of(first, "greeter").greeting == "hi"
    assert GreeterOptions.of(second, "greeter").greeting == "bye"
    first.config.plugins["greeter"]["greeting"] = "changed in place"
    assert GreeterOptions.of(first, "greeter").greeting == "changed in place"
    absent = make_config()
    assert GreeterOptions.of(absent, "greeter") == GreeterOptions(), "no table: the defaults"


def test_an_unknown_key_and_a_wrong_type_name_the_source_the_table_and_the_key(tmp_path: Path) -> None:
    path = write_config(tmp_path, """
        [plugins.greeter]
        threshhold = 0.7
        greeting = 3
        streams = ["concept", 4]
    """)
    resolved = load_config(path, env={})
    with pytest.raises(ConfigError) as info:
        check_options(resolved, make_host(Greeter))
    text = str(info.value)
    assert text.startswith(f"{path}: 3 problems in plugin and backend options:")
    assert "[plugins.greeter] threshhold: unknown key; did you mean 'threshold'?" in text
    assert "[plugins.greeter] greeting: Input should be a valid string (got 3)" in text
    assert "[plugins.greeter] streams.1: Input should be a valid string (got 4)" in text
    assert info.value.source == str(path) and info.value.field == "plugins.greeter.greeting"  # the first
    from_env = load_config(path, env={"ORA__PLUGINS__GREETER__GRETING": "hi", "ORA__TRACE__ROOT": "/tmp/t"})
    with pytest.raises(ConfigError) as info:
        check_options(from_env, make_host(Greeter))
    assert info.value.source == f"{path} + ORA__PLUGINS__GREETER__GRETING", "each key's own layer is named"
    with pytest.raises(ConfigError, match=r"\[plugins.greeter\] threshold: Input should be less than or equal to 1 "
                                          r"\(got 7\)"):
        GreeterOptions.of(make_config({"plugins": {"greeter": {"threshold": 7}}}), "greeter")


def test_a_table_naming_no_plugin_is_an_error_with_a_did_you_mean() -> None:
    host = make_host(Greeter)
    typo = make_config({"plugins": {"greeetr": {"greeting": "x"}}})
    with pytest.raises(ConfigError, match=r"\[plugins.greeetr\] names no installed plugin; did you mean 'greeter'\?"):
        check_options(typo, host)
    host.scanned = True  # a host that scanned the entry points knows what is installed
    far = make_config({"plugins": {"telepathy": {}}})
    with pytest.raises(ConfigError, match=r"\[plugins.telepathy\] names no installed plugin \(installed: Greeter, "
                                          r"greeter\)"):
        check_options(far, host)


def test_a_table_whose_plugin_declares_no_model_is_passed_on_with_a_warning_never_an_error() -> None:
    host = make_host(Greeter, Undeclared)
    resolved = make_config({"plugins": {"Undeclared": {"anything": 1}}})
    warnings = check_options(resolved, host)
    assert [w.line() for w in warnings] == [
        "[plugins.Undeclared] is not checked: plugin 'Undeclared' declares no options model (ora_register_options); "
        "its keys are passed on as written"]
    Ora(host=host, config=resolved)  # a third party that declares nothing does not break anyone
    in_process = make_config({"plugins": {"somewhere-else": {"x": 1}}})
    assert [p.severity for p in options_problems(in_process, host)] == ["warning"], \
        "a host of in-process plugins does not know what is installed"


def test_a_model_that_accepts_unknown_keys_and_a_table_declared_twice_are_refused() -> None:
    from pydantic import BaseModel

    class Loose(BaseModel):
        x: int = 1

    class LoosePlugin:
        @staticmethod
        @hookimpl
        def ora_register_options(register: Any) -> None:
            register(Loose, table="loose")

    class Twice:
        @staticmethod
        @hookimpl
        def ora_register_options(register: Any) -> None:
            register(GreeterOptions, table="greeter")

    host = make_host(strict=False)
    host.register_plugin(LoosePlugin, name="loose-plugin")
    assert host.records["loose-plugin"].status == "failed"
    assert "not a pydantic model that forbids unknown keys" in host.records["loose-plugin"].errors[0]
    assert host.options_model("loose") is None
    host.register_plugin(Greeter, name="first")
    host.register_plugin(Twice, name="second")
    assert host.records["second"].errors == [
        "options 'greeter' is registered twice: by plugin 'first' and by plugin 'second'"]


class CountingFactory:
    """A backend factory declaring its options as a class; counts the backends it builds."""

    name = "counting"
    options_model = GreeterOptions
    built = 0

    def create(self, settings: Any) -> Any:
        CountingFactory.built += 1
        raise AssertionError("no backend may be built for a configuration the kernel refused")


class CountingPlugin:
    @staticmethod
    @hookimpl
    def ora_register_backends(register: Any) -> None:
        register(CountingFactory())


def test_backend_options_are_checked_against_the_factory_model_before_any_call(tmp_path: Path) -> None:
    path = write_config(tmp_path, """
        [backends.local]
        type = "counting"
        [backends.local.options]
        greting = "hi"
    """)
    resolved = load_config(path, env={})
    with pytest.raises(ConfigError) as info:
        Ora(host=make_host(CountingPlugin), config=resolved)
    assert str(info.value) == f"{path}: [backends.local.options] greting: unknown key; did you mean 'greeting'?"
    assert CountingFactory.built == 0


def test_a_lazy_backend_factory_declares_its_options_by_target_without_importing_the_factory(tmp_path: Path) -> None:
    module = tmp_path / "lazy_opts_plugin.py"
    module.write_text(textwrap.dedent("""
        from ora_core.api import PluginOptions

        class LazyOptions(PluginOptions):
            depth: int = 1
    """), encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        lazy = LazyBackendFactory("lazy", "lazy_heavy_module_never_imported:Factory",
                                  options="lazy_opts_plugin:LazyOptions")
        broken = LazyBackendFactory("broken", "nowhere:Factory", options="no_such_options_module:Options")

        class LazyPlugin:
            @staticmethod
            @hookimpl
            def ora_register_backends(register: Any) -> None:
                register(lazy)
                register(broken)

        host = make_host(LazyPlugin)
        good = make_config({"backends": {"local": {"type": "lazy", "options": {"depth": 3}}}})
        assert check_options(good, host) == [] and not lazy.loaded
        bad = make_config({"backends": {"local": {"type": "lazy", "options": {"depht": 3}},
                                        "other": {"type": "broken"}}})
        with pytest.raises(ConfigError) as info:
            check_options(bad, host)
        text = str(info.value)
        assert "[backends.local.options] depht: unknown key; did you mean 'depth'?" in text
        assert ("[backends.other.options] backend type 'broken' (plugin 'LazyPlugin') declares options_model "
                "'no_such_options_module:Options', which cannot be imported: ModuleNotFoundError") in text
        assert not lazy.loaded, "validating options never imports the real factory"
        with pytest.raises(ValueError, match="must be 'module:attribute'"):
            LazyBackendFactory("x", "m:F", options="no-colon")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("lazy_opts_plugin", None)


def test_a_backend_type_without_an_options_model_is_a_warning_when_it_has_options() -> None:
    class Bare:
        name = "bare"

        def create(self, settings: Any) -> Any:
            return None

    class BarePlugin:
        @staticmethod
        @hookimpl
        def ora_register_backends(register: Any) -> None:
            register(Bare())

    resolved = make_config({"backends": {"local": {"type": "bare", "options": {"knob": 1}}}})
    assert [w.line() for w in check_options(resolved, make_host(BarePlugin))] == [
        "[backends.local.options] is not checked: backend type 'bare' declares no options_model; its keys are passed "
        "on as written"]


def test_ora_refuses_a_scripted_backend_option_typo_before_the_turn_opens(tmp_path: Path) -> None:
    """Observed: an unknown key in a backend's ``options`` was ignored with exit 0."""
    resolved = scripted_config(tmp_path / "traces", default="Hi.")
    resolved.config.backends["local"].options["defualt"] = "Hello."
    with pytest.raises(ConfigError, match=r"\[backends.local.options\] defualt: unknown key; did you mean 'default'\?"):
        Ora(host=make_host(ora_scripted), config=resolved)
    assert not (tmp_path / "traces").exists(), "no turn opened"


def test_first_party_plugins_declare_their_tables_and_backend_options_keeping_every_default() -> None:
    import ora_anthropic
    import ora_chroma
    import ora_grounding
    import ora_health_detectors
    import ora_local_llm
    import ora_openai
    import ora_playwright
    import ora_trace_fs
    import ora_web

    import ora_probes

    host = make_host(ora_grounding, ora_health_detectors, ora_trace_fs, ora_chroma, ora_web, ora_probes, ora_scripted,
                     ora_openai, ora_local_llm, ora_anthropic, ora_playwright)
    assert sorted(host.options_models()) == ["chroma", "grounding", "health-detectors", "probes-default", "trace-fs",
                                             "web"]
    defaults = {table: model().model_dump() for table, model in host.options_models().items()}
    assert defaults["grounding"] == {"exclude_streams": ["conversation"]}
    assert defaults["health-detectors"] == {"min_words": 40, "clarification_body_words": 60}
    assert defaults["trace-fs"] == {"fsync": True, "close_timeout_s": 30.0}
    assert defaults["probes-default"] == {"bench_documents": None}
    for backend_type in ("openai", "local-llm", "anthropic", "playwright", "scripted"):
        assert host.backend_options_model(backend_type) is not None, backend_type
    assert not any(host.get("backend", t).loaded for t in ("openai", "local-llm", "anthropic", "playwright")), \
        "declared by target: no backend module was imported"
    assert check_options(make_config(), host) == [], "the bundled default passes"
    bad = make_config({"plugins": {"health-detectors": {"min_word": 3}, "web": {"timeout_s": -1}},
                       "backends": {"local": {"options": {"requantise": "off"}}}})
    with pytest.raises(ConfigError) as info:
        check_options(bad, host)
    text = str(info.value)
    assert "[plugins.health-detectors] min_word: unknown key; did you mean 'min_words'?" in text
    assert "[plugins.web] timeout_s: Input should be greater than 0 (got -1)" in text
    assert "[backends.local.options] requantise: unknown key; did you mean 'requantize'?" in text
    playwright = make_config({"backends": {"local": {"type": "playwright", "options": {"selectors": {"replyy": "x"}}}}})
    with pytest.raises(ConfigError, match=r"selectors: Value error, 'replyy' is no field of a selector profile; "
                                          r"did you mean 'reply'\?"):
        check_options(playwright, host)
