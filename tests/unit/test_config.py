"""StreamsConfig: Kafka Streams property names, defaults, parsing and errors that name the key."""

from __future__ import annotations

import os
import pathlib
import tempfile
from typing import Any

import pytest

from streams_core import ConfigError, Serde, Serdes, StreamsConfig
from streams_core.config import CLIENT_KEYS, CLIENT_PREFIXES, topology_optimizations

BASE = {"application.id": "app"}

EXPECTED_DEFAULTS: dict[str, Any] = {
    "application.id": None,
    "bootstrap.servers": None,
    "application.server": "",
    "state.dir": os.path.join(tempfile.gettempdir(), "kafka-streams"),
    "num.stream.threads": 1,
    "stream.threads.mode": "auto",
    "group.protocol": "classic",
    "num.standby.replicas": 0,
    "acceptable.recovery.lag": 10_000,
    "max.warmup.replicas": 2,
    "probing.rebalance.interval.ms": 600_000,
    "commit.interval.ms": 30_000,
    "processing.guarantee": "at_least_once",
    "statestore.cache.max.bytes": 10 * 1024 * 1024,
    "buffered.records.per.partition": 1000,
    "max.task.idle.ms": 0,
    "default.key.serde": Serdes.Bytes(),
    "default.value.serde": Serdes.Bytes(),
    "default.timestamp.extractor": None,
    "default.deserialization.exception.handler": "log_and_fail",
    "default.production.exception.handler": "fail",
    "errors.dead.letter.queue.topic.name": None,
    "autostop.at": None,
    "replication.factor": -1,
    "windowstore.changelog.additional.retention.ms": 86_400_000,
    "poll.ms": 100,
    "state.cleanup.delay.ms": 600_000,
    "max.partition.time.lag.ms": 60_000,
    "topology.optimization": "none",
    "python.gc.gen0.threshold": 10_000,
}


def config(**props: Any) -> StreamsConfig:
    """A config from keyword arguments whose underscores stand for the dots of property names."""
    return StreamsConfig(BASE | {k.replace("__", "."): v for k, v in props.items()})


