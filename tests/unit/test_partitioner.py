"""murmur2 as Java's Utils.murmur2 (vectors from Kafka's UtilsTest), and agreement with aiokafka."""

from __future__ import annotations

import random

import pytest

from streams_core.common.partitioner import default_partition, murmur2, to_positive

# Expected values as asserted by apache/kafka clients/.../utils/UtilsTest.testMurmur2.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS.items())
def test_murmur2_matches_java(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_is_a_signed_32_bit_int() -> None:
    rng = random.Random(1)
    for _ in range(500):
        value = murmur2(rng.randbytes(rng.randrange(0, 40)))
        assert -(2**31) <= value < 2**31


def test_murmur2_accepts_bytearray_and_memoryview() -> None:
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482


def test_to_positive_clears_the_sign_bit() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_default_partition() -> None:
    assert default_partition(b"foobar", 10) == to_positive(-790332482) % 10
    with pytest.raises(ValueError):
        default_partition(b"x", 0)
    with pytest.raises(ValueError):
        default_partition(None, 3)  # type: ignore[arg-type]


def test_agrees_with_aiokafka() -> None:
    from aiokafka.partitioner import DefaultPartitioner  # type: ignore[import-untyped]
    from aiokafka.partitioner import murmur2 as aiokafka_murmur2  # type: ignore[import-untyped]

    rng = random.Random(2)
    partitioner = DefaultPartitioner()
    for length in range(0, 70):
        for _ in range(5):
            data = rng.randbytes(length)
            assert murmur2(data) & 0xFFFFFFFF == aiokafka_murmur2(data) & 0xFFFFFFFF
            n = rng.randrange(1, 50)
            assert default_partition(data, n) == partitioner(data, list(range(n)), list(range(n)))


def test_the_compiled_murmur2_is_built_and_agrees_with_the_reference() -> None:
    import random
    import shutil

    from streams_core.common import partitioner

    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: the pure-Python murmur2 is used")
    assert partitioner.murmur2 is not partitioner.murmur2_py, "make setup builds streams_core/common/_murmur2.c"
    rng = random.Random(7)
    samples = [b"", b"a", b"ab", b"abc", b"abcd", bytearray(b"kafka"), memoryview(b"streams")]
    samples += [rng.randbytes(rng.randrange(0, 64)) for _ in range(2000)]
    for data in samples:
        assert partitioner.murmur2(data) == partitioner.murmur2_py(data), data
