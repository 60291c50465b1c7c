"""Where stream threads run (`stream.threads.mode`, docs/runtime.md): the rules of `auto`, what
`process` refuses, and a topology that cannot be shipped failing the construction with the key."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from streams_core import KafkaStreams, Topology
from streams_core.config import StreamsConfig
from streams_core.errors import ConfigError
from streams_core.processor.processor import Processor, Record
from streams_core.runtime.thread_mode import in_process

BASE = {"application.id": "mode-app", "bootstrap.servers": "127.0.0.1:1"}


class Forward(Processor[Any, Any, Any, Any]):
    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(record)


def topology(source: str = "in", pattern: bool = False) -> Topology:
    topo = Topology()
    if pattern:
        topo.add_source("SOURCE", pattern=r"in-.*")
    else:
        topo.add_source("SOURCE", source)
    return topo.add_processor("P", Forward, "SOURCE").add_sink("SINK", "out", "P")


def inline(extra: dict[str, Any], *, own_supplier: bool = False, pattern: bool = False) -> bool:
    streams = KafkaStreams(topology(pattern=pattern), BASE | {"stream.threads.mode": "inline"})
    return in_process(StreamsConfig(BASE | extra), streams.metadata, own_supplier=own_supplier)


def test_auto_runs_one_thread_inline_and_several_as_workers() -> None:
    assert inline({}) is True
    assert inline({"num.stream.threads": 2}) is False
    assert inline({"num.stream.threads": 2, "stream.threads.mode": "inline"}) is True
    assert inline({"num.stream.threads": 1, "stream.threads.mode": "process"}) is False


def test_auto_keeps_batch_runs_patterns_and_own_suppliers_inline() -> None:
    assert inline({"num.stream.threads": 2, "autostop.at": "eol"}) is True
    assert inline({"num.stream.threads": 2}, pattern=True) is True
    assert inline({"num.stream.threads": 2}, own_supplier=True) is True


@pytest.mark.parametrize(("extra", "pattern"), [({"autostop.at": "eol"}, False), ({}, True)])
def test_process_mode_refuses_what_the_instance_coordinates(extra: dict[str, Any], pattern: bool) -> None:
    with pytest.raises(ConfigError) as caught:
        inline({"stream.threads.mode": "process", **extra}, pattern=pattern)
    assert caught.value.key == "stream.threads.mode"


def test_a_topology_that_cannot_be_shipped_fails_the_construction_naming_the_key() -> None:
    lock = threading.Lock()

    class Locked(Forward):
        guard = lock

        def process(self, record: Record[Any, Any]) -> None:
            with self.guard:
                super().process(record)

    topo = Topology().add_source("SOURCE", "in").add_processor("P", Locked, "SOURCE").add_sink("SINK", "out", "P")
    with pytest.raises(ConfigError) as caught:
        KafkaStreams(topo, BASE | {"num.stream.threads": 2})
    assert caught.value.key == "stream.threads.mode"
    assert "cannot be shipped to a worker process" in str(caught.value) and "inline" in str(caught.value)
    KafkaStreams(topo, BASE | {"num.stream.threads": 2, "stream.threads.mode": "inline"})
