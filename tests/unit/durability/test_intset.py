"""`IntSet` (auditor/durability/intset.py) answers as a Python set does, whatever order values come in
(ascending as a scan's, descending, random, runs of partitions), across chunk splits, at the int64 ends."""

from __future__ import annotations

import random

import pytest

from auditor.durability.intset import CHUNK, IntSet


def orders(n: int, seed: int) -> dict[str, list[int]]:
    rng = random.Random(seed)
    up = list(range(0, 3 * n, 3))
    shuffled = up[:]
    rng.shuffle(shuffled)
    parts = [up[i : i + 500] for i in range(0, len(up), 500)]
    rng.shuffle(parts)
    return {
        "ascending": up,
        "descending": up[::-1],
        "random": shuffled,
        "partitions": [v for part in parts for v in part],
        "repeats": [rng.randrange(0, n) for _ in range(2 * n)],
    }


@pytest.mark.parametrize("order", ["ascending", "descending", "random", "partitions", "repeats"])
def test_answers_as_a_python_set(order: str) -> None:
    values = orders(5 * CHUNK, seed=7)[order]
    s, plain = IntSet(), set()
    for v in values:
        assert s.add(v) == (v not in plain)
        plain.add(v)
    assert len(s) == len(plain)
    assert list(s) == sorted(plain)
    probes = range(-5, 3 * 5 * CHUNK + 5)
    assert [p for p in probes if p in s] == [p for p in probes if p in plain]
    assert "7" not in s and None not in s


def test_the_ends_of_int64() -> None:
    s = IntSet([2**63 - 1, -(2**63), 0])
    assert list(s) == [-(2**63), 0, 2**63 - 1] and 2**63 - 1 in s and 2**63 not in s
    with pytest.raises(OverflowError):
        s.add(2**63)
    assert len(s) == 3 and list(s) == [-(2**63), 0, 2**63 - 1]
    empty = IntSet()
    with pytest.raises(OverflowError):
        empty.add(-(2**63) - 1)
    assert len(empty) == 0 and list(empty) == [] and 0 not in empty
