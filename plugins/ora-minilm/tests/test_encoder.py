"""Batching, padding, truncation, ordering, normalisation and thread safety of ``encode``."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest


def test_vectors_are_unit_length_float32_and_384_wide(encoder: Any, varied_texts: list[str]) -> None:
    import numpy as np

    vectors = encoder.encode(varied_texts)
    assert vectors.shape == (len(varied_texts), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_a_text_embeds_the_same_alone_and_inside_a_padded_batch(encoder: Any, varied_texts: list[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    texts = ["Cats purr.", "The tower is 330 metres tall.", "supplemental request cap", "hello",
             "What is the cap on supplemental requests per step?", "Yes."]
    lengths = [len(e.ids) for e in encoder.tokenize(texts)]
    batches: list[tuple[int, int]] = []
    real = encoder._encode_batch

    def recording(encodings: list[Any], length: int) -> Any:
        batches.append((len(encodings), length))
        return real(encodings, length)

    monkeypatch.setattr(encoder, "_encode_batch", recording)
    together = encoder.encode(texts)
    assert batches[0] == (2, max(lengths))  # the two longest share a batch, the shorter one padded
    assert sum(n for n, _ in batches) == len(texts)
    for i, text in enumerate(texts):
        alone = encoder.encode([text])[0]
        assert np.abs(alone - together[i]).max() < 1e-5, text
    mixed = encoder.encode(varied_texts, batch_size=64)  # long and short: batches split by length
    for i in (0, 3, 14, 17, len(varied_texts) - 4):
        assert np.abs(encoder.encode([varied_texts[i]])[0] - mixed[i]).max() < 1e-5, varied_texts[i][:40]


def test_results_come_back_in_input_order_whatever_the_length_sorting(encoder: Any,
                                                                      varied_texts: list[str]) -> None:
    import numpy as np

    forward = encoder.encode(varied_texts, batch_size=4)
    backward = encoder.encode(varied_texts[::-1], batch_size=7)[::-1]
    assert np.abs(forward - backward).max() < 1e-5
    one_by_one = np.stack([encoder.encode([t])[0] for t in varied_texts[:8]])
    assert np.abs(forward[:8] - one_by_one).max() < 1e-5
    # and the rows really differ: a mix-up would not go unnoticed
    assert float(forward[0] @ forward[5]) < 0.9


def test_duplicates_and_identical_texts_get_identical_rows(encoder: Any) -> None:
    import numpy as np

    vectors = encoder.encode(["Cats purr.", "Dogs bark.", "Cats purr."])
    assert np.array_equal(vectors[0], vectors[2])
    assert not np.array_equal(vectors[0], vectors[1])


def test_truncation_is_at_the_models_256_tokens_not_the_tokenizer_files_128(encoder: Any) -> None:
    import numpy as np

    head = " ".join(f"alpha{i % 7}" for i in range(200))  # about 400 word pieces
    a = encoder.encode([head + " and then a completely different ending about whales"])[0]
    b = encoder.encode([head + " with another tail that talks of volcanoes instead"])[0]
    assert np.abs(a - b).max() < 1e-6  # past 256 pieces nothing counts
    ids = encoder.tokenize([head])[0].ids
    assert len(ids) == 256 and ids[-1] == encoder.tokenizer.token_to_id("[SEP]")
    short = " ".join(f"alpha{i % 7}" for i in range(40))  # ~80 pieces: past 128 would be cut by tokenizer.json
    c = encoder.encode([short + " " + "beta " * 60])[0]
    d = encoder.encode([short + " " + "gamma " * 60])[0]
    assert np.abs(c - d).max() > 1e-3  # pieces 128-256 still count


def test_a_token_budget_splits_batches_without_changing_results(encoder: Any, varied_texts: list[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np
    from ora_minilm import encoder as encoder_module

    whole = encoder.encode(varied_texts)
    monkeypatch.setattr(encoder_module, "MAX_BATCH_TOKENS", 300)  # long texts alone, short ones in twos
    calls: list[int] = []
    real = encoder._encode_batch

    def counting(encodings: list[Any], length: int) -> Any:
        calls.append(len(encodings) * length)
        return real(encodings, length)

    monkeypatch.setattr(encoder, "_encode_batch", counting)
    split = encoder.encode(varied_texts)
    assert max(calls) <= 300 and len(calls) > 5
    assert np.abs(whole - split).max() < 1e-5


def test_empty_input_and_bad_arguments(encoder: Any) -> None:
    assert encoder.encode([]).shape == (0, 384)
    with pytest.raises(TypeError, match="not one string"):
        encoder.encode("a bare string")
    with pytest.raises(TypeError, match="item 1 is int"):
        encoder.encode(["fine", 3])
    with pytest.raises(TypeError, match="item 2 is list"):
        encoder.encode(["fine", "also fine", ["not", "a", "string"]])
    with pytest.raises(ValueError, match="batch_size"):
        encoder.encode(["fine"], batch_size=0)


def test_concurrent_encodes_from_threads_match_serial_results(encoder: Any, varied_texts: list[str]) -> None:
    import numpy as np

    varied_texts = [t for t in varied_texts if len(t) < 200]  # keep it quick: no 256-token texts
    expected = encoder.encode(varied_texts, batch_size=8)
    results: dict[int, Any] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            texts = varied_texts[n:] + varied_texts[:n]  # each thread a different rotation
            results[n] = np.roll(encoder.encode(texts, batch_size=8), n, axis=0)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread and asserted on
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for n in range(4):
        assert np.abs(results[n] - expected).max() < 1e-5, n


def test_a_first_load_raced_by_many_threads_loads_the_model_once(model_dir: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight threads ask for the encoder at the same instant while nothing is cached (the
    session's cache is set aside for this test): exactly one of them loads the model."""
    from ora_minilm import encoder as encoder_module
    from ora_minilm import get_encoder

    monkeypatch.setattr(encoder_module, "_encoders", {})  # a first load, as in a fresh process
    loads: list[str] = []
    real_encoder = encoder_module.MiniLMEncoder

    class CountingEncoder(real_encoder):  # type: ignore[misc, valid-type]
        def __init__(self, path: Any) -> None:
            loads.append(threading.current_thread().name)
            time.sleep(0.2)  # hold the window open: without the lock every thread would get here
            super().__init__(path)

    monkeypatch.setattr(encoder_module, "MiniLMEncoder", CountingEncoder)
    workers = 8
    start = threading.Barrier(workers)
    got: dict[int, Any] = {}
    errors: dict[int, BaseException] = {}

    def ask(n: int) -> None:
        try:
            start.wait(timeout=30)
            got[n] = get_encoder(model_dir)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread and asserted on
            errors[n] = exc

    threads = [threading.Thread(target=ask, args=(n,), name=f"first-load-{n}") for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not [t.name for t in threads if t.is_alive()], "a thread is still loading after 60 s"
    assert errors == {}
    assert len(loads) == 1, f"the model was loaded {len(loads)} times, by {loads}"
    assert sorted(got) == list(range(workers)) and len({id(e) for e in got.values()}) == 1
    assert got[0] is get_encoder() is encoder_module._encoders[str(model_dir.resolve())]
