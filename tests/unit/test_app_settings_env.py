"""Every Kafka Streams property is settable as STREAMS_<NAME> (dots as underscores), as a container sets them."""

from __future__ import annotations

import argparse
import socket
from typing import Any

import pytest

from app.settings import (
    FLAG_PROPERTIES,
    add_service_arguments,
    default_application_server,
    env_name,
    properties_from_env,
    settings_from,
)
from streams_core import Serdes, StreamsConfig
from streams_core.processor.timestamp_extractor import WallclockTimestampExtractor

SAMPLES: dict[str, tuple[str, Any]] = {
    # property: (the environment's text, what StreamsConfig makes of it); none of them the default
    "application.id": ("orders-app", "orders-app"),
    "bootstrap.servers": ("kafka-1:9092,kafka-2:9092", "kafka-1:9092,kafka-2:9092"),
    "application.server": ("wc-0.wc:7070", "wc-0.wc:7070"),
    "state.dir": ("/var/lib/streams", "/var/lib/streams"),
    "num.stream.threads": ("3", 3),
    "stream.threads.mode": ("process", "process"),
    "num.standby.replicas": ("1", 1),
    "group.protocol": ("streams", "streams"),
    "acceptable.recovery.lag": ("500", 500),
    "max.warmup.replicas": ("3", 3),
    "probing.rebalance.interval.ms": ("5000", 5000),
    "commit.interval.ms": ("250", 250),
    "processing.guarantee": ("exactly_once_v2", "exactly_once_v2"),
    "statestore.cache.max.bytes": ("0", 0),
    "buffered.records.per.partition": ("50", 50),
    "max.task.idle.ms": ("25", 25),
    "default.key.serde": ("string", Serdes.String()),
    "default.value.serde": ("long", Serdes.Long()),
    "default.timestamp.extractor": ("streams_core.processor.timestamp_extractor.WallclockTimestampExtractor", WallclockTimestampExtractor),
    "default.deserialization.exception.handler": ("log_and_continue", "log_and_continue"),
    "default.production.exception.handler": ("continue", "continue"),
    "errors.dead.letter.queue.topic.name": ("orders-dlq", "orders-dlq"),
    "autostop.at": ("eol", "eol"),
    "replication.factor": ("3", 3),
    "windowstore.changelog.additional.retention.ms": ("3600000", 3_600_000),
    "poll.ms": ("20", 20),
    "state.cleanup.delay.ms": ("1000", 1000),
    "max.partition.time.lag.ms": ("5000", 5000),
    "topology.optimization": ("all", "all"),
    "python.gc.gen0.threshold": ("50000", 50000),
}


def test_samples_cover_every_property() -> None:
    assert set(SAMPLES) == set(StreamsConfig.documentation()), "a new property needs a sample here"


def test_env_names_use_underscores() -> None:
    assert env_name("num.stream.threads") == "STREAMS_NUM_STREAM_THREADS"
    assert env_name("errors.dead.letter.queue.topic.name") == "STREAMS_ERRORS_DEAD_LETTER_QUEUE_TOPIC_NAME"


@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_every_property_from_its_env_var(key: str) -> None:
    text, expected = SAMPLES[key]
    found = properties_from_env({env_name(key): text, "STREAMS_UNRELATED": "x", "PATH": "/bin"})
    assert found == {key: text}
    config = StreamsConfig({"application.id": "app", "bootstrap.servers": "k:9092", **found})
    value = config[key]
    if isinstance(expected, type):
        assert isinstance(value, expected)
    elif key.endswith(".serde"):
        assert type(value) is type(expected)
    else:
        assert value == expected
    assert value != StreamsConfig.documentation()[key][0]


def test_a_client_key_from_its_env_var() -> None:
    found = properties_from_env({"STREAMS_SESSION_TIMEOUT_MS": "6000", "STREAMS_HEARTBEAT_INTERVAL_MS": ""})
    assert found == {"session.timeout.ms": "6000"}
    config = StreamsConfig({"application.id": "app", "bootstrap.servers": "k:9092", **found})
    assert config.client_overrides("main.consumer") == {"session.timeout.ms": "6000"}


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_service_arguments(parser, application_id="wordcount")
    return parser.parse_args(argv)


def test_env_properties_reach_the_service_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMS_COMMIT_INTERVAL_MS", "250")
    monkeypatch.setenv("STREAMS_NUM_STREAM_THREADS", "2")
    monkeypatch.setenv("STREAMS_NUM_STANDBY_REPLICAS", "1")
    monkeypatch.setenv("STREAMS_STATE_DIR", "/data")
    settings = settings_from(_parse(["--application-server", "127.0.0.1:7071"]))
    assert settings.properties == {"commit.interval.ms": "250", "num.stream.threads": "2"}
    assert not FLAG_PROPERTIES & set(settings.properties), "flag properties go through the flags"
    assert (settings.num_standby_replicas, settings.state_dir) == (1, "/data")


def test_a_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMS_APPLICATION_ID", "from-env")
    assert settings_from(_parse(["--application-id", "from-flag"])).application_id == "from-flag"
    assert settings_from(_parse([])).application_id == "from-env"


def test_application_server_defaults_to_the_hostname_in_a_container() -> None:
    assert default_application_server({"STREAMS_PORT": "7070"}) == f"{socket.gethostname()}:7070"
    assert default_application_server({}) == "127.0.0.1:7070"
