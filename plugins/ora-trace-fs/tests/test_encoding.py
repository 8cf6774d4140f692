"""The trace's fast JSON: byte for byte what ``json`` writes where the text is for people,
the meaning of what ``json`` writes everywhere, and ``json`` itself for whatever ``orjson``
would change (NaN, infinities, enums, datetimes, tuples, big integers...)."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import random
import struct
from datetime import datetime, timezone

import pytest
from ora_trace_fs import encoding
from ora_trace_fs.encoding import checked, compact, pretty, pretty_bytes, respell_small_floats


def _reference(obj):
    return json.dumps(obj, indent=2, ensure_ascii=False, default=str)


def _meaning(obj) -> str:
    """What ``json`` reads back from ``json``'s own text, spelled canonically (NaN included)."""
    return json.dumps(json.loads(json.dumps(obj, ensure_ascii=False, default=str)), sort_keys=True)


class Plain(enum.Enum):
    RED = "red"


class Colour(str, enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: int


_ALPHABET = ['a', '"', '\\', '\n', ':', ' ', ',', '0', '.', 'e', '-', '5', '\x00', '\x1f', '\u2028', 'é', '😀',
             '{', '[', '\t', '\x7f']


def _random_document(rng: random.Random, depth: int = 0):
    def text() -> str:
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 12)))

    def number():
        roll = rng.random()
        if roll < 0.3:
            return rng.random() * 10 ** rng.randint(-12, 20) * rng.choice([1, -1])
        if roll < 0.5:
            return struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        if roll < 0.55:
            return rng.choice([0.0, -0.0, math.nan, math.inf, -math.inf, 1e-4, 9.99e-5, 1e-5, 1e-6])
        if roll < 0.7:
            return rng.randint(-2 ** 70, 2 ** 70)
        return round(rng.random(), rng.randint(0, 8))

    if depth > 3 or rng.random() < 0.5:
        return rng.choice([text, number, lambda: None, lambda: True, lambda: False, lambda: "0.00005",
                           lambda: '": 0.00001,', lambda: "1e-7\n", lambda: Colour.RED, lambda: Level.HIGH])()
    if rng.random() < 0.5:
        return [_random_document(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {text(): _random_document(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def test_pretty_is_json_dumps_indent_2_byte_for_byte_on_random_documents():
    rng = random.Random(20260523)
    via_orjson = 0
    for _ in range(4000):
        document = _random_document(rng)
        assert pretty(document) == _reference(document), document
        assert pretty_bytes(document) == _reference(document).encode("utf-8"), document
        via_orjson += checked(document) is not None
    assert via_orjson > 3000  # the fast path is the one taken, not the fallback


def test_pretty_escapes_every_code_point_as_json_does():
    for start in range(0, 0x11000, 0x800):
        chunk = "".join(chr(c) for c in range(start, start + 0x800) if not 0xD800 <= c < 0xE000)
        document = {chunk: [chunk, {"k": chunk}]}
        assert pretty(document) == _reference(document)


@pytest.mark.parametrize("value", [5.7e-05, -3.2e-05, 1e-05, 9.99e-06, 1.5e-07, 4.41e-09, 1e-10, 0.0001, 1e16, -0.0,
                                   1.7976931348623157e308, 5e-324])
def test_small_and_extreme_floats_are_spelled_as_json_spells_them(value):
    for document in (value, [value], {"a": value, "b": [value, {"c": value}]}, {"t": "x", "v": value}):
        assert pretty(document) == _reference(document)


def test_respelling_never_touches_a_string_that_looks_like_a_small_float():
    document = {"a": "0.000057", "b": ["1e-7", "x 0.00001,", "1e-7\n"], "0.00001": 0.00001, "c": '": 0.00001,'}
    text = respell_small_floats(json.dumps(document, indent=2, ensure_ascii=False).replace("1e-05", "0.00001")
                                .encode())
    assert text.decode() == _reference(document)


@pytest.mark.parametrize("value", [
    math.nan, math.inf, -math.inf, [1.0, math.nan], {"score": math.inf}, Plain.RED, {"e": Plain.RED},
    datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), {"when": datetime(2026, 1, 2)}, (1, 2), {"t": ("a",)},
    {1}, Point(1), 2 ** 70, {7: "int key"}, {None: 1, True: 2, 2.5: 3}, b"bytes",
])
def test_what_orjson_would_change_is_encoded_by_json_itself(value):
    assert checked(value) is None  # refused, or read back different: never used
    assert compact(value) == json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":")).encode()
    assert pretty(value) == _reference(value)


def test_compact_means_what_json_means():
    rng = random.Random(7)
    for _ in range(2000):
        document = _random_document(rng)
        assert _meaning(json.loads(compact(document))) == _meaning(document), document
    # str and int enums are their values in both
    assert json.loads(compact({"c": Colour.RED, "l": Level.HIGH})) == {"c": "red", "l": 3}


def test_what_json_cannot_encode_still_fails_by_name():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        compact(loop)
    with pytest.raises(TypeError):
        compact({(1, 2): "tuple keys are not JSON"})
    with pytest.raises(UnicodeEncodeError):
        compact({"lone surrogate": "\udcff"})


def test_without_orjson_everything_goes_through_json(monkeypatch):
    monkeypatch.setattr(encoding, "_orjson", None)
    rng = random.Random(11)
    for _ in range(300):
        document = _random_document(rng)
        assert checked(document) is None
        assert pretty(document) == _reference(document)
        assert compact(document) == json.dumps(document, ensure_ascii=False, default=str,
                                               separators=(",", ":")).encode()


def test_parts_of_an_accepted_document_are_trusted_only_within_remembering():
    document = {"values": [{"a": 1.5e-07}]}
    with encoding.remembering():
        compact(document)
        assert encoding.accepted(document)
        assert not encoding.accepted({"values": [{"a": 1.5e-07}]})  # an equal document, not this one
        assert pretty(document["values"], safe=True) == _reference(document["values"])
    assert not encoding.accepted(document)
    with_nan = {"nan": math.nan}
    with encoding.remembering():
        compact(with_nan)  # encoded by json (NaN): its parts are checked again where re-encoded
        assert not encoding.accepted(with_nan)
