"""One state directory, one instance: a second KafkaStreams of the same application on a
state.dir in use fails at start with Kafka Streams' message (StateDirectory.lockStateDirectory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streams_core import KafkaStreams, StreamsError
from streams_core.testing import FakeKafkaCluster

from . import harness
from .harness import Instance, counting_topology, passthrough_topology, running, streams_config

IN_USE = "this can happen if multiple instances of Kafka Streams are running in the same state directory"


def _cluster() -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    cluster.create_topic("in", 2)
    cluster.create_topic("out", 2)
    return cluster


async def test_a_second_instance_on_a_state_dir_in_use_fails_to_start(tmp_path: Path) -> None:
    cluster = _cluster()
    config = streams_config(tmp_path)
    async with running(cluster, counting_topology(), config) as first:
        second = Instance(cluster, counting_topology(), config)
        with pytest.raises(StreamsError, match=re.escape(IN_USE)) as caught:
            await second.start(wait=False)
        assert f"[{Path(config['state.dir']) / harness.APP}]" in str(caught.value)
        assert second.streams.state is KafkaStreams.State.CREATED and second.streams.threads == []
        assert await second.streams.close() is True
        harness.produce_words(cluster, "a b a")
        await harness.eventually(lambda: harness.counts(cluster) == {"a": 2, "b": 1}, what="the first instance's counts")
        assert first.streams.state is KafkaStreams.State.RUNNING
        assert len(cluster.members(harness.APP)) == 1
    async with running(cluster, counting_topology(), config) as after:
        assert after.streams.state is KafkaStreams.State.RUNNING


async def test_own_state_dirs_or_other_applications_share_nothing(tmp_path: Path) -> None:
    cluster = _cluster()
    async with running(cluster, counting_topology(), streams_config(tmp_path, instance=0)):
        async with running(cluster, counting_topology(), streams_config(tmp_path, instance=1)) as other:
            assert other.streams.state is KafkaStreams.State.RUNNING
        other_app = streams_config(tmp_path, {"application.id": "other-app"}, instance=0)
        async with running(cluster, counting_topology(), other_app) as other:
            assert other.streams.state is KafkaStreams.State.RUNNING


async def test_without_persistent_stores_nothing_is_locked(tmp_path: Path) -> None:
    """As Kafka Streams: a topology without persistent stores keeps no local state to protect."""
    cluster = _cluster()
    config = streams_config(tmp_path)
    async with running(cluster, passthrough_topology(), config):
        async with running(cluster, passthrough_topology(), config) as second:
            assert second.streams.state is KafkaStreams.State.RUNNING


async def test_a_start_that_fails_gives_the_directory_back(tmp_path: Path) -> None:
    cluster = FakeKafkaCluster()  # no source topic: start fails
    config = streams_config(tmp_path)
    with pytest.raises(StreamsError):
        await Instance(cluster, counting_topology(), config).start(wait=False)
    cluster.create_topic("in", 1)
    cluster.create_topic("out", 1)
    async with running(cluster, counting_topology(), config) as instance:
        assert instance.streams.state is KafkaStreams.State.RUNNING


async def test_a_start_that_fails_after_the_lock_closes_the_client_and_frees_the_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream thread whose clients cannot start is a dead thread: the default handler closes the
    client to ERROR, so its state directory is free again (before, the client stayed REBALANCING
    holding the lock)."""
    from streams_core.runtime.threads.thread_clients import ThreadClients

    cluster = _cluster()
    config = streams_config(tmp_path)
    failure = RuntimeError("the consumer cannot start")

    async def failing_start(self: ThreadClients) -> None:
        raise failure

    with monkeypatch.context() as patch:
        patch.setattr(ThreadClients, "start", failing_start)
        broken = Instance(cluster, counting_topology(), config)
        await broken.start(wait=False)
        await harness.eventually(lambda: broken.streams.state is KafkaStreams.State.ERROR, what="ERROR")
        assert broken.streams.errors == [failure]
    async with running(cluster, counting_topology(), config) as after:
        assert after.streams.state is KafkaStreams.State.RUNNING
    await broken.streams.close()
