"""python.gc.gen0.threshold: the young-generation GC threshold a stream thread raises, and only raises."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams_core.runtime.threads.gc_policy import raise_gen0_threshold
from streams_core.testing import FakeKafkaCluster

from .harness import passthrough_topology, running, streams_config


@pytest.fixture(autouse=True)
def python_defaults() -> Iterator[None]:
    """Each test starts from Python's own thresholds and leaves the process's as it found them."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_raises_only_the_young_generation() -> None:
    assert raise_gen0_threshold(10_000)
    assert gc.get_threshold() == (10_000, 10, 10)


def test_never_lowers_a_threshold_already_higher() -> None:
    gc.set_threshold(50_000, 20, 30)
    assert not raise_gen0_threshold(10_000)
    assert gc.get_threshold() == (50_000, 20, 30)


def test_zero_leaves_the_process_alone() -> None:
    assert not raise_gen0_threshold(0)
    assert gc.get_threshold() == (700, 10, 10)


async def test_a_stream_thread_raises_it_when_it_starts(tmp_path: Path) -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("in", 1)
    cluster.create_topic("out", 1)
    async with running(cluster, passthrough_topology(), streams_config(tmp_path)):
        assert gc.get_threshold() == (10_000, 10, 10)


async def test_a_stream_thread_configured_with_zero_leaves_it(tmp_path: Path) -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("in", 1)
    cluster.create_topic("out", 1)
    async with running(cluster, passthrough_topology(), streams_config(tmp_path, {"python.gc.gen0.threshold": 0})):
        assert gc.get_threshold() == (700, 10, 10)