def error_for(props: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        StreamsConfig(props)
    return info.value


# --- defaults -------------------------------------------------------------------------------


def test_documentation_lists_exactly_the_kafka_streams_keys_with_their_defaults() -> None:
    doc = StreamsConfig.documentation()
    assert {k: default for k, (default, _) in doc.items()} == EXPECTED_DEFAULTS
    assert all(isinstance(text, str) and text for _, text in doc.values())


@pytest.mark.parametrize("key", sorted(set(EXPECTED_DEFAULTS) - {"application.id"}))
def test_every_key_defaults_as_documented(key: str) -> None:
    cfg = StreamsConfig(BASE)
    assert cfg[key] == EXPECTED_DEFAULTS[key]
    assert not cfg.is_set(key)


def test_unset_keys_are_not_explicit() -> None:
    assert StreamsConfig(BASE).explicit() == {"application.id": "app"}


def test_reads_as_a_mapping_of_every_key() -> None:
    cfg = config(linger__ms=5)
    assert set(cfg) == set(EXPECTED_DEFAULTS) | {"linger.ms"}
    assert len(cfg) == len(EXPECTED_DEFAULTS) + 1
    assert cfg.get("no.such.key") is None
    assert "application.id" in cfg and "linger.ms" in cfg


# --- string parsing (environment variables, property files) ----------------------------------


@pytest.mark.parametrize(
    ("key", "text", "value"),
    [
        ("num.stream.threads", "4", 4),
        ("num.standby.replicas", " 2 ", 2),
        ("group.protocol", "STREAMS", "streams"),
        ("commit.interval.ms", "100", 100),
        ("statestore.cache.max.bytes", "0", 0),
        ("buffered.records.per.partition", "1", 1),
        ("max.task.idle.ms", "-1", -1),
        ("replication.factor", "3", 3),
        ("poll.ms", "0", 0),
        ("state.cleanup.delay.ms", "1000", 1000),
        ("max.partition.time.lag.ms", "5", 5),
        ("processing.guarantee", "EXACTLY_ONCE_V2", "exactly_once_v2"),
        ("processing.guarantee", "exactly-once-v2", "exactly_once_v2"),
        ("topology.optimization", "NONE", "none"),
        ("autostop.at", "eol", "eol"),
        ("autostop.at", "", None),
        ("default.deserialization.exception.handler", "LOG_AND_CONTINUE", "log_and_continue"),
        ("default.deserialization.exception.handler", "log-and-continue", "log_and_continue"),
        ("default.production.exception.handler", "Continue", "continue"),
        ("application.server", "127.0.0.1:7070", "127.0.0.1:7070"),
        ("bootstrap.servers", "a:9092,b:9093", "a:9092,b:9093"),
        ("state.dir", "/tmp/x", "/tmp/x"),
    ],
)
def test_string_values_are_parsed(key: str, text: str, value: Any) -> None:
    cfg = StreamsConfig(BASE | {key: text})
    assert cfg[key] == value
    assert cfg.is_set(key)


def test_integral_floats_are_integers() -> None:
    assert config(num__stream__threads=2.0)["num.stream.threads"] == 2


def test_bootstrap_servers_may_be_a_list() -> None:
    assert config(bootstrap__servers=["a:1", "b:2"])["bootstrap.servers"] == "a:1,b:2"


def test_state_dir_accepts_a_path(tmp_path: pathlib.Path) -> None:
    assert config(state__dir=tmp_path)["state.dir"] == str(tmp_path)


def test_old_cache_key_is_an_alias() -> None:
    cfg = StreamsConfig(BASE | {"cache.max.bytes.buffering": "1024"})
    assert cfg["statestore.cache.max.bytes"] == 1024
    assert cfg["cache.max.bytes.buffering"] == 1024
    assert cfg.is_set("cache.max.bytes.buffering")


# --- bad values: the error names the key and what is accepted --------------------------------

INT_KEYS = {
    "num.stream.threads": 1,
    "num.standby.replicas": 0,
    "commit.interval.ms": 0,
    "statestore.cache.max.bytes": 0,
    "buffered.records.per.partition": 1,
    "max.task.idle.ms": -1,
    "replication.factor": -1,
    "poll.ms": 0,
    "state.cleanup.delay.ms": 0,
    "max.partition.time.lag.ms": 0,
}


@pytest.mark.parametrize("key", sorted(INT_KEYS))
@pytest.mark.parametrize("bad", ["ten", "1.5", 1.5, True, None, [1]])
def test_integer_keys_reject_non_integers(key: str, bad: Any) -> None:
    err = error_for(BASE | {key: bad})
    assert err.key == key
    assert str(err).startswith(f"{key}: ")
    assert "expected an integer" in str(err)


@pytest.mark.parametrize(("key", "minimum"), sorted(INT_KEYS.items()))
def test_integer_keys_reject_values_below_their_minimum(key: str, minimum: int) -> None:
    err = error_for(BASE | {key: str(minimum - 1)})
    assert err.key == key
    assert f">= {minimum}" in str(err)
    assert StreamsConfig(BASE | {key: minimum})[key] == minimum


@pytest.mark.parametrize(
    ("key", "bad", "accepted"),
    [
        ("processing.guarantee", "exactly_twice", ["at_least_once", "exactly_once", "exactly_once_v2"]),
        ("topology.optimization", "some", ["none", "all"]),
        ("group.protocol", "consumer", ["classic", "streams"]),
        ("autostop.at", "now", ["eol"]),
        ("default.deserialization.exception.handler", "ignore", ["log_and_fail", "log_and_continue", "dead_letter"]),
        ("default.production.exception.handler", "retry", ["fail", "continue"]),
    ],
)
def test_choice_keys_list_what_is_accepted(key: str, bad: str, accepted: list[str]) -> None:
    err = error_for(BASE | {key: bad})
    assert err.key == key
    assert repr(bad) in str(err)
    for choice in accepted:
        assert choice in str(err)


@pytest.mark.parametrize(
    ("asked", "kept", "turned_on"),
    [
        ("none", "none", set()),
        ("all", "all", {"reuse.ktable.source.topics", "merge.repartition.topics", "single.store.self.join"}),
        ("single.store.self.join", "single.store.self.join", {"single.store.self.join"}),
        ("reuse.ktable.source.topics", "reuse.ktable.source.topics", {"reuse.ktable.source.topics"}),
        (" merge.repartition.topics , reuse.ktable.source.topics", "merge.repartition.topics,reuse.ktable.source.topics",
         {"merge.repartition.topics", "reuse.ktable.source.topics"}),
    ],
)  # fmt: skip
def test_topology_optimizations_accepted(asked: str, kept: str, turned_on: set[str]) -> None:
    """StreamsConfigTest.shouldSpecifyOptimizationWhenExplicitlyAddedToConfigs, shouldAllowMultipleOptimizations,
    shouldEnableAllOptimizationsWithOptimizeConfig, shouldNotEnableAnyOptimizationsWithNoOptimizationConfig."""
    assert StreamsConfig(BASE | {"topology.optimization": asked})["topology.optimization"] == kept
    assert topology_optimizations(kept) == turned_on


@pytest.mark.parametrize(
    "asked",
    ["all,none", "none,reuse.ktable.source.topics", "reuse.ktable.source.topics,maybe", "maybe"],
)
def test_topology_optimization_lists_kafka_refuses(asked: str) -> None:
    """StreamsConfigTest.shouldThrowExceptionWhenTopologyOptimizationOnAndOff, ...OffAndSet,
    ...WhenOptimizationDoesNotExistInList, ...WhenTopologyOptimizationDoesNotExist."""
    assert error_for(BASE | {"topology.optimization": asked}).key == "topology.optimization"


def test_single_store_self_join_is_accepted_with_the_others() -> None:
    """StreamsConfigTest.shouldEnableSelfJoin and shouldAllowMultipleOptimizations with the third one."""
    three = "single.store.self.join,reuse.ktable.source.topics,merge.repartition.topics"
    assert set(StreamsConfig(BASE | {"topology.optimization": three})["topology.optimization"].split(",")) == {
        "single.store.self.join", "reuse.ktable.source.topics", "merge.repartition.topics"}
    assert topology_optimizations(three) == topology_optimizations("all")


@pytest.mark.parametrize("bad", ["my app", "app/1", "app:1", "ünïcode", "app?"])
def test_application_id_must_be_usable_in_topic_names(bad: str) -> None:
    err = error_for({"application.id": bad})
    assert err.key == "application.id"
    assert "letters, digits" in str(err)


@pytest.mark.parametrize("bad", ["", "   ", 42])
def test_application_id_must_be_a_non_empty_string(bad: Any) -> None:
    assert error_for({"application.id": bad}).key == "application.id"


def test_application_id_is_required() -> None:
    err = error_for({"bootstrap.servers": "localhost:9092"})
    assert err.key == "application.id"
    assert "required" in str(err)


def test_application_id_may_be_waived() -> None:
    assert StreamsConfig({}, required=())["application.id"] is None


@pytest.mark.parametrize("bad", ["localhost", "localhost:", ":9092", "host:port", "host:0", "host:70000", "a:1,b"])
def test_bootstrap_servers_must_be_host_port_pairs(bad: str) -> None:
    err = error_for(BASE | {"bootstrap.servers": bad})
    assert err.key == "bootstrap.servers"
    assert "host:port" in str(err)


@pytest.mark.parametrize("bad", ["localhost", "host:x", 7070])
def test_application_server_must_be_host_port(bad: Any) -> None:
    assert error_for(BASE | {"application.server": bad}).key == "application.server"


@pytest.mark.parametrize("bad", ["", 5, b"/tmp"])
def test_state_dir_must_be_a_path(bad: Any) -> None:
    assert error_for(BASE | {"state.dir": bad}).key == "state.dir"


def test_non_string_keys_are_rejected() -> None:
    assert "must be strings" in str(error_for(BASE | {1: "x"}))


# --- unknown keys -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("application_id", "application.id"),
        ("num.stream.thread", "num.stream.threads"),
        ("commit.interval", "commit.interval.ms"),
        ("processing.guarantees", "processing.guarantee"),
        ("max.poll.record", "max.poll.records"),
    ],
)
def test_unknown_key_suggests_the_closest_known_one(typo: str, meant: str) -> None:
    err = error_for(BASE | {typo: "1"})
    assert err.key == typo
    assert "unknown configuration key" in str(err)
    assert f"did you mean {meant!r}?" in str(err)


