"""streams_core.clients: Kafka property names to aiokafka arguments, the factories, and the
InternalTopicManager against a fake admin client that answers with aiokafka's own response types."""

from __future__ import annotations

import inspect
import pathlib
import ssl
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.errors import RequestTimedOutError
from aiokafka.protocol.admin import CreateTopicsResponse_v3, DeleteTopicsResponse_v3, DescribeConfigsResponse_v1
from aiokafka.protocol.metadata import MetadataResponse_v5

from streams_core import ConfigError, StreamsConfig
from streams_core.clients import (
    InternalTopicError,
    InternalTopicManager,
    KafkaTimeoutError,
    KafkaTopicPartition,
    NewTopicSpec,
    admin_kwargs,
    consumer_kwargs,
    create_admin,
    create_main_consumer,
    create_producer,
    create_restore_consumer,
    default_client_id,
    from_aiokafka,
    from_aiokafka_offsets,
    kafka_clients,
    producer_kwargs,
    to_aiokafka,
    to_aiokafka_offsets,
    to_aiokafka_partitions,
    validate_client_configs,
)
from streams_core.clients.client_config import CLIENT_PROPERTIES
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import CLIENT_KEYS

BASE = {"application.id": "app", "bootstrap.servers": "127.0.0.1:9092,127.0.0.2:9093"}
EOS = BASE | {"processing.guarantee": "exactly_once_v2"}


def cfg(**props: Any) -> StreamsConfig:
    """A config from BASE plus keyword arguments whose double underscores stand for dots."""
    return StreamsConfig(BASE | {k.replace("__", "."): v for k, v in props.items()})


