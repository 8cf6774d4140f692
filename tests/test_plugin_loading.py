"""Entry-point loading: isolation, records, allow/block lists, strict mode, refusals.

Each test lays out real distributions (a ``.dist-info`` with an entry point) in a temporary
directory on ``sys.path`` and loads them under an entry-point group of its own, so the plugins
installed in the environment never leak in.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from ora_core.kernel.errors import PluginError
from ora_core.kernel.plugins import PluginHost
from ora_core.testing import write_distribution

DETECTOR = '''
from ora_core import hookimpl
from ora_core.kernel.models import Signal

class Shout:
    name = "{name}"
    kind = "{kind}"
    layer = {layer!r}
    assumes = frozenset({assumes!r})

    def detect(self, text, ctx):
        return [Signal(detector=self.name, kind=self.kind, name="shout")] if text.isupper() else []

@hookimpl
def ora_register_detectors(register):
    register(Shout())
'''


def detector_source(name: str, *, kind: str = "style", layer: str | None = "model_output",
                    assumes: tuple[str, ...] = ()) -> str:
    return DETECTOR.format(name=name, kind=kind, layer=layer, assumes=set(assumes) or set())


@pytest.fixture
def group() -> str:
    return f"ora_test_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    return root


def uniq(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def dist(site: Path, group: str, dist_name: str, ep_name: str, source: str) -> str:
    module = uniq("plug")
    write_distribution(site, dist_name, version="1.2.3", modules={f"{module}.py": source},
                       entry_points={ep_name: module}, group=group)
    return module


def test_a_plugin_raising_at_import_is_recorded_and_the_rest_still_load(site: Path, group: str) -> None:
    dist(site, group, "ora-broken-thing", "broken", "raise RuntimeError('boom at import')\n")
    dist(site, group, "ora-good-thing", "good", detector_source("good-detector"))
    host = PluginHost(env={})
    host.load_entrypoints(group)
    broken, good = host.records["broken"], host.records["good"]
    assert broken.status == "failed"
    assert broken.distribution == "ora-broken-thing" and broken.version == "1.2.3"
    assert "import failed: RuntimeError: boom at import" in broken.errors[0]
    assert broken.entry_point.startswith("broken = plug_")
    assert good.status == "ok"
    assert host.get("detector", "good-detector").name == "good-detector"


def test_a_plugin_failing_an_assert_at_import_is_recorded_and_the_rest_still_load(site: Path, group: str) -> None:
    # stevedore re-raises an AssertionError from its load loop; Ora records it instead
    dist(site, group, "ora-asserting", "asserting", "assert False, 'not on this platform'\n")
    dist(site, group, "ora-good-thing", "good", detector_source("good-detector"))
    host = PluginHost(env={})
    host.load_entrypoints(group)
    asserting = host.records["asserting"]
    assert asserting.status == "failed"
    assert asserting.errors[0].startswith("import failed: AssertionError: not on this platform at plug_")
    assert host.records["good"].status == "ok" and "good-detector" in host.components("detector")


def test_the_entry_points_are_imported_by_stevedores_extension_manager_one_at_a_time(
        site: Path, group: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from stevedore.extension import ExtensionManager

    dist(site, group, "ora-broken-thing", "broken", "raise RuntimeError('boom at import')\n")
    dist(site, group, "ora-good-thing", "good", detector_source("good-detector"))
    dist(site, group, "ora-off-thing", "off", detector_source("off-detector"))
    imported: list[str] = []
    load_one = ExtensionManager._load_one_plugin

    def spy(self: ExtensionManager, ep: Any, *args: Any) -> Any:
        imported.append(ep.name)
        return load_one(self, ep, *args)

    monkeypatch.setattr(ExtensionManager, "_load_one_plugin", spy)
    host = PluginHost(env={"ORA_DISABLE_PLUGINS": "off"})
    host.load_entrypoints(group)
    assert imported == ["broken", "good"]  # in entry-point name order; the disabled one never reaches it
    # the failure stevedore hands its on_load_failure_callback lands on the plugin's own record
    assert host.records["broken"].errors[0].startswith("import failed: RuntimeError: boom at import")
    assert host.records["good"].status == "ok" and host.records["off"].status == "disabled"


def test_strict_mode_makes_a_load_failure_fatal(site: Path, group: str) -> None:
    dist(site, group, "ora-broken-thing", "broken", "raise RuntimeError('boom at import')\n")
    host = PluginHost(env={"ORA_STRICT_PLUGINS": "1"})
    with pytest.raises(PluginError, match=r"plugin 'broken' \(ora-broken-thing\): import failed: RuntimeError"):
        host.load_entrypoints(group)


def test_a_component_name_registered_twice_is_an_error_naming_both_plugins(site: Path, group: str) -> None:
    dist(site, group, "ora-first", "first", detector_source("same-name"))
    dist(site, group, "ora-second", "second", detector_source("same-name"))
    host = PluginHost(env={})
    host.load_entrypoints(group)
    assert host.records["first"].status == "ok"
    second = host.records["second"]
    assert second.status == "failed"
    assert second.errors == [
        "detector 'same-name' is registered twice: by plugin 'first' and by plugin 'second'"
    ]
    assert host.registry["detector"]["same-name"].plugin == "first"


def test_a_hook_implementation_with_a_wrong_argument_is_refused_naming_it(site: Path, group: str) -> None:
    source = (
        "from ora_core import hookimpl\n"
        "@hookimpl\n"
        "def ora_register_detectors(register, registry):\n"
        "    raise AssertionError('never called')\n"
    )
    dist(site, group, "ora-wrong-arg", "wrongarg", source)
    host = PluginHost(env={})
    host.load_entrypoints(group)
    record = host.records["wrongarg"]
    assert record.status == "failed"
    assert "registration failed" in record.errors[0]
    assert "{'registry'} are declared in the hookimpl but can not be found in the hookspec" in record.errors[0]


def test_an_unknown_hook_name_is_an_error_with_a_did_you_mean(site: Path, group: str) -> None:
    source = (
        "from ora_core import hookimpl\n"
        "@hookimpl\n"
        "def ora_register_detector(register):\n"
        "    pass\n"
    )
    dist(site, group, "ora-typo", "typo", source)
    host = PluginHost(env={})
    host.load_entrypoints(group)
    record = host.records["typo"]
    assert record.status == "failed"
    assert record.errors[0].startswith(
        "unknown hook 'ora_register_detector' (did you mean 'ora_register_detectors'?)")
    # The plugin is not left half-registered.
    assert not host.pm.has_plugin("typo")


def test_a_detector_with_no_declared_layer_is_refused(site: Path, group: str) -> None:
    dist(site, group, "ora-no-layer", "nolayer", detector_source("floating", layer=None))
    host = PluginHost(env={})
    host.load_entrypoints(group)
    record = host.records["nolayer"]
    assert record.status == "failed"
    assert record.errors == [
        "detector 'floating' (plugin 'nolayer') declares no layer; declare one of: raw_prompt, "
        "cleaned_prompt, routing, context_package, model_output, verifier_output, final_output"
    ]
    assert "floating" not in host.components("detector")


def test_a_bypass_detector_declared_on_the_cleaned_prompt_is_refused_as_incompatible(
        site: Path, group: str) -> None:
    dist(site, group, "ora-late-bypass", "latebypass",
         detector_source("late-bypass", kind="bypass", layer="cleaned_prompt", assumes=("unexpanded",)))
    host = PluginHost(env={})
    host.load_entrypoints(group)
    record = host.records["latebypass"]
    assert record.status == "incompatible"
    message = record.errors[0]
    assert "detector 'late-bypass'" in message  # the component
    assert "layer 'cleaned_prompt'" in message  # the layer
    assert "'unexpanded'" in message  # the missing property
    assert "late-bypass" not in host.components("detector")
    row = next(r for r in host.summary() if r["name"] == "latebypass")
    assert row["status"] == "incompatible"
    assert row["layers"][0] == {"kind": "detector", "name": "late-bypass", "layer": "cleaned_prompt",
                                "assumes": ["unexpanded"], "status": "incompatible", "error": message}


def test_the_same_bypass_detector_on_the_raw_prompt_loads(site: Path, group: str) -> None:
    dist(site, group, "ora-early-bypass", "earlybypass",
         detector_source("early-bypass", kind="bypass", layer="raw_prompt", assumes=("unexpanded",)))
    host = PluginHost(env={})
    host.load_entrypoints(group)
    assert host.records["earlybypass"].status == "ok"
    assert [d.name for d in host.detectors(layer="raw_prompt", kind="bypass")] == ["early-bypass"]


def test_a_component_missing_its_method_is_refused_naming_what_is_missing(site: Path, group: str) -> None:
    source = (
        "from ora_core import hookimpl\n"
        "class NoVerify:\n"
        "    name = 'lazy'\n"
        "@hookimpl\n"
        "def ora_register_verifiers(register):\n"
        "    register(NoVerify())\n"
    )
    dist(site, group, "ora-lazy", "lazy", source)
    host = PluginHost(env={})
    host.load_entrypoints(group)
    assert host.records["lazy"].errors == ["verifier 'lazy' (plugin 'lazy') lacks 'verify'"]


def test_a_registration_hook_that_raises_is_recorded(site: Path, group: str) -> None:
    source = (
        "from ora_core import hookimpl\n"
        "@hookimpl\n"
        "def ora_register_retrievers(register):\n"
        "    raise ValueError('no index configured')\n"
    )
    dist(site, group, "ora-raises", "raises", source)
    host = PluginHost(env={})
    host.load_entrypoints(group)
    record = host.records["raises"]
    assert record.status == "failed"
    assert record.errors[0].startswith("ora_register_retrievers raised ValueError: no index configured")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, {"alpha": "ok", "beta": "ok"}),
        ({"ORA_PLUGINS": ""}, {"alpha": "disabled", "beta": "disabled"}),
        ({"ORA_PLUGINS": "alpha"}, {"alpha": "ok", "beta": "disabled"}),
        ({"ORA_PLUGINS": "ora-beta-dist"}, {"alpha": "disabled", "beta": "ok"}),
        ({"ORA_DISABLE_PLUGINS": "beta"}, {"alpha": "ok", "beta": "disabled"}),
        ({"ORA_PLUGINS": "alpha,beta", "ORA_DISABLE_PLUGINS": "alpha"}, {"alpha": "disabled", "beta": "ok"}),
    ],
)
def test_allow_list_and_block_list(site: Path, group: str, env: dict[str, str],
                                   expected: dict[str, str]) -> None:
    alpha = dist(site, group, "ora-alpha-dist", "alpha", detector_source("alpha-detector"))
    dist(site, group, "ora-beta-dist", "beta", detector_source("beta-detector"))
    host = PluginHost(env=env)
    host.load_entrypoints(group)
    assert {name: r.status for name, r in host.records.items()} == expected
    for name, status in expected.items():
        assert (f"{name}-detector" in host.components("detector")) == (status == "ok")
    if expected["alpha"] == "disabled":
        import sys
        assert alpha not in sys.modules, "a disabled plugin must not even be imported"
        assert "disabled by" in host.records["alpha"].errors[0]


def test_the_registry_knows_which_plugin_supplied_each_component(site: Path, group: str) -> None:
    dist(site, group, "ora-alpha-dist", "alpha", detector_source("alpha-detector"))
    host = PluginHost(env={})
    host.load_entrypoints(group)
    record = host.registry["detector"]["alpha-detector"]
    assert (record.plugin, record.layer, record.status) == ("alpha", "model_output", "ok")
    assert host.records["alpha"].hooks == ["ora_register_detectors"]
    assert host.summary()[0]["components"] == {"detector": ["alpha-detector"]}


def test_two_distributions_publishing_the_same_entry_point_name_keep_both_records_and_refuse_the_second(
        site: Path, group: str) -> None:
    dist(site, group, "ora-one", "dup", detector_source("one-detector"))
    dist(site, group, "ora-two", "dup", detector_source("two-detector"))
    host = PluginHost(env={})
    loaded = host.load_entrypoints(group)
    assert sorted(r.status for r in loaded) == ["failed", "ok"]
    kept = next(r for r in loaded if r.status == "ok")
    refused = next(r for r in loaded if r.status == "failed")
    # both records are listed: the second never overwrites the first
    listed = [(row["name"], row["distribution"], row["status"]) for row in host.summary()]
    assert ("dup", kept.distribution, "ok") in listed and ("dup", refused.distribution, "failed") in listed
    message = refused.errors[0]
    assert "'dup' is published by distribution" in message
    assert f"{kept.distribution!r}" in message and f"{refused.distribution!r} is refused" in message
    # the kept one's component is active and listed; the refused one's was never loaded
    kept_detector = "one-detector" if kept.distribution == "ora-one" else "two-detector"
    refused_detector = "two-detector" if kept_detector == "one-detector" else "one-detector"
    assert host.registry["detector"][kept_detector].plugin == "dup"
    assert refused_detector not in host.registry["detector"]


WRAPPER = '''
from ora_core import hookimpl

@hookimpl({flag}=True)
def ora_register_detectors(register):
    yield
'''


@pytest.mark.parametrize("flag", ["wrapper", "hookwrapper"])
def test_a_wrapper_implementation_of_ora_register_detectors_is_refused_at_load(site: Path, group: str,
                                                                               flag: str) -> None:
    dist(site, group, "ora-wrapping", "wrapping", WRAPPER.format(flag=flag))
    host = PluginHost(env={})
    (record,) = host.load_entrypoints(group)
    assert record.status == "failed"
    assert f"ora_register_detectors ({flag}=True)" in record.errors[0]
    assert "not supported" in record.errors[0] and "never the others'" in record.errors[0]
    assert not host.pm.has_plugin("wrapping")  # unregistered: nothing of it runs


def test_ora_debug_hooks_prints_every_hook_call_with_plugin_and_duration(site: Path, group: str) -> None:
    import io

    dist(site, group, "ora-alpha", "alpha", detector_source("alpha-detector"))
    host = PluginHost(env={"ORA_DEBUG_HOOKS": "1"})
    host.debug_stream = io.StringIO()
    host.load_entrypoints(group)
    assert "ora_register_detectors" not in host.debug_stream.getvalue()  # collected on first look, not at load
    assert host.detectors()  # the first look: the registration hooks run now
    calls = []
    host.call_observers("ora_turn_started", lambda plugin, exc: calls.append(plugin), turn=object())
    lines = host.debug_stream.getvalue().splitlines()
    assert any(line.startswith("ora hooks: ora_register_detectors <- alpha (") and " ms ok" in line
               for line in lines), lines
    quiet = PluginHost(env={})
    quiet.debug_stream = io.StringIO()
    quiet.load_entrypoints(group)
    assert quiet.debug_stream.getvalue() == ""


def test_register_plugin_fixture_registers_and_unregisters(ora_host: PluginHost, register_plugin) -> None:
    class Plugin:
        from ora_core import hookimpl

        @hookimpl
        def ora_register_verifiers(self, register):
            class Always:
                name = "always-fail"

                def verify(self, subject, package, criteria, ctx):
                    raise AssertionError("not called here")

            register(Always())

    register_plugin(Plugin(), name="inproc")
    assert "always-fail" in ora_host.components("verifier")
    ora_host.unregister_plugin("inproc")
    assert "always-fail" not in ora_host.components("verifier")
    assert "inproc" not in ora_host.records


SLOW_REGISTRATION = """
import time
from ora_core import hookimpl


