"""The typed turn: the ``Stash`` and its keys, the keys of ``ctx.data`` the engine publishes, the explicit
context objects (no ``__getattr__`` proxies), and meta-tests over the source that keep it so: no engine
or kernel signature types a turn, a gear context, a component ctx or a runtime as ``Any``; every
function there is annotated; ``turn.data`` is never indexed by a bare string in the engine; each
stash key is declared once; ``docs/hooks.md`` lists exactly the published keys; an ignore says why.

(mypy itself runs in ``nox -s lint``, configured in ``pyproject.toml``: too slow for the suite.)"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ora_core.engine.backends import BackendPool, RoutedPool
from ora_core.kernel.ctx_data import PUBLISHED, DataKey
from ora_core.kernel.models import Contingency, VerificationCall
from ora_core.kernel.stash import Stash, StashKey
from ora_core.kernel.trace import CallContext, TurnContext
from ora_core.testing import make_config, make_host, scripted_config

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "ora_core"
#: Where the engine's objects are passed: the engine, the kernel, the pytest plugin.
TYPED = sorted([*(CORE / "engine").rglob("*.py"), *(CORE / "kernel").rglob("*.py"), CORE / "testing.py"])
ENGINE_OBJECTS = {"turn", "gc", "ctx", "runtime"}


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _trees() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in TYPED if "__pycache__" not in p.parts]


# --- the Stash ----------------------------------------------------------------------------------------


def test_a_missing_key_is_a_key_error_naming_the_key():
    fence: StashKey[str] = StashKey("evidence_fence")
    with pytest.raises(KeyError, match="nothing is stashed under 'evidence_fence'"):
        Stash()[fence]
    with pytest.raises(KeyError, match="'evidence_fence'"):
        del Stash()[fence]


def test_get_setdefault_and_pop_give_the_value_stored_under_the_key():
    spent: StashKey[float] = StashKey("spent")
    stash = Stash()
    assert stash.get(spent) is None and stash.get(spent, 0.0) == 0.0 and spent not in stash
    steps: StashKey[list[str]] = StashKey("steps")
    stash.setdefault(steps, []).append("a")
    stash.setdefault(steps, ["never used"]).append("b")
    assert stash[steps] == ["a", "b"] and steps in stash and len(stash) == 1
    stash[spent] = 1.5
    assert stash.get(spent, 0.0) == 1.5
    assert stash.pop(spent, None) == 1.5 and spent not in stash and stash.pop(spent, "gone") == "gone"


def test_keys_are_distinct_objects_even_under_one_name():
    first: StashKey[int] = StashKey("same")
    second: StashKey[int] = StashKey("same")
    stash = Stash()
    stash[first] = 1
    assert second not in stash and stash.get(second) is None
    stash[second] = 2
    assert (stash[first], stash[second]) == (1, 2)
    assert repr(first) == "StashKey('same')" and "same" in repr(stash)


def test_every_turn_has_a_stash_of_its_own_beside_the_plugins_data():
    resolved = make_config()
    one = TurnContext(prompt="p", config=resolved.config, config_hash=resolved.hash)
    two = TurnContext(prompt="p", config=resolved.config, config_hash=resolved.hash)
    key: StashKey[str] = StashKey("k")
    one.stash[key] = "one"
    assert key not in two.stash and one.data == {} and isinstance(one.data, dict)


# --- the keys of ctx.data the engine publishes -----------------------------------------------------------


def test_a_data_key_reads_and_writes_the_plain_dict_plugins_read_by_name():
    clock: DataKey[dict[str, str]] = DataKey("clock", "the clock")
    data: dict[str, object] = {}
    assert clock.get(data) is None
    clock.put(data, {"utc": "now"})
    assert data == {"clock": {"utc": "now"}} and clock.get(data) == {"utc": "now"}
    clock.drop(data)
    clock.drop(data)  # dropping what is not there is no error
    assert data == {}


def test_a_data_key_given_for_a_block_is_gone_after_it_even_when_the_block_raises():
    chunk: DataKey[str] = DataKey("chunk", "the chunk")
    data: dict[str, object] = {}
    with chunk.given(data, "c1") as value:
        assert value == "c1" and data == {"chunk": "c1"}
    assert data == {}
    with pytest.raises(RuntimeError), chunk.given(data, "c2"):
        raise RuntimeError("a detector raised")
    assert data == {}


def test_the_published_keys_have_distinct_names_and_say_what_they_hold():
    names = [key.name for key in PUBLISHED]
    assert len(names) == len(set(names)) and all(key.meaning for key in PUBLISHED)


def _documented_ctx_data_rows() -> list[tuple[str, str, str]]:
    """``(key, type, meaning)`` of the table under ``docs/hooks.md``'s heading on what the engine puts
    in ``ctx.data``."""
    text = (REPO / "docs" / "hooks.md").read_text(encoding="utf-8")
    start = text.index("### What the engine puts in `ctx.data`")
    section = text[start:text.index("\n#", start + 1)]
    return re.findall(r"^\| `([a-z_]+)` \| `([^`]+)` \| (.+) \|$", section, re.MULTILINE)


def test_docs_hooks_lists_exactly_the_keys_the_engine_publishes_in_ctx_data_with_their_types():
    import ora_core.kernel.ctx_data as ctx_data

    declared = {key: name for name, key in vars(ctx_data).items() if isinstance(key, DataKey)}
    types = {key.name: ctx_data.__annotations__[declared[key]].removeprefix("DataKey[").removesuffix("]")
             for key in PUBLISHED}
    assert _documented_ctx_data_rows() == [(key.name, types[key.name], key.meaning) for key in PUBLISHED]


# --- explicit context objects, no proxies ---------------------------------------------------------------


def _turn(**kw: object) -> TurnContext:
    resolved = make_config()
    return TurnContext(prompt="the prompt", config=resolved.config, config_hash=resolved.hash, **kw)


def test_a_call_context_is_the_turns_own_by_name_and_nothing_else():
    turn = _turn(host=make_host())
    call = VerificationCall(step="verify", role="verifier")
    ctx = CallContext(turn, verification=call)
    assert ctx.turn is turn and ctx.verification is call
    assert (ctx.config, ctx.host, ctx.data, ctx.stash, ctx.prompt) == (turn.config, turn.host, turn.data, turn.stash,
                                                                       turn.prompt)
    assert (ctx.turn_id, ctx.conversation_id, ctx.secrets) == (turn.turn_id, turn.conversation_id, turn.secrets)
    recorded = ctx.contingency("verifier-said-so", "verify", "detail", severity="info")
    assert isinstance(recorded, Contingency) and turn.contingencies == [recorded] == ctx.contingencies
    with pytest.raises(AttributeError):
        ctx.record_call  # noqa: B018 - a turn method not offered to components is not reached by a fallback
    assert not hasattr(CallContext, "__getattr__")


def test_a_routed_pool_plans_by_the_turns_overrides_and_calls_through_the_shared_pool():
    other = {"type": "scripted", "model": "scripted-2", "family": "other", "options": {"rules": []}}
    resolved = scripted_config(backends={"other": other})
    shared = BackendPool(resolved.config, make_host())
    overrides: dict[str, str] = {}
    routed = RoutedPool(shared, overrides)
    assert routed.planned("breadth") == shared.planned("breadth") == ("local", shared.settings("local"))
    overrides["breadth"] = "other"  # a gear re-routes a role later in the turn: seen at once
    assert routed.planned("breadth") == ("other", shared.settings("other")) != shared.planned("breadth")
    assert routed.chain("other") == shared.chain("other") and routed.shared is shared
    assert routed.config is shared.config and routed.settings("other") is shared.settings("other")
    assert not hasattr(RoutedPool, "__getattr__")
    with pytest.raises(AttributeError):
        routed.budget  # noqa: B018 - the pool's budget is the shared pool's, reached through ``shared``


def test_no_class_of_the_engine_or_the_kernel_proxies_by_getattr():
    proxies = [f"{_rel(path)}:{node.lineno} {cls.name}.__getattr__"
               for path, tree in _trees() for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
               for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"]
    assert proxies == []


# --- meta-tests over the source --------------------------------------------------------------------------


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _arguments(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    a = fn.args
    return [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])]


def _is_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.strip() in {"Any", "typing.Any"}
    return (isinstance(annotation, ast.Name) and annotation.id == "Any") or (
        isinstance(annotation, ast.Attribute) and annotation.attr == "Any")


def test_no_engine_or_kernel_signature_types_a_turn_a_gear_context_a_ctx_or_a_runtime_as_any():
    found = [f"{_rel(path)}:{fn.lineno} {fn.name}({arg.arg}: Any)"
             for path, tree in _trees() for fn in _functions(tree) for arg in _arguments(fn)
             if arg.arg in ENGINE_OBJECTS and _is_any(arg.annotation)]
    found += [f"{_rel(path)}:{fn.lineno} {fn.name} -> Any"
              for path, tree in _trees() for fn in _functions(tree)
              if fn.name in ENGINE_OBJECTS and _is_any(fn.returns)]
    assert found == []


def test_every_function_of_the_engine_and_the_kernel_is_annotated():
    """What ``disallow_untyped_defs`` asks of them in ``[tool.mypy]``, pinned without running mypy."""
    missing = []
    for path, tree in _trees():
        for fn in _functions(tree):
            bare = [a.arg for i, a in enumerate(_arguments(fn)) if a.annotation is None
                    and not (i == 0 and a.arg in ("self", "cls"))]
            if bare or fn.returns is None:
                missing.append(f"{_rel(path)}:{fn.lineno} {fn.name}" + (f" ({', '.join(bare)})" if bare else "")
                               + ("" if fn.returns is not None else " (no return type)"))
    assert missing == []


def _receiver(node: ast.expr) -> str:
    return ast.unparse(node)


def test_the_engine_never_indexes_a_turns_data_by_a_bare_string():
    """The engine's own state is in typed slots (``turn.stash``); what it hands plugins in ``ctx.data``
    goes through a ``DataKey`` declared once with its type (``ora_core.kernel.ctx_data``)."""
    found = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            target: ast.expr | None = None
            key: ast.expr | None = None
            if isinstance(node, ast.Subscript):
                target, key = node.value, node.slice
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
                  and node.func.attr in {"get", "setdefault", "pop"}):
                target, key = node.func.value, node.args[0]
            if (isinstance(target, ast.Attribute) and target.attr == "data"
                    and re.search(r"(^|\.)(turn|ctx|recorder)$", _receiver(target.value))
                    and isinstance(key, ast.Constant | ast.Name)):
                found.append(f"{_rel(path)}:{node.lineno} {ast.unparse(node)}")
    assert found == []


def test_each_stash_key_is_declared_once_at_module_level_under_a_name_of_its_own():
    declared: dict[str, list[str]] = {}
    for path in sorted(CORE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_level = {id(n.value) for n in tree.body if isinstance(n, ast.AnnAssign | ast.Assign) and n.value}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "StashKey"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                where = f"{_rel(path)}:{node.lineno}" + ("" if id(node) in module_level else " (not module level)")
                declared.setdefault(node.args[0].value, []).append(where)
    assert len(declared) >= 10, declared  # the engine's slots are declared where the scan looks
    assert {name: where for name, where in declared.items() if len(where) > 1 or "not module" in where[0]} == {}


IGNORE = re.compile(r"#\s*type:\s*ignore(?P<code>\[[^\]]*\])?(?P<rest>.*)$")


def test_a_type_ignore_names_its_error_and_says_why_on_the_same_line():
    bare = []
    for path in [*TYPED, *sorted((CORE / "kits").rglob("*.py"))]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = IGNORE.search(line)
            if match and (not match.group("code") or not re.search(r"#\s*\S", match.group("rest"))):
                bare.append(f"{_rel(path)}:{number}: {line.strip()}")
    assert bare == []