def config_error(call: Any, *args: Any, **kwargs: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        call(*args, **kwargs)
    return info.value


# --- the property table matches aiokafka 0.14 ---------------------------------------------------

CONSTRUCTORS = {
    "consumer": AIOKafkaConsumer.__init__,
    "producer": AIOKafkaProducer.__init__,
    "admin": AIOKafkaAdminClient.__init__,
}


@pytest.mark.parametrize("key", sorted(CLIENT_PROPERTIES))
def test_every_mapped_kwarg_exists_in_the_aiokafka_constructors(key: str) -> None:
    prop = CLIENT_PROPERTIES[key]
    for family in prop.families:
        assert prop.kwarg in inspect.signature(CONSTRUCTORS[family]).parameters, (key, family)


_TRANSLATED_APART = {"client.id", "ssl.cafile", "ssl.capath", "ssl.certfile", "ssl.keyfile", "ssl.password", "sasl.jaas.config"}


@pytest.mark.parametrize("key", sorted(CLIENT_KEYS - _TRANSLATED_APART))
def test_every_bare_client_key_is_translated(key: str) -> None:
    assert key in CLIENT_PROPERTIES


# --- Kafka Streams' client defaults --------------------------------------------------------------


def test_main_consumer_defaults() -> None:
    assert consumer_kwargs(cfg()) == {
        "bootstrap_servers": ["127.0.0.1:9092", "127.0.0.2:9093"],
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "max_poll_records": 1000,
        "fetch_max_wait_ms": 100,
        "group_id": "app",
        "client_id": "app-StreamThread-1-consumer",
    }


def test_only_the_main_consumer_waits_less_for_a_fetch_and_a_setting_wins() -> None:
    assert "fetch_max_wait_ms" not in consumer_kwargs(cfg(), "restore.consumer")
    assert "fetch_max_wait_ms" not in consumer_kwargs(cfg(), "global.consumer")
    assert consumer_kwargs(cfg(**{"main.consumer.fetch.max.wait.ms": 500}))["fetch_max_wait_ms"] == 500
    assert consumer_kwargs(cfg(fetch__max__wait__ms=300))["fetch_max_wait_ms"] == 300


def test_restore_consumer_has_no_group_and_never_resets_on_its_own() -> None:
    kwargs = consumer_kwargs(cfg(auto__offset__reset="latest"), "restore.consumer", thread_index=2)
    assert kwargs["group_id"] is None
    assert kwargs["auto_offset_reset"] == "none"
    assert kwargs["enable_auto_commit"] is False
    assert kwargs["client_id"] == "app-StreamThread-2-restore-consumer"


def test_global_consumer_has_no_group() -> None:
    kwargs = consumer_kwargs(cfg(), "global.consumer")
    assert kwargs["group_id"] is None and kwargs["auto_offset_reset"] == "none"
    assert kwargs["client_id"] == "app-GlobalStreamThread-global-consumer"


def test_producer_defaults() -> None:
    assert producer_kwargs(cfg()) == {
        "bootstrap_servers": ["127.0.0.1:9092", "127.0.0.2:9093"],
        "linger_ms": 100,
        "acks": "all",
        "client_id": "app-StreamThread-1-producer",
    }


def test_admin_defaults() -> None:
    assert admin_kwargs(cfg()) == {
        "bootstrap_servers": ["127.0.0.1:9092", "127.0.0.2:9093"],
        "client_id": "app-admin",
    }


@pytest.mark.parametrize("client", ["main.consumer", "restore.consumer", "global.consumer"])
def test_exactly_once_consumers_read_committed(client: Any) -> None:
    assert consumer_kwargs(StreamsConfig(EOS), client)["isolation_level"] == "read_committed"
    assert "isolation_level" not in consumer_kwargs(cfg(), client)


def test_exactly_once_producer_is_idempotent_with_a_short_transaction_timeout() -> None:
    kwargs = producer_kwargs(StreamsConfig(EOS), transactional_id="app-0_1")
    assert kwargs["enable_idempotence"] is True
    assert kwargs["acks"] == "all"
    assert kwargs["transaction_timeout_ms"] == 10_000
    assert kwargs["transactional_id"] == "app-0_1"


def test_transactional_producer_under_at_least_once_is_idempotent_too() -> None:
    kwargs = producer_kwargs(cfg(), transactional_id="t")
    assert kwargs["enable_idempotence"] is True and kwargs["acks"] == "all"


def test_empty_transactional_id_is_rejected() -> None:
    with pytest.raises(ValueError, match="transactional_id"):
        producer_kwargs(cfg(), transactional_id="")


def test_bootstrap_servers_is_required() -> None:
    config = StreamsConfig({"application.id": "app"})
    for call in (consumer_kwargs, producer_kwargs, admin_kwargs):
        err = config_error(call, config)
        assert err.key == "bootstrap.servers"
        assert "required" in str(err)


# --- translation of Kafka property names ------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "text", "kwarg", "value"),
    [
        ("max.poll.records", "500", "max_poll_records", 500),
        ("session.timeout.ms", "6000", "session_timeout_ms", 6000),
        ("heartbeat.interval.ms", "2000", "heartbeat_interval_ms", 2000),
        ("max.poll.interval.ms", "60000", "max_poll_interval_ms", 60000),
        ("auto.offset.reset", "LATEST", "auto_offset_reset", "latest"),
        ("fetch.max.wait.ms", "50", "fetch_max_wait_ms", 50),
        ("fetch.min.bytes", "10", "fetch_min_bytes", 10),
        ("fetch.max.bytes", "1024", "fetch_max_bytes", 1024),
        ("max.partition.fetch.bytes", "2048", "max_partition_fetch_bytes", 2048),
        ("request.timeout.ms", "30000", "request_timeout_ms", 30000),
        ("retry.backoff.ms", "10", "retry_backoff_ms", 10),
        ("metadata.max.age.ms", "1000", "metadata_max_age_ms", 1000),
        ("connections.max.idle.ms", "5000", "connections_max_idle_ms", 5000),
        ("enable.auto.commit", "false", "enable_auto_commit", False),
        ("auto.commit.interval.ms", "100", "auto_commit_interval_ms", 100),
        ("check.crcs", "FALSE", "check_crcs", False),
        ("exclude.internal.topics", "true", "exclude_internal_topics", True),
        ("isolation.level", "read_committed", "isolation_level", "read_committed"),
        ("rebalance.timeout.ms", "20000", "rebalance_timeout_ms", 20000),
        ("client.rack", "rack-1", "client_rack", "rack-1"),
        ("security.protocol", "sasl_plaintext", "security_protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "scram-sha-512", "sasl_mechanism", "SCRAM-SHA-512"),
        ("sasl.plain.username", "user", "sasl_plain_username", "user"),
        ("sasl.plain.password", "secret", "sasl_plain_password", "secret"),
        ("sasl.kerberos.service.name", "kafka", "sasl_kerberos_service_name", "kafka"),
        ("sasl.kerberos.domain.name", "example.com", "sasl_kerberos_domain_name", "example.com"),
    ],
)
def test_consumer_keys_translate(key: str, text: str, kwarg: str, value: Any) -> None:
    assert consumer_kwargs(StreamsConfig(BASE | {f"consumer.{key}": text}))[kwarg] == value


@pytest.mark.parametrize(
    ("key", "text", "kwarg", "value"),
    [
        ("acks", "all", "acks", "all"),
        ("acks", "-1", "acks", "all"),
        ("acks", "1", "acks", 1),
        ("acks", "0", "acks", 0),
        ("acks", 1, "acks", 1),
        ("linger.ms", "5", "linger_ms", 5),
        ("compression.type", "GZIP", "compression_type", "gzip"),
        ("compression.type", "none", "compression_type", None),
        ("compression.type", "zstd", "compression_type", "zstd"),
        ("batch.size", "32768", "max_batch_size", 32768),
        ("max.batch.size", "32768", "max_batch_size", 32768),
        ("max.request.size", "2097152", "max_request_size", 2097152),
        ("enable.idempotence", "true", "enable_idempotence", True),
        ("transaction.timeout.ms", "30000", "transaction_timeout_ms", 30000),
        ("request.timeout.ms", "1000", "request_timeout_ms", 1000),
        ("security.protocol", "PLAINTEXT", "security_protocol", "PLAINTEXT"),
    ],
)
def test_producer_keys_translate(key: str, text: Any, kwarg: str, value: Any) -> None:
    assert producer_kwargs(StreamsConfig(BASE | {f"producer.{key}": text}))[kwarg] == value


def test_admin_keys_translate() -> None:
    kwargs = admin_kwargs(cfg(admin__request__timeout__ms="9000", retry__backoff__ms="5"))
    assert kwargs["request_timeout_ms"] == 9000
    assert kwargs["retry_backoff_ms"] == 5


def test_bare_keys_reach_every_client_that_knows_them_and_no_other() -> None:
    config = cfg(max__poll__records="7", linger__ms="3", acks="1", request__timeout__ms="1234")
    consumer, producer, admin = consumer_kwargs(config), producer_kwargs(config), admin_kwargs(config)
    assert consumer["max_poll_records"] == 7 and "linger_ms" not in consumer and "acks" not in consumer
    assert producer["linger_ms"] == 3 and producer["acks"] == 1 and "max_poll_records" not in producer
    assert "max_poll_records" not in admin and "linger_ms" not in admin
    assert consumer["request_timeout_ms"] == producer["request_timeout_ms"] == admin["request_timeout_ms"] == 1234


def test_precedence_main_consumer_beats_consumer_beats_bare() -> None:
    config = StreamsConfig(
        BASE
        | {
            "max.poll.records": "10",
            "consumer.max.poll.records": "20",
            "main.consumer.max.poll.records": "30",
            "session.timeout.ms": "6000",
            "consumer.session.timeout.ms": "7000",
        }
    )
    main = consumer_kwargs(config, "main.consumer")
    restore = consumer_kwargs(config, "restore.consumer")
    assert (main["max_poll_records"], main["session_timeout_ms"]) == (30, 7000)
    assert (restore["max_poll_records"], restore["session_timeout_ms"]) == (20, 7000)
    assert consumer_kwargs(cfg(max__poll__records="10"))["max_poll_records"] == 10


@pytest.mark.parametrize(
    ("key", "bad", "accepted"),
    [
        ("main.consumer.max.poll.records", "0", ">= 1"),
        ("consumer.max.poll.records", "many", "integer"),
        ("consumer.session.timeout.ms", True, "integer"),
        ("consumer.auto.offset.reset", "smallest", "earliest, latest, none"),
        ("consumer.isolation.level", "serializable", "read_uncommitted, read_committed"),
        ("consumer.check.crcs", "yes", "true or false"),
        ("producer.acks", "2", "all, -1, 0, 1"),
        ("producer.compression.type", "brotli", "none, gzip, snappy, lz4, zstd"),
        ("producer.linger.ms", "-1", ">= 0"),
        ("security.protocol", "TLS", "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
        ("sasl.mechanism", "MAGIC", "PLAIN"),
        ("sasl.plain.username", "", "non-empty string"),
    ],
)
def test_bad_values_name_the_key_as_written_and_what_is_accepted(key: str, bad: Any, accepted: str) -> None:
    err = config_error(validate_client_configs, StreamsConfig(BASE | {key: bad}))
    assert err.key == key
    assert accepted in str(err)


@pytest.mark.parametrize(
    ("key", "family"),
    [
        ("consumer.no.such.setting", "consumer"),
        ("main.consumer.delivery.timeout.ms", "consumer"),
        ("producer.delivery.timeout.ms", "producer"),
        ("producer.retries", "producer"),
        ("producer.max.in.flight.requests.per.connection", "producer"),
        ("admin.default.api.timeout.ms", "admin"),
        ("consumer.ssl.truststore.location", "consumer"),
    ],
)
def test_unsupported_client_keys_are_named(key: str, family: str) -> None:
    err = config_error(validate_client_configs, StreamsConfig(BASE | {key: "1"}))
    assert err.key == key
    assert f"unsupported {family} setting" in str(err)
    assert "supported:" in str(err)


@pytest.mark.parametrize(
    ("key", "applies_to"),
    [("consumer.linger.ms", "producer"), ("producer.max.poll.records", "consumer"), ("admin.acks", "producer")],
)
def test_prefixed_keys_of_another_client_kind_are_errors(key: str, applies_to: str) -> None:
    err = config_error(validate_client_configs, StreamsConfig(BASE | {key: "1"}))
    assert err.key == key
    assert applies_to in str(err)


@pytest.mark.parametrize(
    "key",
    [
        "consumer.group.id",
        "main.consumer.bootstrap.servers",
        "producer.transactional.id",
        "consumer.partition.assignment.strategy",
        "consumer.key.deserializer",
        "producer.value.serializer",
    ],
)
def test_keys_kafka_streams_manages_cannot_be_set(key: str) -> None:
    err = config_error(validate_client_configs, StreamsConfig(BASE | {key: "x"}))
    assert err.key == key
    assert "cannot be set" in str(err)


def test_auto_commit_cannot_be_enabled() -> None:
    err = config_error(consumer_kwargs, cfg(consumer__enable__auto__commit="true"))
    assert err.key == "consumer.enable.auto.commit"
    assert "Kafka Streams commits" in str(err)


def test_exactly_once_consumer_must_read_committed() -> None:
    config = StreamsConfig(EOS | {"main.consumer.isolation.level": "read_uncommitted"})
    err = config_error(consumer_kwargs, config)
    assert err.key == "main.consumer.isolation.level"
    assert "exactly_once_v2" in str(err)


@pytest.mark.parametrize(("key", "bad"), [("producer.acks", "1"), ("producer.enable.idempotence", "false")])
def test_exactly_once_producer_needs_acks_all_and_idempotence(key: str, bad: str) -> None:
    err = config_error(producer_kwargs, StreamsConfig(EOS | {key: bad}))
    assert err.key == key
    assert "exactly-once" in str(err)


def test_transaction_timeout_must_cover_the_commit_interval() -> None:
    config = StreamsConfig(EOS | {"commit.interval.ms": 20_000})
    err = config_error(producer_kwargs, config)
    assert err.key == "commit.interval.ms"
    assert "10000 is below commit.interval.ms 20000" in str(err)
    longer = StreamsConfig(EOS | {"commit.interval.ms": 20_000, "producer.transaction.timeout.ms": "30000"})
    assert producer_kwargs(longer)["transaction_timeout_ms"] == 30_000
    err = config_error(producer_kwargs, StreamsConfig(EOS | {"producer.transaction.timeout.ms": "50"}))
    assert err.key == "producer.transaction.timeout.ms"


def test_validate_client_configs_accepts_a_full_config() -> None:
    validate_client_configs(
        StreamsConfig(
            EOS
            | {
                "client.id": "svc",
                "max.poll.records": "100",
                "linger.ms": "5",
                "acks": "all",
                "main.consumer.session.timeout.ms": "6000",
                "restore.consumer.max.poll.records": "5000",
                "producer.compression.type": "gzip",
                "admin.request.timeout.ms": "5000",
            }
        )
    )


# --- client ids and static membership ---------------------------------------------------------------


def test_client_ids_follow_kafka_streams_naming() -> None:
    config = cfg(client__id="svc")
    assert default_client_id(config, "main.consumer", 3) == "svc-StreamThread-3-consumer"
    assert default_client_id(config, "restore.consumer", 3) == "svc-StreamThread-3-restore-consumer"
    assert default_client_id(config, "producer", 3) == "svc-StreamThread-3-producer"
    assert default_client_id(config, "admin") == "svc-admin"
    assert default_client_id(cfg(), "admin") == "app-admin"


def test_prefixed_client_id_is_used_as_is_and_an_explicit_one_wins() -> None:
    config = cfg(client__id="svc", main__consumer__client__id="mine", producer__client__id="prod")
    assert consumer_kwargs(config)["client_id"] == "mine"
    assert consumer_kwargs(config, "restore.consumer")["client_id"] == "svc-StreamThread-1-restore-consumer"
    assert producer_kwargs(config)["client_id"] == "prod"
    assert consumer_kwargs(config, client_id="given")["client_id"] == "given"
    assert admin_kwargs(config, client_id="adm")["client_id"] == "adm"


def test_group_id_defaults_to_application_id() -> None:
    assert consumer_kwargs(cfg(), group_id="other")["group_id"] == "other"


def test_group_instance_id_is_suffixed_per_thread_and_dropped_for_restore() -> None:
    config = cfg(consumer__group__instance__id="pod-1")
    assert consumer_kwargs(config, thread_index=2)["group_instance_id"] == "pod-1-2"
    assert "group_instance_id" not in consumer_kwargs(config, "restore.consumer")


# --- TLS ---------------------------------------------------------------------------------------------


def test_ssl_protocol_without_files_uses_the_system_trust_store() -> None:
    kwargs = consumer_kwargs(cfg(security__protocol="SSL"))
    assert kwargs["security_protocol"] == "SSL"
    assert isinstance(kwargs["ssl_context"], ssl.SSLContext)


def test_ssl_context_object_passes_through() -> None:
    context = ssl.create_default_context()
    assert producer_kwargs(cfg(producer__ssl__context=context))["ssl_context"] is context


def test_missing_ssl_file_names_the_key(tmp_path: Any) -> None:
    err = config_error(admin_kwargs, cfg(ssl__cafile=str(tmp_path / "missing.pem")))
    assert err.key == "ssl.cafile"
    assert "SSL context" in str(err)


def test_missing_prefixed_ssl_file_names_the_prefixed_key(tmp_path: Any) -> None:
    err = config_error(producer_kwargs, cfg(producer__ssl__certfile=str(tmp_path / "missing.pem")))
    assert err.key == "producer.ssl.certfile"


def test_ssl_context_must_be_an_ssl_context() -> None:
    assert config_error(admin_kwargs, cfg(admin__ssl__context="ctx")).key == "admin.ssl.context"


# --- factories -----------------------------------------------------------------------------------------


class Recorder:
    """Stands in for an aiokafka client class and records how it was built."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs
        self.subscribed: tuple[Any, ...] | None = None

    def subscribe(self, topics: list[str], listener: Any = None) -> None:
        self.subscribed = (topics, listener)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AIOKafkaConsumer", "AIOKafkaProducer", "AIOKafkaAdminClient"):
        monkeypatch.setattr(kafka_clients, name, Recorder)


@pytest.mark.usefixtures("recorded")
def test_main_consumer_gets_exactly_one_assignor_and_may_subscribe() -> None:
    assignor, listener = RoundRobinPartitionAssignor(), object()
    consumer: Any = create_main_consumer(
        cfg(), assignor=assignor, thread_index=2, topics=["in"], rebalance_listener=listener
    )
    assert consumer.kwargs["partition_assignment_strategy"] == (assignor,)
    assert consumer.kwargs["group_id"] == "app"
    assert consumer.kwargs["client_id"] == "app-StreamThread-2-consumer"
    assert consumer.subscribed == (["in"], listener)
    assert create_main_consumer(cfg(), assignor=assignor).subscribed is None


@pytest.mark.usefixtures("recorded")
def test_rebalance_listener_needs_topics() -> None:
    with pytest.raises(ValueError, match="needs topics"):
        create_main_consumer(cfg(), assignor=RoundRobinPartitionAssignor(), rebalance_listener=object())


@pytest.mark.usefixtures("recorded")
def test_other_factories_pass_the_translated_arguments() -> None:
    restore: Any = create_restore_consumer(cfg())
    producer: Any = create_producer(StreamsConfig(EOS), transactional_id="app-0_0")
    admin: Any = create_admin(cfg())
    assert restore.kwargs == consumer_kwargs(cfg(), "restore.consumer")
    assert producer.kwargs == producer_kwargs(StreamsConfig(EOS), transactional_id="app-0_0")
    assert admin.kwargs == admin_kwargs(cfg())


async def test_factories_build_real_aiokafka_clients_without_connecting() -> None:
    config = StreamsConfig(EOS | {"max.poll.records": "10", "producer.linger.ms": "1"})
    consumer = create_main_consumer(config, assignor=RoundRobinPartitionAssignor())
    restore = create_restore_consumer(config)
    producer = create_producer(config, transactional_id="app-0_0")
    admin = create_admin(config)
    try:
        assert isinstance(consumer, AIOKafkaConsumer) and isinstance(restore, AIOKafkaConsumer)
        assert isinstance(producer, AIOKafkaProducer) and isinstance(admin, AIOKafkaAdminClient)
    finally:
        await consumer.stop()
        await restore.stop()
        await producer.stop()
        await admin.close()


# --- TopicPartition conversions ----------------------------------------------------------------------


def test_topic_partition_conversions() -> None:
    ours, theirs = TopicPartition("t", 1), KafkaTopicPartition("t", 1)
    assert type(to_aiokafka(ours)) is KafkaTopicPartition and to_aiokafka(ours) == theirs
    assert type(from_aiokafka(theirs)) is TopicPartition and from_aiokafka(theirs) == ours
    assert to_aiokafka(theirs) is theirs and from_aiokafka(ours) is ours
    assert to_aiokafka_offsets({ours: 5}) == {theirs: 5}
    assert all(type(tp) is KafkaTopicPartition for tp in to_aiokafka_offsets({ours: 5}))
    assert all(type(tp) is TopicPartition for tp in from_aiokafka_offsets({theirs: 7}))
    assert to_aiokafka_partitions([ours, TopicPartition("u", 0)]) == [theirs, KafkaTopicPartition("u", 0)]


def test_conversions_accept_any_object_with_topic_and_partition() -> None:
    class Duck:
        topic, partition = "d", 4

    assert to_aiokafka(Duck()) == KafkaTopicPartition("d", 4)
    assert from_aiokafka(Duck()) == TopicPartition("d", 4)


# --- InternalTopicManager against a fake admin ---------------------------------------------------------


class FakeAdmin:
    """A broker's topic metadata behind aiokafka's admin methods and response types.

    `pending` topics appear without leaders for that many metadata reads after creation;
    `create_errors` answers CreateTopics for a topic with the given error codes, one per call.
    """

    def __init__(self, topics: dict[str, int] | None = None, *, default_rf: int = 1, brokers: int = 1) -> None:
        self.topics: dict[str, int] = dict(topics or {})
        self.leaderless: dict[str, int] = {}
        self.pending = 0
        self.create_errors: dict[str, list[int]] = {}
        self.created: list[NewTopic] = []
        self.create_calls = 0
        self.deleted: list[str] = []
        self.default_rf = default_rf
        self.brokers = brokers

    async def describe_topics(self, topics: list[str] | None = None) -> list[Any]:
        assert topics is None, "metadata for named topics may auto-create them"
        rows = []
        for name, count in self.topics.items():
            leader = -1 if self.leaderless.get(name, 0) > 0 else 1
            self.leaderless[name] = self.leaderless.get(name, 0) - 1
            rows.append((0, name, False, [(0, p, leader, [1], [1], []) for p in range(count)]))
        response = MetadataResponse_v5(
            throttle_time_ms=0, brokers=[(1, "h", 9092, None)], cluster_id="c", controller_id=1, topics=rows
        )
        return response.to_object()["topics"]

    async def create_topics(self, new_topics: list[NewTopic], timeout_ms: int | None = None) -> Any:
        self.create_calls += 1
        rows = []
        for topic in new_topics:
            errors = self.create_errors.get(topic.name)
            code = errors.pop(0) if errors else 0
            if code == 0 and topic.name in self.topics:
                code = 36
            if code == 0:
                self.topics[topic.name] = topic.num_partitions
                self.leaderless[topic.name] = self.pending
                self.created.append(topic)
            rows.append((topic.name, code, None if code == 0 else "broker says no"))
        return CreateTopicsResponse_v3(throttle_time_ms=0, topic_errors=rows)

    async def delete_topics(self, topics: list[str], timeout_ms: int | None = None) -> Any:
        rows = []
        for name in topics:
            rows.append((name, 0 if self.topics.pop(name, None) is not None else 3))
            self.deleted.append(name)
        return DeleteTopicsResponse_v3(throttle_time_ms=0, topic_error_codes=rows)

    async def describe_cluster(self) -> dict[str, Any]:
        return {"brokers": [{"node_id": n, "host": "h", "port": 9092 + n, "rack": None} for n in range(self.brokers)]}

    async def describe_configs(self, config_resources: list[Any]) -> list[Any]:
        entry = ("default.replication.factor", str(self.default_rf), False, True, False, [])
        resource = (0, None, 4, config_resources[0].name, [entry])
        return [DescribeConfigsResponse_v1(throttle_time_ms=0, resources=[resource])]


def manager(admin: FakeAdmin, **kwargs: Any) -> InternalTopicManager:
    return InternalTopicManager(admin, **({"timeout_ms": 500, "retry_backoff_ms": 1} | kwargs))


async def test_ensure_topics_creates_only_the_missing_ones() -> None:
    admin = FakeAdmin({"app-store-changelog": 2})
    specs = [
        NewTopicSpec("app-store-changelog", 2, {"cleanup.policy": "compact"}),
        NewTopicSpec("app-agg-repartition", 2, {"cleanup.policy": "delete"}),
    ]
    assert await manager(admin).ensure_topics(specs) == ["app-agg-repartition"]
    (created,) = admin.created
    assert (created.name, created.num_partitions, created.replication_factor) == ("app-agg-repartition", 2, 1)
    assert created.topic_configs == {"cleanup.policy": "delete"}
    assert await manager(admin).ensure_topics(specs) == []
    assert admin.create_calls == 1


async def test_ensure_topics_waits_for_leaders() -> None:
    admin = FakeAdmin()
    admin.pending = 3
    await manager(admin).ensure_topics([NewTopicSpec("t", 3)])
    assert admin.leaderless["t"] < 0


async def test_ensure_topics_times_out_naming_the_topics() -> None:
    admin = FakeAdmin()
    admin.pending = 10**9
    with pytest.raises(InternalTopicError, match="topics t did not appear in the metadata"):
        await manager(admin, timeout_ms=20).ensure_topics([NewTopicSpec("t", 1)])


async def test_wrong_partition_count_is_a_clear_error() -> None:
    admin = FakeAdmin({"app-store-changelog": 3, "ok": 1})
    with pytest.raises(InternalTopicError) as info:
        await manager(admin).ensure_topics([NewTopicSpec("app-store-changelog", 2), NewTopicSpec("ok", 1)])
    assert "app-store-changelog (expected 2, found 3)" in str(info.value)
    assert admin.create_calls == 0


def after_first_describe(admin: FakeAdmin, change: Any) -> None:
    """Runs `change` right after the manager's first metadata read, as another instance would."""
    original = admin.describe_topics

    async def describe(topics: list[str] | None = None) -> list[Any]:
        admin.describe_topics = original  # type: ignore[method-assign]
        rows = await original(topics)
        change()
        return rows

    admin.describe_topics = describe  # type: ignore[method-assign]


async def test_topic_created_concurrently_is_fine() -> None:
    admin = FakeAdmin()
    after_first_describe(admin, lambda: admin.topics.update(t=4))
    assert await manager(admin).ensure_topics([NewTopicSpec("t", 4)]) == []
    assert admin.create_calls == 1


async def test_concurrent_creation_with_another_count_is_caught() -> None:
    admin = FakeAdmin()
    after_first_describe(admin, lambda: admin.topics.update(t=5))
    with pytest.raises(InternalTopicError, match=r"t \(expected 4, found 5\)"):
        await manager(admin).ensure_topics([NewTopicSpec("t", 4)])


async def test_retriable_create_errors_are_retried() -> None:
    admin = FakeAdmin()
    admin.create_errors["t"] = [7, 7]
    assert await manager(admin).ensure_topics([NewTopicSpec("t", 1)]) == ["t"]
    assert admin.create_calls == 3


async def test_admin_client_exceptions_are_retried_only_when_retriable() -> None:
    admin = FakeAdmin()
    create, failures = admin.create_topics, [KafkaTimeoutError(), RequestTimedOutError()]

    async def flaky(new_topics: list[NewTopic], timeout_ms: int | None = None) -> Any:
        if failures:
            raise failures.pop(0)
        return await create(new_topics, timeout_ms)

    admin.create_topics = flaky  # type: ignore[method-assign]
    with pytest.raises(KafkaTimeoutError):
        await manager(admin).ensure_topics([NewTopicSpec("t", 1)])
    failures[:] = [RequestTimedOutError()]
    assert await manager(admin).ensure_topics([NewTopicSpec("t", 1)]) == ["t"]


async def test_other_create_errors_name_the_topic() -> None:
    admin = FakeAdmin()
    admin.create_errors["t"] = [38]
    expected = "cannot create topic 't': InvalidReplicationFactorError: broker says no"
    with pytest.raises(InternalTopicError, match=expected):
        await manager(admin).ensure_topics([NewTopicSpec("t", 1)])


async def test_replication_factor_minus_one_reads_the_broker_default() -> None:
    admin = FakeAdmin(default_rf=3, brokers=3)
    topic_manager = manager(admin)
    await topic_manager.ensure_topics([NewTopicSpec("a", 1), NewTopicSpec("b", 1, replication_factor=2)])
    await manager(admin, replication_factor=1).ensure_topics([NewTopicSpec("c", 1)])
    assert {t.name: t.replication_factor for t in admin.created} == {"a": 3, "b": 2, "c": 1}


async def test_partition_counts_report_none_for_missing_topics() -> None:
    admin = FakeAdmin({"in": 4, "other": 1})
    assert await manager(admin).partition_counts(["in", "missing"]) == {"in": 4, "missing": None}


async def test_delete_topics_ignores_absent_ones_and_waits() -> None:
    admin = FakeAdmin({"a": 1, "b": 1})
    await manager(admin).delete_topics(["a", "gone", "a"])
    assert admin.topics == {"b": 1}
    assert admin.deleted == ["a", "gone"]


async def test_ensure_topics_with_nothing_to_do_makes_no_calls() -> None:
    admin = FakeAdmin()
    assert await manager(admin).ensure_topics([]) == []
    await manager(admin).delete_topics([])
    assert admin.create_calls == 0 and admin.deleted == []


def test_specs_are_validated() -> None:
    with pytest.raises(ValueError, match="illegal topic name"):
        NewTopicSpec("bad name", 1)
    with pytest.raises(ValueError, match="at least one partition"):
        NewTopicSpec("t", 0)


async def test_conflicting_specs_for_one_topic_are_rejected() -> None:
    with pytest.raises(ValueError, match="requested with 1 and 2 partitions"):
        await manager(FakeAdmin()).ensure_topics([NewTopicSpec("t", 1), NewTopicSpec("t", 2)])


# --- docs/configuration.md stays in step ------------------------------------------------------------

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.mark.parametrize("key", sorted(CLIENT_PROPERTIES))
def test_every_client_property_is_documented_with_its_aiokafka_argument(key: str) -> None:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith(f"| `{key}` |")]
    assert len(rows) == 1, f"{key} missing from {DOC.name}"
    assert f"| `{CLIENT_PROPERTIES[key].kwarg}` |" in rows[0]