def test_unknown_key_without_a_close_match_lists_what_is_known() -> None:
    message = str(error_for(BASE | {"zzz": 1}))
    assert "did you mean" not in message
    assert "unknown configuration key. Known keys:" in message
    assert "application.id" in message and "main.consumer." in message


# --- exactly-once and the dead-letter handler -------------------------------------------------


@pytest.mark.parametrize("guarantee", ["exactly_once", "exactly_once_v2"])
def test_exactly_once_commits_every_100_ms_unless_set(guarantee: str) -> None:
    cfg = config(processing__guarantee=guarantee)
    assert cfg.exactly_once
    assert cfg["commit.interval.ms"] == 100
    assert not cfg.is_set("commit.interval.ms")
    assert config(processing__guarantee=guarantee, commit__interval__ms="5000")["commit.interval.ms"] == 5000


def test_at_least_once_keeps_the_30_second_commit_interval() -> None:
    cfg = config(processing__guarantee="at_least_once")
    assert not cfg.exactly_once
    assert cfg["commit.interval.ms"] == 30_000


def test_dropping_exactly_once_restores_the_default_commit_interval() -> None:
    eos = config(processing__guarantee="exactly_once_v2")
    assert eos.with_overrides({"processing.guarantee": "at_least_once"})["commit.interval.ms"] == 30_000