class Slow:
    name = "{name}"
    kind = "style"
    layer = "model_output"
    assumes = frozenset()

    def detect(self, text, ctx=None):
        return []


@hookimpl
def ora_register_detectors(register):
    time.sleep(0.2)
    register(Slow())
"""


def test_components_are_collected_on_first_look_once_and_every_thread_sees_them_all(site: Path, group: str) -> None:
    import threading

    dist(site, group, "ora-slow-a", "slow-a", SLOW_REGISTRATION.format(name="slow-a"))
    dist(site, group, "ora-slow-b", "slow-b", SLOW_REGISTRATION.format(name="slow-b"))
    host = PluginHost(env={})
    host.load_entrypoints(group)
    assert host._registry.by_kind["detector"] == {}  # nothing collected at load
    seen: list[list[str]] = []
    threads = [threading.Thread(target=lambda: seen.append(sorted(d.name for d in host.detectors())))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert seen == [["slow-a", "slow-b"]] * 3  # no thread saw a half-collected registry
    assert [c.name for r in host.records.values() for c in r.components] == ["slow-a", "slow-b"]  # once each


def test_strict_mode_collects_at_load(site: Path, group: str) -> None:
    dist(site, group, "ora-raising", "raising", "from ora_core import hookimpl\n\n@hookimpl\n"
         "def ora_register_detectors(register):\n    raise RuntimeError('no detector today')\n")
    with pytest.raises(PluginError, match="no detector today"):
        PluginHost(env={}, strict=True).load_entrypoints(group)
    lazy = PluginHost(env={})
    lazy.load_entrypoints(group)  # not strict: the failure waits for the first look, then is recorded
    assert lazy.records["raising"].status == "failed"
    assert "ora_register_detectors raised RuntimeError: no detector today" in lazy.records["raising"].errors[0]
