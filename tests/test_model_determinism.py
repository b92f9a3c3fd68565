"""The model is a pure function of its seed."""

from __future__ import annotations

import io

import sample_data


def test_same_seed_gives_identical_jsonl_and_truth() -> None:
    a = sample_data.generate(seed=3, target_events=3000)
    b = sample_data.generate(seed=3, target_events=3000)
    assert a.jsonl_bytes() == b.jsonl_bytes()
    assert a.truth_json() == b.truth_json()


def test_same_seed_gives_identical_otlp() -> None:
    outs = []
    for _ in range(2):
        buf = io.BytesIO()
        from sample_data.otlp import write_otlp_jsonl

        write_otlp_jsonl(sample_data.generate(seed=3, target_events=2000), buf)
        outs.append(buf.getvalue())
    assert outs[0] == outs[1]


def test_different_seed_differs() -> None:
    a = sample_data.generate(seed=3, target_events=3000)
    b = sample_data.generate(seed=4, target_events=3000)
    assert a.jsonl_bytes() != b.jsonl_bytes()