def test_dead_letter_handler_requires_the_dead_letter_topic() -> None:
    err = error_for(BASE | {"default.deserialization.exception.handler": "dead_letter"})
    assert err.key == "errors.dead.letter.queue.topic.name"
    assert "dead_letter" in str(err)
    cfg = config(
        default__deserialization__exception__handler="dead_letter", errors__dead__letter__queue__topic__name="dlq"
    )
    assert cfg["errors.dead.letter.queue.topic.name"] == "dlq"


def test_dead_letter_topic_must_not_be_empty() -> None:
    assert error_for(BASE | {"errors.dead.letter.queue.topic.name": " "}).key == "errors.dead.letter.queue.topic.name"


# --- client keys and prefixes -----------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(CLIENT_KEYS))
def test_common_client_keys_pass_bare(key: str) -> None:
    assert config(**{key.replace(".", "__"): "1"})[key] == "1"


@pytest.mark.parametrize("prefix", CLIENT_PREFIXES)
def test_any_key_passes_with_a_client_prefix(prefix: str) -> None:
    cfg = StreamsConfig(BASE | {f"{prefix}some.setting": "x"})
    assert cfg[f"{prefix}some.setting"] == "x"
    assert cfg.is_set(f"{prefix}some.setting")


def test_client_override_precedence_main_consumer_beats_consumer_beats_bare() -> None:
    cfg = StreamsConfig(
        BASE
        | {
            "max.poll.records": "10",
            "consumer.max.poll.records": "20",
            "main.consumer.max.poll.records": "30",
            "session.timeout.ms": "1",
            "consumer.session.timeout.ms": "2",
            "request.timeout.ms": "7",
        }
    )
    assert cfg.client_overrides("main.consumer") == {
        "max.poll.records": "30",
        "session.timeout.ms": "2",
        "request.timeout.ms": "7",
    }
    assert cfg.client_overrides("restore.consumer") == {
        "max.poll.records": "20",
        "session.timeout.ms": "2",
        "request.timeout.ms": "7",
    }
    assert cfg.client_overrides("consumer")["max.poll.records"] == "20"


def test_restore_and_global_prefixes_apply_only_to_their_consumer() -> None:
    cfg = StreamsConfig(BASE | {"restore.consumer.fetch.max.bytes": 1, "global.consumer.fetch.max.bytes": 2})
    assert cfg.client_overrides("restore.consumer") == {"fetch.max.bytes": 1}
    assert cfg.client_overrides("global.consumer") == {"fetch.max.bytes": 2}
    assert cfg.client_overrides("main.consumer") == {}


def test_producer_and_admin_prefixes_do_not_leak_into_consumers() -> None:
    cfg = StreamsConfig(BASE | {"producer.linger.ms": 5, "admin.request.timeout.ms": 9, "client.id": "c"})
    assert cfg.client_overrides("producer") == {"linger.ms": 5, "client.id": "c"}
    assert cfg.client_overrides("admin") == {"request.timeout.ms": 9, "client.id": "c"}
    assert cfg.client_overrides("main.consumer") == {"client.id": "c"}


# --- serdes ------------------------------------------------------------------------------------


class UpperSerde(Serde[str]):
    """A test serde reachable by dotted path."""

    name = "Upper"

    def serialize(self, topic: str | None, data: str | None) -> bytes | None:
        return None if data is None else data.upper().encode()

    def deserialize(self, topic: str | None, data: bytes | None) -> str | None:
        return None if data is None else data.decode()


UPPER = UpperSerde()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Serdes.Long(), Serdes.Long()),
        ("string", Serdes.String()),
        ("Long", Serdes.Long()),
        ("int", Serdes.Integer()),
        ("json", Serdes.Json()),
        ("streams_core.serde.Serdes.Double", Serdes.Double()),
        ("org.apache.kafka.common.serialization.Serdes$StringSerde", Serdes.String()),
        ("org.apache.kafka.common.serialization.Serdes$LongSerde", Serdes.Long()),
        ("org.apache.kafka.common.serialization.Serdes$IntegerSerde", Serdes.Integer()),
        ("org.apache.kafka.common.serialization.Serdes$DoubleSerde", Serdes.Double()),
        ("org.apache.kafka.common.serialization.Serdes$ByteArraySerde", Serdes.Bytes()),
        (Serdes.String, Serdes.String()),
        (f"{__name__}.UPPER", UPPER),
    ],
)
@pytest.mark.parametrize("key", ["default.key.serde", "default.value.serde"])
def test_serde_forms(key: str, value: Any, expected: Serde[Any]) -> None:
    assert StreamsConfig(BASE | {key: value})[key] is expected


def test_serde_class_by_dotted_path_is_instantiated() -> None:
    serde = config(default__value__serde=f"{__name__}.UpperSerde")["default.value.serde"]
    assert isinstance(serde, UpperSerde)


@pytest.mark.parametrize(
    "bad", ["strng", "org.apache.kafka.common.serialization.Serdes$FloatSerde", "no.such.module.Serde", 42]
)
@pytest.mark.parametrize("key", ["default.key.serde", "default.value.serde"])
def test_bad_serde_names_the_key(key: str, bad: Any) -> None:
    err = error_for(BASE | {key: bad})
    assert err.key == key
    assert str(err).startswith(f"{key}: ")


def test_bad_serde_lists_the_short_names() -> None:
    message = str(error_for(BASE | {"default.value.serde": "strng"}))
    for name in ("string", "long", "integer", "double", "json", "bytes"):
        assert name in message


def test_serde_factory_returning_something_else_is_rejected() -> None:
    err = error_for(BASE | {"default.value.serde": lambda: 5})
    assert err.key == "default.value.serde"
    assert "did not produce a Serde" in str(err)


# --- timestamp extractor and handlers ----------------------------------------------------------


def record_timestamp(record: Any, partition_time: int) -> int:
    """A timestamp extractor reachable by dotted path."""
    return 0


class CountingHandler:
    """A deserialization handler class reachable by dotted path."""

    def handle(self, *args: Any) -> str:
        return "continue"


class NeedsArguments:
    def __init__(self, required: int) -> None:
        self.required = required


def test_timestamp_extractor_by_dotted_path() -> None:
    assert config(default__timestamp__extractor=f"{__name__}.record_timestamp")[
        "default.timestamp.extractor"
    ] is record_timestamp


def test_timestamp_extractor_as_an_object_or_class() -> None:
    assert config(default__timestamp__extractor=record_timestamp)["default.timestamp.extractor"] is record_timestamp
    extractor = config(default__timestamp__extractor=CountingHandler)["default.timestamp.extractor"]
    assert isinstance(extractor, CountingHandler)


@pytest.mark.parametrize(
    "key",
    [
        "default.timestamp.extractor",
        "default.deserialization.exception.handler",
        "default.production.exception.handler",
    ],
)
def test_handler_class_by_dotted_path_is_instantiated(key: str) -> None:
    assert isinstance(StreamsConfig(BASE | {key: f"{__name__}.CountingHandler"})[key], CountingHandler)


@pytest.mark.parametrize(
    "key",
    [
        "default.timestamp.extractor",
        "default.deserialization.exception.handler",
        "default.production.exception.handler",
    ],
)
@pytest.mark.parametrize("path", ["no_such_module_xyz.Extractor", f"{__name__}.Missing", ".relative.Thing"])
def test_dotted_path_import_errors_name_the_key(key: str, path: str) -> None:
    err = error_for(BASE | {key: path})
    assert err.key == key
    assert "cannot import" in str(err)
    assert repr(path) in str(err)


def test_timestamp_extractor_without_a_module_is_rejected() -> None:
    err = error_for(BASE | {"default.timestamp.extractor": "extractor"})
    assert err.key == "default.timestamp.extractor"
    assert "dotted path" in str(err)


def test_class_that_cannot_be_instantiated_names_the_key() -> None:
    err = error_for(BASE | {"default.timestamp.extractor": f"{__name__}.NeedsArguments"})
    assert err.key == "default.timestamp.extractor"
    assert "NeedsArguments" in str(err)


# --- immutability and overrides ----------------------------------------------------------------


def test_config_is_read_only() -> None:
    cfg = StreamsConfig(BASE)
    with pytest.raises(TypeError):
        cfg["num.stream.threads"] = 2  # type: ignore[index]
    assert not hasattr(cfg, "__setitem__")


def test_with_overrides_returns_a_new_validated_config() -> None:
    cfg = config(num__stream__threads=2, linger__ms=5)
    other = cfg.with_overrides({"num.stream.threads": "3", "producer.acks": "all"})
    assert other["num.stream.threads"] == 3
    assert other["linger.ms"] == 5 and other["producer.acks"] == "all"
    assert other["application.id"] == "app"
    assert cfg["num.stream.threads"] == 2
    assert "producer.acks" not in cfg


def test_with_overrides_validates() -> None:
    with pytest.raises(ConfigError) as info:
        config().with_overrides({"num.stream.threads": 0})
    assert info.value.key == "num.stream.threads"


def test_a_config_can_be_built_from_another_keeping_what_was_explicit() -> None:
    eos = config(processing__guarantee="exactly_once_v2", consumer__fetch__max__bytes=1)
    copy = StreamsConfig(eos)
    assert copy == eos
    assert copy.explicit() == eos.explicit()
    assert not copy.is_set("commit.interval.ms")


def test_repr_shows_what_was_set() -> None:
    text = repr(config(num__stream__threads=2))
    assert text.startswith("StreamsConfig({")
    assert "'application.id': 'app'" in text and "'num.stream.threads': 2" in text
    assert "state.dir" not in text


# --- docs/configuration.md stays in step -------------------------------------------------------

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.mark.parametrize("key", sorted(StreamsConfig.documentation()))
def test_every_key_is_documented_with_its_default(key: str) -> None:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith(f"| `{key}` |")]
    assert len(rows) == 1, f"{key} missing from {DOC.name}"
    default, _ = StreamsConfig.documentation()[key]
    shown = {"state.dir": "<tmpdir>/kafka-streams", "application.server": '""'}.get(key, default)
    if shown is not None:
        assert f"| `{shown}` |" in rows[0]


def test_topic_prefixed_settings_are_internal_topic_configs() -> None:
    """Kafka Streams' `topic.` prefix: values as the broker reads them, kept through `with_overrides`."""
    config = StreamsConfig({"application.id": "a", "topic.segment.ms": 60_000, "topic.preallocate": False, "topic.x.y": "z"})
    assert config.topic_configs() == {"segment.ms": "60000", "preallocate": "false", "x.y": "z"}
    assert config["topic.segment.ms"] == "60000" and config.is_set("topic.x.y") and not config.is_set("x.y")
    assert config.with_overrides({"topic.segment.ms": 1}).topic_configs()["segment.ms"] == "1"
    with pytest.raises(ConfigError, match=r"topic\.bad"):
        StreamsConfig({"application.id": "a", "topic.bad": ["list"]})
    with pytest.raises(ConfigError, match=r"unknown configuration key.*topic\."):
        StreamsConfig({"application.id": "a", "topic.": "x"})
